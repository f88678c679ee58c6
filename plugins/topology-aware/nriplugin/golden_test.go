package nriplugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/internal/golden"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// TestGoldenCheckpoint pins the checkpoint's file, as this version writes it,
// to testdata/golden/checkpoint-v<CheckpointVersion>.json: the plugin's next
// version restores the running containers' placements from it.
func TestGoldenCheckpoint(t *testing.T) {
	memory := []policy.NodeMemory{{Node: 1, PageSize: 2 << 20, Bytes: 64 << 20}}
	sample := Saved{
		Snapshot: policy.Snapshot{
			Containers: []policy.SavedContainer{{
				Request: policy.Request{
					ContainerID: "c1", PodUID: "u1", Namespace: "default", Pod: "db", Container: "main",
					QOS: k8s.QOSGuaranteed, CPURequest: 2000, CPULimit: 2000, Memory: 64 << 20,
					HugePages: map[uint64]int64{2 << 20: 4 << 20}, CPU: policy.CPUIsolatedPrefer, CPULessMemory: true,
					Devices:       []policy.Device{{ID: "cdi vendor.com/gpu=0", NUMANode: 1, CPUs: cpuset.New(4, 5, 6, 7)}},
					PodCPURequest: 2500, PodMemory: 128 << 20,
				},
				Placement: policy.Placement{
					ContainerID: "c1", PodUID: "u1", Pool: policy.PoolExclusive, CPUs: cpuset.New(6, 7), Mems: cpuset.New(1, 2),
					NUMANodes: []int{1}, Memory: 64 << 20, HugePages: map[uint64]int64{2 << 20: 4 << 20},
					Reason: "Guaranteed with integer CPUs", Warning: "kept on fewer reserved CPUs", Unplaced: true,
				},
				MemoryNodes: []int{1}, Memory: memory, CPULessMemory: []policy.NodeMemory{{Node: 2, PageSize: 1 << 30, Bytes: 1 << 30}},
			}},
			Pods: []policy.SavedPod{{
				PodUID: "u2", NUMANodes: []int{1}, CPUs: cpuset.New(4, 5), MemoryNodes: []int{1}, Memory: memory, Closing: true,
			}},
			PodLevel: []string{"u2"},
		},
		Classes: map[string]classes.Assignment{"c1": {BlockIO: "throttled", RDT: "gold"}},
	}
	golden.RequireAllSet(t, "checkpoint", sample)
	cp, err := state.NewCheckpoint[Saved](filepath.Join(t.TempDir(), CheckpointFile), CheckpointVersion)
	require.NoError(t, err)
	require.NoError(t, cp.Save(sample))
	written, err := os.ReadFile(cp.Path())
	require.NoError(t, err)
	golden.File(t, filepath.Join("testdata", "golden", "checkpoint-v1.json"), "topology-aware's checkpoint", written)

	loaded, found, err := cp.Load()
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, sample, loaded, "the checkpoint loads back to what was saved")
}
