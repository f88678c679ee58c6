package main_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/specgen"
)

// BenchmarkHarnessCreateContainer is one container's creation through the
// real NRI adaptation and the plugin binary (plugin mode), asking for 4 of
// 1,000 devices in 100 spec files: the ttrpc round trip, the handler, and
// the harness applying the adjustment to the OCI spec. Making and removing
// the pod is not timed.
func BenchmarkHarnessCreateContainer(b *testing.B) {
	specs := map[string]string{}
	for i := range 100 {
		specs[filepath.Base(specgen.Path("", i))] = specgen.Spec(i, 10)
	}
	n := startNode(b, "mode: plugin\nhealth-interval: 1h\n", specs)
	manifest := podYAML("bench", fmt.Sprintf("    cdi-devices.nri-suite.io: %s,%s,%s,%s",
		specgen.Name(3, 1), specgen.Name(42, 7), specgen.Name(77, 0), specgen.Name(99, 9)), "app")
	for b.Loop() {
		b.StopTimer()
		p := n.rt.NewPod(b, harness.ParsePod(b, manifest))
		require.NoError(b, n.rt.RunPodSandbox(p))
		c := p.Container("app")
		b.StartTimer()
		require.NoError(b, n.rt.CreateContainer(c))
		b.StopTimer()
		require.NotNil(b, c.Spec().Device("/dev/bench/099-d9"), "the device is in the spec")
		n.rt.RemovePod(b, p)
		b.StartTimer()
	}
}
