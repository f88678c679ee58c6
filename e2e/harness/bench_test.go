package harness_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

// BenchmarkUpdateFanout is the floor under topology-aware's
// BenchmarkCreateContainer: the same round trip and pods, with a plugin
// that does nothing but what NRI makes every such plugin do. Every other
// created container updates every live container's cpuset.cpus in the same
// call (the test plugin's fan-out, as an exclusive grant that shrinks the
// shared pool does), the others update nobody. What it measures is NRI's
// and the runtime's cost of those calls (the harness's proxy hop included),
// whatever the plugin's own work. Its figures are in docs/benchmarks.md.
func BenchmarkUpdateFanout(b *testing.B) {
	bin := harness.BuildPlugin(b, testPlugin)
	for _, live := range []int{0, 100, 250, 500, 1000, 10000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			rt := harness.New(b)
			// env: {}: the fan-out and nothing else.
			rt.StartPlugin(b, bin, "50", "e2e-test", harness.WithConfig("env: {}\n"),
				harness.WithArgs("--http-addr", "127.0.0.1:0", "--log-level", "info"))
			// One container per pod: live counts containers.
			manifest := pod(b, "burstable.yaml")
			manifest.Spec.Containers = manifest.Spec.Containers[:1]
			for i := range live {
				manifest.Name = fmt.Sprintf("live-%d", i)
				rt.RunPod(b, manifest)
			}
			var fanout, plain []time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				manifest.Name = fmt.Sprintf("bench-%d", i)
				manifest.Annotations = nil
				if i%2 == 0 {
					manifest.Annotations = map[string]string{"fanout.e2e.nri-suite.io/cpus": "2-255"}
				}
				p := rt.NewPod(b, manifest)
				require.NoError(b, rt.RunPodSandbox(p))
				c := p.Containers()[0]
				b.StartTimer()
				start := time.Now()
				err := rt.CreateContainer(c)
				took := time.Since(start)
				b.StopTimer()
				require.NoError(b, err)
				if i%2 == 0 {
					fanout = append(fanout, took)
				} else {
					plain = append(plain, took)
				}
				i++
				rt.RemovePod(b, p)
				b.StartTimer()
			}
			harness.ReportPercentiles(b, "", append(append([]time.Duration{}, fanout...), plain...))
			harness.ReportPercentiles(b, "fanout-", fanout)
			harness.ReportPercentiles(b, "plain-", plain)
		})
	}
}
