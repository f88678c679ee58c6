package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Empty(t, r.Running[0])
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

// records is a Sink that keeps the records, and calls after once for each.
type records struct {
	got   []Record
	after func(Record)
}

func (r *records) Write(rec Record) error {
	r.got = append(r.got, rec)
	if r.after != nil {
		r.after(rec)
	}
	return nil
}

// TestFailedStepKeepsTheReport: a step that fails (here a restart whose
// plugin cannot write its checkpoint) ends the run with what failed and
// the state it stopped in, after the records of the steps done.
func TestFailedStepKeepsTheReport(t *testing.T) {
	m, err := MachineFromSysfs(filepath.Join(fixtureDir(fixture12), "sysfs"))
	require.NoError(t, err)
	sim, err := New(m, nil, "")
	require.NoError(t, err)
	defer func() { assert.NoError(t, sim.Close()) }()
	w, err := Parse([]byte("steps:\n- create:"+inlinePod+"- create:"+strings.ReplaceAll(inlinePod, "name: p}", "name: q}")+"- restart:\n- delete: {pod: p}\n"), "w.yaml")
	require.NoError(t, err)
	sink := &records{after: func(rec Record) {
		if rec.Step != nil && rec.Step.Step == 2 {
			// The checkpoint's directory becomes a file: the plugin that
			// stops at the restart cannot save its state.
			require.NoError(t, os.RemoveAll(sim.stateDir))
			require.NoError(t, os.WriteFile(sim.stateDir, nil, 0o600))
		}
	}}
	err = sim.Run(w, sink)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "w.yaml:22:3: step 3 (restart): stop the plugin")
	require.Len(t, sink.got, 5, "machine, 2 steps, the failure, the state")
	assert.Equal(t, 1, sink.got[1].Step.Step)
	assert.Equal(t, 2, sink.got[2].Step.Step)
	require.NotNil(t, sink.got[3].Error)
	assert.Equal(t, 3, sink.got[3].Error.Step)
	assert.Equal(t, 22, sink.got[3].Error.Line)
	final := sink.got[4].Final
	require.NotNil(t, final)
	assert.Equal(t, 2, final.StepsRun)
	assert.Len(t, final.Containers, 2, "both pods' containers, as the steps done left them")
}
