package topology_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// smallMachine: 2 sockets, node 0 and 1 with two 2-thread cores each, and a
// CPU-less node 2.
func smallMachine() ([]topology.CPU, []topology.Node) {
	cpus := []topology.CPU{
		{ID: 7, Core: 1, Socket: 1, Node: 1, L2: 3, L3: 1},
		{ID: 0, Core: 0, Socket: 0, Node: 0, L2: 0, L3: 0},
		{ID: 1, Core: 0, Socket: 0, Node: 0, L2: 0, L3: 0},
		{ID: 2, Core: 1, Socket: 0, Node: 0, L2: 1, L3: 0},
		{ID: 3, Core: 1, Socket: 0, Node: 0, L2: 1, L3: 0},
		{ID: 4, Core: 0, Socket: 1, Node: 1, L2: 2, L3: 1},
		{ID: 5, Core: 0, Socket: 1, Node: 1, L2: 2, L3: 1},
		{ID: 6, Core: 1, Socket: 1, Node: 1, L2: 3, L3: topology.NoCache},
	}
	nodes := []topology.Node{
		{ID: 2, Distances: map[int]int{0: 30, 1: 20, 2: 10}, MemTotal: 8 << 30},
		{ID: 1, Distances: map[int]int{0: 21, 1: 10, 2: 20},
			HugePages: []topology.HugePages{{Size: 1 << 30, Total: 2}, {Size: 2 << 20, Total: 10, Free: 5}}},
		{ID: 0, Distances: map[int]int{0: 10, 1: 21, 2: 30}},
	}
	return cpus, nodes
}

func TestLookups(t *testing.T) {
	cpus, nodes := smallMachine()
	topo, err := topology.New(cpus, nodes, cpuset.New(6, 7))
	require.NoError(t, err)

	assert.Equal(t, "0-7", topo.CPUs().String())
	assert.Equal(t, 0, topo.CPUList()[0].ID, "records sorted by id")
	assert.Equal(t, []int{0, 1}, topo.Sockets())
	assert.Equal(t, "4-7", topo.CPUsOfSocket(1).String())
	assert.True(t, topo.CPUsOfSocket(9).IsEmpty())
	assert.Equal(t, []topology.Die{{Socket: 0, ID: 0}, {Socket: 1, ID: 0}}, topo.Dies())
	assert.Equal(t, "0-3", topo.CPUsOfDie(topology.Die{Socket: 0, ID: 0}).String())
	assert.Equal(t, []topology.Core{
		{Socket: 0, ID: 0, CPUs: cpuset.New(0, 1)}, {Socket: 0, ID: 1, CPUs: cpuset.New(2, 3)},
		{Socket: 1, ID: 0, CPUs: cpuset.New(4, 5)}, {Socket: 1, ID: 1, CPUs: cpuset.New(6, 7)},
	}, topo.Cores())
	core, ok := topo.CoreOf(7)
	assert.True(t, ok)
	assert.Equal(t, "6-7", core.CPUs.String())
	_, ok = topo.CoreOf(8)
	assert.False(t, ok)
	assert.Equal(t, "2-3", topo.Siblings(3).String())
	assert.True(t, topo.Siblings(99).IsEmpty())
	assert.Equal(t, 2, topo.ThreadsPerCore())

	assert.Len(t, topo.L2Groups(), 4)
	assert.Equal(t, []topology.CacheGroup{
		{Level: 3, ID: 0, CPUs: cpuset.Range(0, 3)}, {Level: 3, ID: 1, CPUs: cpuset.New(4, 5, 7)},
	}, topo.L3Groups(), "cpu 6 has no known L3")
	assert.Equal(t, "6-7", topo.CPUsOfCache(2, 3).String())
	assert.True(t, topo.CPUsOfCache(3, 5).IsEmpty())
	assert.True(t, topo.CPUsOfCache(1, 0).IsEmpty())

	assert.Equal(t, []int{0, 1, 2}, topo.Nodes())
	assert.Equal(t, []int{2}, topo.CPULessNodes())
	assert.Equal(t, "4-7", topo.CPUsOfNode(1).String())
	assert.True(t, topo.CPUsOfNode(2).IsEmpty())
	node, ok := topo.NodeOfCPU(5)
	assert.True(t, ok)
	assert.Equal(t, 1, node)
	_, ok = topo.NodeOfCPU(42)
	assert.False(t, ok)
	assert.Equal(t, []int{0, 1}, topo.NodesOfCPUs(cpuset.New(3, 4, 100)))
	assert.Equal(t, []int{1}, topo.NodesOfSocket(1))

	d, ok := topo.Distance(1, 2)
	assert.True(t, ok)
	assert.Equal(t, 20, d)
	_, ok = topo.Distance(1, 5)
	assert.False(t, ok)
	_, ok = topo.Distance(5, 1)
	assert.False(t, ok)
	assert.Equal(t, []int{2, 1, 0}, topo.NodesByDistance(2))
	assert.Equal(t, []int{0, 1, 2}, topo.NodesByDistance(0))
	assert.Nil(t, topo.NodesByDistance(9))

	n1, ok := topo.Node(1)
	require.True(t, ok)
	assert.Equal(t, []topology.HugePages{{Size: 2 << 20, Total: 10, Free: 5}, {Size: 1 << 30, Total: 2}}, n1.HugePages, "sorted by size")
	assert.Equal(t, "6-7", topo.Isolated().String())

	// The model is immutable: what lookups return, and what New was given,
	// can change without changing it.
	n1.Distances[0] = 99
	nodes[0].Distances[0] = 99
	cpus[0].Node = 0
	topo.CPUList()[0].Node = 5
	d, _ = topo.Distance(1, 0)
	assert.Equal(t, 21, d)
	d, _ = topo.Distance(2, 0)
	assert.Equal(t, 30, d)
	n, _ := topo.NodeOfCPU(7)
	assert.Equal(t, 1, n)
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(cpus []topology.CPU, nodes []topology.Node) ([]topology.CPU, []topology.Node)
		isolated cpuset.CPUSet
		wantErr  string
	}{
		{name: "no cpus", edit: func(_ []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) { return nil, n },
			wantErr: "no CPUs"},
		{name: "no nodes", edit: func(c []topology.CPU, _ []topology.Node) ([]topology.CPU, []topology.Node) { return c, nil },
			wantErr: "no NUMA nodes"},
		{name: "duplicate cpu", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			c[0].ID = 0
			return c, n
		}, wantErr: "cpu 0: duplicate id"},
		{name: "negative cpu", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			c[0].ID = -4
			return c, n
		}, wantErr: "cpu -4: id outside [0, 65535]"},
		{name: "negative core", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			c[2].Core = -1
			return c, n
		}, wantErr: "cpu 1: negative core, die or socket id"},
		{name: "bad cache id", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			c[2].L3 = -2
			return c, n
		}, wantErr: "cpu 1: cache id below -1"},
		{name: "unknown node", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			c[0].Node = 8
			return c, n
		}, wantErr: "cpu 7: unknown node 8"},
		{name: "duplicate node", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			n[0].ID = 1
			return c, n
		}, wantErr: "node 1: duplicate id"},
		{name: "negative node", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			n[0].ID = -1
			return c, n
		}, wantErr: "node -1: negative id"},
		{name: "missing distance", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			delete(n[2].Distances, 2)
			return c, n
		}, wantErr: "node 0: no distance to node 2"},
		{name: "distance to unknown node", edit: func(c []topology.CPU, n []topology.Node) ([]topology.CPU, []topology.Node) {
			n[2].Distances[4] = 40
			return c, n
		}, wantErr: "node 0: distance to unknown node 4"},
		{name: "isolated unknown cpu", isolated: cpuset.New(3, 9, 10), wantErr: "isolated CPUs 9-10 are not CPUs of the machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpus, nodes := smallMachine()
			if tt.edit != nil {
				cpus, nodes = tt.edit(cpus, nodes)
			}
			topo, err := topology.New(cpus, nodes, tt.isolated)
			require.Error(t, err)
			assert.Nil(t, topo)
			assert.True(t, errors.Is(err, topology.ErrInvalid))
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
