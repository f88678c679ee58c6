package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

func TestKubeletNode(t *testing.T) {
	m, err := MachineFromSysfs(filepath.Join(fixtureDir(fixture12), "sysfs"))
	require.NoError(t, err)
	node, sizes, err := m.kubeletNode()
	require.NoError(t, err)
	// As the kubelet lists /sys/kernel/mm/hugepages: hugepages-1048576kB
	// before hugepages-2048kB.
	assert.Equal(t, []string{"1GB", "2MB"}, node.HugePageSizes)
	assert.Equal(t, map[string]uint64{"1GB": 1 << 30, "2MB": 2 << 20}, sizes)
	assert.Equal(t, int64(2*33554432*1024), node.MemoryCapacity, "both nodes' memory")
}

const smallMachine = `
cpus:
  - {id: 0, core: 0, socket: 0, node: 0}
  - {id: 1, core: 1, socket: 0, node: 0}
nodes:
  - {id: 0, mem-total-kb: 1048576, mem-free-kb: 1048576, distances: {0: 10}}
`

// TestMachineWithoutHugePages: a pod asking for hugepages the machine does
// not have is refused as the scheduler would, not run without them (the
// kubelet would leave the size out of its limits).
func TestMachineWithoutHugePages(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "machine.yaml")
	require.NoError(t, os.WriteFile(topo, []byte(smallMachine), 0o600))
	m, err := MachineFromDescription(topo)
	require.NoError(t, err)
	assert.Empty(t, m.SysfsRoot, "no devices, no tree")
	node, _, err := m.kubeletNode()
	require.NoError(t, err)
	assert.Equal(t, []string{}, node.HugePageSizes, "not kubepod's defaults")
	require.NoError(t, m.Close())

	workload := filepath.Join(dir, "workload.yaml")
	require.NoError(t, os.WriteFile(workload, []byte(`steps:
- create:
    pod:
      apiVersion: v1
      kind: Pod
      metadata: {name: p}
      spec:
        containers: [{name: c, image: x, resources: {limits: {cpu: "1", memory: 64Mi, hugepages-2Mi: 4Mi}}}]
`), 0o600))
	stdout, stderr, code := runCLI(t, "--topology", topo, "--workload", workload)
	require.Equal(t, ExitOK, code, stderr)
	r := decodeReport(t, stdout)
	rejected(t, r.Steps[0], "default/p/c", "the machine has no hugepages of that size (it has none)")
	assert.Empty(t, r.Steps[0].Containers)
}

func TestMachineFromDescriptionRendersDevices(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	m, err := MachineFromDescription(filepath.Join(fixtureDir(fixture80), "description.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, m.SysfsRoot)
	assert.FileExists(t, filepath.Join(m.SysfsRoot, "dev", "char", "195:1"))
	require.NoError(t, m.Close())
	assert.NoDirExists(t, m.SysfsRoot)
}

// TestRunStopsAtInvalidWorkload: the library reports workload errors as
// ErrInvalidWorkload, naming the step, and plays nothing after it.
func TestRunStopsAtInvalidWorkload(t *testing.T) {
	m, err := MachineFromSysfs(filepath.Join(fixtureDir(fixture12), "sysfs"))
	require.NoError(t, err)
	sim, err := New(m, policy.Config{})
	require.NoError(t, err)
	w, err := Parse([]byte("steps:\n- restart:\n- delete: {pod: ghost}\n- restart:\n"))
	require.NoError(t, err)
	report, err := sim.Run(w)
	require.ErrorIs(t, err, ErrInvalidWorkload)
	assert.Nil(t, report)
	assert.Contains(t, err.Error(), "step 2 (line 3): delete: invalid workload: pod default/ghost does not exist")
}
