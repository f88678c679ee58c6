package simulate

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

// churnWorkload writes a workload of steps steps to dir: a node filled
// with pods of every QoS class (1,000 for 2,400 steps, most of them on the
// shared pool), then churn (pods deleted and created, in-place resizes),
// and a plugin restart every fifth of the steps. The same seed gives the
// same file.
func churnWorkload(t testing.TB, dir string, steps int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 16))
	var b strings.Builder
	b.WriteString("steps:\n")
	type livePod struct {
		name string
		kind int
	}
	var live []livePod
	created := 0
	create := func() {
		name := fmt.Sprintf("p%d", created)
		created++
		kind := rng.IntN(100)
		fmt.Fprintf(&b, "- create:\n    pod:\n      apiVersion: v1\n      kind: Pod\n      metadata: {name: %s, namespace: ns%d}\n      spec:\n", name, created%7)
		if kind%5 == 0 {
			b.WriteString("        initContainers: [{name: init, image: x, resources: {requests: {cpu: 100m}}}]\n")
		}
		b.WriteString("        containers:\n        - name: app\n          image: x\n")
		switch {
		case kind < 60: // Burstable, on the shared pool
			fmt.Fprintf(&b, "          resources: {requests: {cpu: %dm, memory: 256Mi}, limits: {cpu: \"4\", memory: 1Gi}}\n", 500*(1+rng.IntN(6)))
		case kind < 75: // BestEffort
			b.WriteString("          resources: {}\n")
		case kind < 85: // Guaranteed, fractional: shared
			b.WriteString("          resources: {limits: {cpu: 500m, memory: 512Mi}}\n")
		default: // Guaranteed with whole CPUs: exclusive while they fit
			fmt.Fprintf(&b, "          resources: {limits: {cpu: \"%d\", memory: 1Gi}}\n", []int{1, 1, 1, 2, 2, 4}[rng.IntN(6)])
		}
		live = append(live, livePod{name: name, kind: kind})
	}
	namespace := func(name string) string {
		var n int
		_, _ = fmt.Sscanf(name, "p%d", &n)
		return fmt.Sprintf("ns%d", (n+1)%7)
	}
	fill, restartEvery := steps*5/12, steps/5
	for i := range steps {
		switch r := rng.IntN(100); {
		case i > 0 && i%restartEvery == 0:
			b.WriteString("- restart:\n")
		case i < fill || len(live) < 10 || r < 40:
			create()
		case r < 80:
			j := rng.IntN(len(live))
			fmt.Fprintf(&b, "- delete: {pod: %s, namespace: %s}\n", live[j].name, namespace(live[j].name))
			live = append(live[:j], live[j+1:]...)
		default:
			// Resize within the pod's QoS class.
			p := live[rng.IntN(len(live))]
			var res string
			switch {
			case p.kind < 60:
				res = fmt.Sprintf("{requests: {cpu: %dm, memory: 256Mi}, limits: {cpu: \"4\", memory: 1Gi}}", 500*(1+rng.IntN(6)))
			case p.kind < 75:
				res = "{}"
			case p.kind < 85:
				res = "{limits: {cpu: 700m, memory: 512Mi}}"
			default:
				res = fmt.Sprintf("{limits: {cpu: \"%d\", memory: 1Gi}}", 1+rng.IntN(4))
			}
			fmt.Fprintf(&b, "- resize: {pod: %s, namespace: %s, container: app, resources: %s}\n", p.name, namespace(p.name), res)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("churn-%d.yaml", steps))
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// TestGeneratedWorkload runs a generated workload of every QoS class with
// churn, resizes and restarts, and checks every step as the golden ones
// are checked.
func TestGeneratedWorkload(t *testing.T) {
	workload := churnWorkload(t, t.TempDir(), 300, 1)
	stdout, stderr, code := runCLI(t, "--sysfs", filepath.Join(fixtureDir(fixture80), "sysfs"), "--workload", workload)
	require.Equal(t, ExitOK, code, stderr)
	r := decodeReport(t, stdout)
	require.Len(t, r.Steps, 300)
	topo, err := sysfs.Discover(filepath.Join(fixtureDir(fixture80), "sysfs"))
	require.NoError(t, err)
	checkReport(t, topo, r)
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkSimulate runs 2,400 steps of churnWorkload on the 80-CPU
// fixture with the JSON stream (and, in "html", the placement map too):
// in-process, for the time and the allocations and for profiles, and as
// the binary, for its peak resident memory (max-rss-MiB) and the CPU time
// it used (cpu-s/op: user and system, which a loaded machine does not
// inflate as it does the wall time). Both report the bytes of output per
// run.
func BenchmarkSimulate(b *testing.B) {
	dir := b.TempDir()
	workload := churnWorkload(b, dir, 2400, 1)
	args := []string{"--sysfs", filepath.Join(fixtureDir(fixture80), "sysfs"), "--workload", workload}
	b.Run("in-process", func(b *testing.B) {
		var out countingWriter
		for b.Loop() {
			out.n = 0
			var stderr bytes.Buffer
			if code := Run(args, &out, &stderr); code != ExitOK {
				b.Fatalf("exit %d: %s", code, stderr.String())
			}
		}
		b.ReportMetric(float64(out.n)/(1<<20), "output-MiB")
	})
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"binary", nil},
		{"binary-html", []string{"--html", filepath.Join(dir, "map.html")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bin := harness.BuildPlugin(b, pluginPkg)
			var maxRSS int64
			var cpu time.Duration
			var out countingWriter
			runs := 0
			for b.Loop() {
				out.n = 0
				cmd := exec.Command(bin, append(append([]string{"simulate"}, args...), tc.extra...)...)
				cmd.Stdout, cmd.Stderr = &out, io.Discard
				require.NoError(b, cmd.Run())
				usage := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				maxRSS = max(maxRSS, usage.Maxrss)
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				runs++
			}
			b.ReportMetric(float64(maxRSS)/1024, "max-rss-MiB") // Maxrss is in KiB on Linux
			b.ReportMetric(cpu.Seconds()/float64(runs), "cpu-s/op")
			b.ReportMetric(float64(out.n)/(1<<20), "output-MiB")
		})
	}
}
