package plugin

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	// probeTimeout bounds the whole GET; the chart's probe allows 5 s.
	probeTimeout = 4 * time.Second
	// maxProbeAnswer is what is printed of an answer at most: a /readyz reason is
	// an error of the runner's, bounded by common/quote.
	maxProbeAnswer = 4 << 10
)

// probe is `nri-<plugin> probe URL`: it GETs URL (the plugin's own /readyz) and
// prints the answer, exiting 0 on 200, 1 otherwise and 2 on bad usage. The chart
// runs it as each plugin's startup probe: the kubelet puts an exec probe's output
// into the pod's events ("Startup probe failed: not ready: configure plugin ...:
// unknown key ..."), where an HTTP probe's event carries only the status code.
func probe(args []string, out io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(out, "usage: nri-<plugin> probe URL")
		return 2
	}
	client := &http.Client{Timeout: probeTimeout}
	resp, err := client.Get(args[0])
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeAnswer))
	if err != nil {
		fmt.Fprintf(out, "reading the answer of %s: %v\n", args[0], err)
		return 1
	}
	fmt.Fprintln(out, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
