// Package specgen writes synthetic CDI spec directories for the
// device-injector's benchmarks: many spec files of many devices, each a
// char node backed by /dev/null (1:3, on every Linux host) under its own
// container path, with an env var, so that every device resolves and has
// edits of each common kind.
package specgen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Vendor is the vendor of the spec file i; each file has a vendor of its
// own, so that no two files define the same device.
func Vendor(i int) string { return fmt.Sprintf("vendor%03d.example.com", i) }

// Name is the CDI name of device j of file i.
func Name(i, j int) string { return fmt.Sprintf("%s/dev=d%d", Vendor(i), j) }

// Spec renders spec file i with devices devices, plus the extra device
// names given (for a changed file).
func Spec(i, devices int, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cdiVersion: \"0.6.0\"\nkind: %s/dev\ndevices:\n", Vendor(i))
	names := make([]string, 0, devices+len(extra))
	for j := range devices {
		names = append(names, fmt.Sprintf("d%d", j))
	}
	names = append(names, extra...)
	for _, name := range names {
		fmt.Fprintf(&b, `- name: %q
  containerEdits:
    deviceNodes:
    - path: /dev/bench/%03d-%s
      hostPath: /dev/null
      type: c
      major: 1
      minor: 3
    env: [BENCH_%03d_%s=1]
`, name, i, name, i, strings.ToUpper(name))
	}
	return b.String()
}

// Write fills dir with files spec files of devices devices each.
func Write(dir string, files, devices int) error {
	for i := range files {
		if err := os.WriteFile(Path(dir, i), []byte(Spec(i, devices)), 0o644); err != nil {
			return fmt.Errorf("write benchmark spec: %w", err)
		}
	}
	return nil
}

// Path is where Write puts spec file i.
func Path(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("vendor%03d.yaml", i)) }
