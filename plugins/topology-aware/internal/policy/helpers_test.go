package policy

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

const fixtures = "../../../../common/topology/testdata"

// allFixtures are the committed machines: four described, one captured.
var allFixtures = []string{"smt-1s-8c", "smt-2s-12c-interleaved", "snc-2s-4n-80c", "nps4-2s-12n-256c-cpuless", "this-machine"}

// fixture loads a machine: from its description when it has one, else by
// discovering its recorded sysfs tree.
func fixture(tb testing.TB, name string) *topology.Topology {
	tb.Helper()
	if name == "this-machine" {
		t, err := sysfs.Discover(filepath.Join(fixtures, name, "sysfs"))
		require.NoError(tb, err)
		return t
	}
	d, err := description.Load(filepath.Join(fixtures, name, "description.yaml"))
	require.NoError(tb, err)
	t, err := d.Topology()
	require.NoError(tb, err)
	return t
}

func newPolicy(tb testing.TB, t *topology.Topology, cfg Config) *Policy {
	tb.Helper()
	p, err := New(t, cfg)
	require.NoError(tb, err)
	return p
}

const gib = int64(1) << 30

// guaranteed is a Guaranteed container asking for millicores and memory.
func guaranteed(id string, milli, memory int64) Request {
	return Request{ContainerID: id, PodUID: "pod-" + id, Namespace: "default", Pod: "pod-" + id, Container: "c",
		QOS: k8s.QOSGuaranteed, CPURequest: milli, CPULimit: milli, Memory: memory}
}

// burstable is a shared container.
func burstable(id string, milli int64) Request {
	return Request{ContainerID: id, PodUID: "pod-" + id, Namespace: "default", Pod: "pod-" + id, Container: "c",
		QOS: k8s.QOSBurstable, CPURequest: milli}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}
