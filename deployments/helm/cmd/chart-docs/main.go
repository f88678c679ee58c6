// Command chart-docs writes the table of the chart's values into its
// README, from values.yaml and values.schema.json (internal/valuesdoc).
// `make chart-docs` runs it; the chart's tests fail while the README's
// table differs from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nri-suite/nri-suite/deployments/helm/internal/valuesdoc"
)

func main() {
	chart := flag.String("chart", "nri-suite", "the chart's directory")
	flag.Parse()
	if err := run(*chart); err != nil {
		fmt.Fprintln(os.Stderr, "chart-docs:", err)
		os.Exit(1)
	}
}

func run(chart string) error {
	readme := filepath.Join(chart, "README.md")
	updated, err := valuesdoc.README(chart)
	if err != nil {
		return err
	}
	return os.WriteFile(readme, updated, 0o644)
}
