package nriplugin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// BenchmarkCreateContainer measures the plugin's CreateContainer handler
// in-process (no NRI transport) with live shared containers on the 256-CPU
// fixture, alternating an exclusive and a shared container, each stopped
// again after its creation; the writer behind the handlers runs meanwhile.
func BenchmarkCreateContainer(b *testing.B) {
	for _, live := range []int{0, 100, 250, 500} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			p := newTestPlugin(b, "nps4-2s-12n-256c-cpuless", nil)
			v := newRuntimeView()
			synchronize(b, p.Plugin, v)
			for i := range live {
				pod, ctr := nriPod(b, "burstable.yaml", "web")
				ctr.Id = fmt.Sprintf("live-%d", i)
				_, _, err := p.CreateContainer(context.Background(), pod, ctr)
				require.NoError(b, err)
			}
			files := [][2]string{{"guaranteed-2cpu.yaml", "app"}, {"burstable.yaml", "web"}}
			var took []time.Duration
			updates := 0
			i := 0
			for b.Loop() {
				f := files[i%2]
				pod, ctr := nriPod(b, f[0], f[1])
				ctr.Id = fmt.Sprintf("bench-%d", i)
				i++
				start := time.Now()
				_, u, err := p.CreateContainer(context.Background(), pod, ctr)
				took = append(took, time.Since(start))
				require.NoError(b, err)
				updates += len(u)
				_, err = p.StopContainer(context.Background(), pod, &api.Container{Id: ctr.Id})
				require.NoError(b, err)
			}
			reportPercentiles(b, took)
			b.ReportMetric(float64(updates)/float64(len(took)), "updates/op")
		})
	}
}

// reportPercentiles reports the p50 and p99 of the measured durations.
func reportPercentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
