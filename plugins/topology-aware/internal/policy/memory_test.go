package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// TestMemoryBesideStraddlingCPUs: a grant's CPUs packed across NUMA nodes 0
// and 1 (the kubelet's packing, option kubelet-packing), which both hold
// single-node memory grants: no group containing {0,1} can form. The
// memory then goes to the closest group that can hold it, preferring the
// nodes of the CPUs, with the reason saying why; and only when no group
// anywhere can hold it is the container refused, saying why the free
// memory could not form one.
func TestMemoryBesideStraddlingCPUs(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // 4 nodes of 20 CPUs; 0,1 on socket 0
	perNode := int64(snc.CPUsOfNode(0).Size())
	node0, _ := snc.Node(0)
	nodeMem := int64(node0.MemTotal)
	tests := []struct {
		name     string
		memory   int64
		wantMems string // the memory group; empty: refused
		wantErr  []string
	}{
		{name: "fits one node: the node of half its CPUs", memory: gib, wantMems: "0"},
		{name: "needs two nodes: the free pair, nodes of its CPUs being unable to group", memory: nodeMem + gib, wantMems: "2-3"},
		{name: "more than any group can hold: refused, saying why", memory: 3 * nodeMem, wantErr: []string{
			"no group of any NUMA nodes can hold it",
			"enough is free on the NUMA nodes together, but not on nodes that can form one group",
			"node 0 holds the memory of 1 container of its own, and a node that does cannot join a group",
			"node 1 holds the memory of 1 container of its own",
			"the nodes free to form a group, {2,3}, have",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t, snc, Config{TopologyPolicy: TopologyNone, KubeletPacking: true})
			// Node 0 keeps one free core, node 1 gets a single-node grant:
			// both hold single-node memory.
			for _, req := range []Request{
				guaranteed("fill0", (perNode-2)*1000, gib),
				guaranteed("core0", 2000, gib),
				guaranteed("on1", 2000, gib),
			} {
				_, _, err := p.Allocate(req)
				require.NoError(t, err)
			}
			p.Release("core0")
			req := guaranteed("straddle", 4000, tc.memory)
			pl, _, err := p.Allocate(req)
			require.NoError(t, p.Check())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, ErrInsufficientMemory)
				assert.ErrorContains(t, err, "container default/pod-straddle/c: ")
				for _, want := range tc.wantErr {
					assert.ErrorContains(t, err, want)
				}
				_, known := p.Placement("straddle")
				assert.False(t, known, "a refused container has no placement")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int{0, 1}, nodesOf(snc, pl.CPUs), "the scenario needs CPUs across nodes 0 and 1: %q", pl.CPUs)
			assert.Equal(t, tc.wantMems, pl.Mems.String())
			assert.Equal(t, tc.memory, pl.Memory)
			assert.Contains(t, pl.Reason, "not on its CPUs' NUMA nodes {0,1} alone: node 0 holds the memory of")
			// The memory is accounted where Mems says.
			for _, u := range p.Usage() {
				if u.Pool == PoolExclusive && pl.Mems.Contains(u.Node) {
					assert.Positive(t, u.MemoryGranted, "node %d", u.Node)
				}
			}
			// Release is the exact inverse: the CPUs' nodes are then free to
			// group, and the same request lands next to its CPUs again.
			p.Release("on1")
			p.Release("straddle")
			again, _, err := p.Allocate(guaranteed("again", 2000, gib))
			require.NoError(t, err)
			assert.True(t, again.Mems.Equal(cpuset.New(nodesOf(snc, again.CPUs)...)),
				"memory %q beside the CPUs %q when it can be", again.Mems, again.CPUs)
			require.NoError(t, p.Check())
		})
	}
}

// TestMemoryFollowsTheCPUsOnResize: a grant on node 2 that grows beyond
// the node's memory keeps its memory on node 2 and adds the closest node,
// 3 on the same socket, not the lowest nodes of the machine (which the
// Memory Manager's own ranking, fewest nodes then lowest ids, would give:
// {0,2}, across the sockets). Shared containers keep the nodes of the
// shared pool.
func TestMemoryFollowsTheCPUsOnResize(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	perNode := int64(snc.CPUsOfNode(0).Size())
	node2, _ := snc.Node(2)
	p := newPolicy(t, snc, Config{})
	// Nodes 0 and 1 hold grants without memory: their memory stays free
	// to group, but their CPUs are taken.
	for _, id := range []string{"fill0", "fill1"} {
		_, _, err := p.Allocate(guaranteed(id, perNode*1000, 0))
		require.NoError(t, err)
	}
	shared, _, err := p.Allocate(burstable("web", 500))
	require.NoError(t, err)
	pl, _, err := p.Allocate(guaranteed("db", 2000, gib))
	require.NoError(t, err)
	require.Equal(t, []int{2}, nodesOf(snc, pl.CPUs))
	assert.Equal(t, "2", pl.Mems.String(), "memory on the node of the CPUs")

	grown := guaranteed("db", 2000, int64(node2.MemTotal)+gib)
	pl, _, err = p.Resize(grown)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, nodesOf(snc, pl.CPUs), "the CPUs stay")
	assert.Equal(t, "2-3", pl.Mems.String(), "the node of the CPUs and the closest one")
	assert.Contains(t, pl.Reason, "not on its CPUs' NUMA nodes {2} alone")
	assert.Contains(t, pl.Reason, "the closest NUMA nodes that can hold it")
	web, _ := p.Placement(shared.ContainerID)
	assert.Equal(t, cpuset.New(nodesOf(snc, p.SharedCPUs())...).String(), web.Mems.String(), "shared containers: the nodes of the shared pool")
	require.NoError(t, p.Check())
}
