package description_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

const valid = `
cpus:
  - {id: 0, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 1, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 2, core: 0, die: 1, socket: 1, node: 1}
nodes:
  - id: 0
    mem-total-kb: 2048
    mem-free-kb: 1024
    hugepages: [{size-kb: 2048, total: 4, free: 3}]
    distances: {0: 10, 1: 21, 2: 30}
  - {id: 1, mem-total-kb: 4096, mem-free-kb: 4096, distances: {0: 21, 1: 10, 2: 30}}
  - {id: 2, mem-total-kb: 8192, mem-free-kb: 0, distances: {0: 30, 1: 30, 2: 10}}
isolated: "1"
devices:
  - {pci: "0000:3b:00.0", numa-node: 1, char: ["195:0"], block: ["259:1"]}
  - {pci: "0000:00:14.0", numa-node: -1}
`

func TestParseValid(t *testing.T) {
	d, err := description.Parse([]byte(valid))
	require.NoError(t, err)
	topo, err := d.Topology()
	require.NoError(t, err)

	c, ok := topo.CPU(2)
	require.True(t, ok)
	assert.Equal(t, topology.CPU{ID: 2, Core: 0, Die: 1, Socket: 1, Node: 1, L2: topology.NoCache, L3: topology.NoCache}, c)
	assert.Equal(t, "0-1", topo.Siblings(0).String())
	assert.Equal(t, []int{2}, topo.CPULessNodes())
	n0, _ := topo.Node(0)
	assert.Equal(t, uint64(2048*1024), n0.MemTotal)
	assert.Equal(t, []topology.HugePages{{Size: 2048 * 1024, Total: 4, Free: 3}}, n0.HugePages)
	assert.Equal(t, "1", topo.Isolated().String())

	devices := d.LocalityDevices(topo)
	require.Len(t, devices, 2)
	assert.Equal(t, []locality.DeviceNode{{Kind: locality.Char, Major: 195}, {Kind: locality.Block, Major: 259, Minor: 1}}, devices[0].Nodes)
	assert.Equal(t, "2", devices[0].LocalCPUs.String())
	assert.Equal(t, "0-2", devices[1].LocalCPUs.String(), "a device on no node is local to every CPU, as the kernel reports")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		from    string // replaced in valid
		to      string
		yaml    string // instead of valid
		wantErr string
	}{
		{name: "empty", yaml: "", wantErr: "parse topology description: empty document"},
		{name: "two documents", yaml: valid + "---\ncpus: []\n", wantErr: "expected one YAML document"},
		{name: "not a map", yaml: "- 1\n", wantErr: "cannot unmarshal"},
		{name: "unknown key", from: "isolated:", to: "isolate:", wantErr: "field isolate not found"},
		{name: "unknown cpu key", from: "{id: 2, core: 0,", to: "{id: 2, cor: 0,", wantErr: "field cor not found"},
		{name: "no cpus", yaml: "nodes: [{id: 0, distances: {0: 10}}]\n", wantErr: "cpus: expected at least one cpu"},
		{name: "no nodes", yaml: "cpus: [{id: 0, core: 0, socket: 0, node: 0}]\n", wantErr: "nodes: expected at least one node"},
		{name: "duplicate cpu", from: "{id: 2, core: 0, die: 1", to: "{id: 1, core: 0, die: 1", wantErr: "cpu 1: duplicate id (cpus[1] and cpus[2])"},
		{name: "cpu without id", from: "{id: 2, core: 0, die: 1", to: "{core: 0, die: 1", wantErr: "cpus[2]: expected an id in [0, 65535]"},
		{name: "negative cpu id", from: "{id: 2, core: 0, die: 1", to: "{id: -2, core: 0, die: 1", wantErr: "cpus[2]: expected an id"},
		{name: "cpu without core", from: "{id: 2, core: 0, die: 1,", to: "{id: 2, die: 1,", wantErr: "cpu 2: expected a core id >= 0"},
		{name: "cpu without node", from: "socket: 1, node: 1}", to: "socket: 1}", wantErr: "cpu 2: expected a node id >= 0"},
		{name: "negative cache", from: "l2: 0, l3: 0}\n  - {id: 1", to: "l2: -3, l3: 0}\n  - {id: 1", wantErr: "cpu 0: die, l2 and l3 ids must be >= 0"},
		{name: "cpu on unknown node", from: "socket: 1, node: 1}", to: "socket: 1, node: 7}", wantErr: "cpu 2: node 7 is not in nodes"},
		{name: "duplicate node", from: "{id: 1, mem-total-kb: 4096", to: "{id: 0, mem-total-kb: 4096", wantErr: "node 0: duplicate id"},
		{name: "node without id", from: "{id: 1, mem-total-kb: 4096", to: "{mem-total-kb: 4096", wantErr: "nodes[1]: expected an id >= 0"},
		{name: "missing distance", from: "distances: {0: 21, 1: 10, 2: 30}", to: "distances: {0: 21, 1: 10}", wantErr: "node 1: no distance to node 2"},
		{name: "asymmetric distance", from: "distances: {0: 21, 1: 10, 2: 30}", to: "distances: {0: 20, 1: 10, 2: 30}", wantErr: "asymmetric distances"},
		{name: "distance to unknown node", from: "distances: {0: 21, 1: 10, 2: 30}", to: "distances: {0: 21, 1: 10, 2: 30, 5: 40}", wantErr: "node 1: distance to node 5, which is not in nodes"},
		{name: "local distance", from: "distances: {0: 21, 1: 10, 2: 30}", to: "distances: {0: 21, 1: 11, 2: 30}", wantErr: "node 1: distance to itself is 11, expected 10"},
		{name: "remote distance too small", from: "{0: 10, 1: 21, 2: 30}", to: "{0: 10, 1: 21, 2: 9}", wantErr: "node 0: distance to node 2 is 9, expected more than the local 10"},
		{name: "free above total", from: "mem-free-kb: 1024", to: "mem-free-kb: 4096", wantErr: "node 0: mem-free-kb 4096 exceeds mem-total-kb 2048"},
		{name: "hugepage size zero", from: "size-kb: 2048", to: "size-kb: 0", wantErr: "node 0: hugepages: expected a size-kb > 0"},
		{name: "hugepages free above total", from: "free: 3", to: "free: 5", wantErr: "node 0: hugepages 2048kB: free 5 exceeds total 4"},
		{name: "duplicate hugepage size", from: "[{size-kb: 2048, total: 4, free: 3}]", to: "[{size-kb: 2048}, {size-kb: 2048}]", wantErr: "node 0: hugepages: duplicate size-kb 2048"},
		{name: "isolated unknown cpu", from: `isolated: "1"`, to: `isolated: "1-5"`, wantErr: "isolated: cpus 3-5 are not in cpus"},
		{name: "isolated malformed", from: `isolated: "1"`, to: `isolated: "1-"`, wantErr: `bad token "1-"`},
		{name: "bad pci", from: `"0000:3b:00.0"`, to: `"3b:00.0"`, wantErr: `devices[0]: pci "3b:00.0", expected an address like 0000:3b:00.0`},
		{name: "duplicate pci", from: `"0000:00:14.0"`, to: `"0000:3b:00.0"`, wantErr: "device 0000:3b:00.0: duplicate"},
		{name: "device on unknown node", from: "numa-node: 1,", to: "numa-node: 4,", wantErr: "device 0000:3b:00.0: numa-node 4 is not in nodes (-1 for unknown)"},
		{name: "bad device number", from: `["195:0"]`, to: `["195"]`, wantErr: `device 0000:3b:00.0: char "195", expected major:minor`},
		{name: "negative device number", from: `["259:1"]`, to: `["259:-1"]`, wantErr: `block "259:-1", expected major:minor`},
		{name: "device node twice", from: `numa-node: -1}`, to: `numa-node: -1, char: ["195:0"]}`, wantErr: "device 0000:00:14.0: char 195:0 is also a node of device 0000:3b:00.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.yaml
			if tt.from != "" {
				require.Contains(t, valid, tt.from, "test edits a part of valid that is not there")
				in = strings.Replace(valid, tt.from, tt.to, 1)
			}
			d, err := description.Parse([]byte(in))
			require.Error(t, err)
			assert.Nil(t, d)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestLoad(t *testing.T) {
	_, err := description.Load("testdata/does-not-exist.yaml")
	assert.ErrorContains(t, err, "load topology description: open testdata/does-not-exist.yaml")
	d, err := description.Load("../testdata/smt-1s-8c/description.yaml")
	require.NoError(t, err)
	assert.Len(t, d.CPUs, 8)
}

// TestTopologyChecksUnparsed covers descriptions built in code, not parsed.
func TestTopologyChecksUnparsed(t *testing.T) {
	_, err := (&description.Description{}).Topology()
	assert.ErrorContains(t, err, "invalid topology description: nodes: expected at least one node")
}

// TestMarshalRoundTrip: model -> description -> YAML -> description -> model.
func TestMarshalRoundTrip(t *testing.T) {
	for _, name := range []string{"smt-2s-12c-interleaved", "nps4-2s-12n-256c-cpuless"} {
		t.Run(name, func(t *testing.T) {
			d, err := description.Load("../testdata/" + name + "/description.yaml")
			require.NoError(t, err)
			want, err := d.Topology()
			require.NoError(t, err)
			out, err := description.FromTopology(want).Marshal()
			require.NoError(t, err)
			assert.Contains(t, string(out), "  - {id: 0, core: 0, socket: 0, node: 0, l2: 0, l3: 0}\n", "one flow-style line per cpu")
			again, err := description.Parse(out)
			require.NoError(t, err, string(out))
			got, err := again.Topology()
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("cpus: [{id: 0, core: 0, socket: 0, node: 0}]\nnodes: [{id: 0, distances: {0: 10}}]\n"))
	f.Add([]byte("cpus: [{id: 0, core: 0, socket: 0, node: 1}]\nnodes: [{id: 0, distances: {0: 10}}]\n"))
	f.Add([]byte("cpus: []\n"))
	f.Add([]byte("isolated: 0-\n"))
	f.Add([]byte("devices: [{pci: x}]\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := description.Parse(data)
		if err != nil {
			return
		}
		// A valid description builds a model, and describes that model again.
		topo, err := d.Topology()
		require.NoError(t, err, "valid description does not build a topology:\n%s", data)
		require.Equal(t, len(d.CPUs), topo.CPUs().Size())
		require.Equal(t, len(d.Nodes), len(topo.Nodes()))
		out, err := description.FromTopology(topo).Marshal()
		require.NoError(t, err)
		again, err := description.Parse(out)
		require.NoError(t, err, "re-encoded description does not parse:\n%s", out)
		topo2, err := again.Topology()
		require.NoError(t, err)
		require.Equal(t, topo, topo2)
	})
}
