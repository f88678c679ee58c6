package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// TestSingleNUMANodeByDefault: under topology policy none, the default
// places a grant within one NUMA node whenever one has room, where the
// kubelet's packing (option kubelet-packing) takes the lone free CPU of
// the emptiest socket first and spreads a 3-CPU grant over both sockets.
func TestSingleNUMANodeByDefault(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // nodes 0,1 on socket 0, 2,3 on socket 1; 20 CPUs each
	for _, kubelet := range []bool{true, false} {
		p := newPolicy(t, snc, Config{KubeletPacking: kubelet})
		// Socket 0 keeps one free CPU, on node 0.
		for _, req := range []Request{guaranteed("a", 19000, 0), guaranteed("b", 20000, 0)} {
			_, _, err := p.Allocate(req)
			require.NoError(t, err)
		}
		pl, _, err := p.Allocate(guaranteed("c", 3000, gib))
		require.NoError(t, err)
		require.NoError(t, p.Check())
		if kubelet {
			assert.Equal(t, []int{0, 2}, nodesOf(snc, pl.CPUs), "the kubelet's packing: %q", pl.CPUs)
			continue
		}
		assert.Equal(t, []int{2}, nodesOf(snc, pl.CPUs), "one NUMA node: %q", pl.CPUs)
		assert.Equal(t, "2", pl.Mems.String(), "memory on the node of the CPUs")
	}
}

// TestOneSocketBeforeFewerNodesAnywhere: a grant larger than any node's
// free CPUs goes within one socket when one has room, where the kubelet
// packs it from the socket with the fewest free CPUs onto the other.
func TestOneSocketBeforeFewerNodesAnywhere(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	for _, kubelet := range []bool{true, false} {
		p := newPolicy(t, snc, Config{KubeletPacking: kubelet})
		// Free: node 0 10, node 1 20 (socket 0: 30); node 2 0, node 3 2 (socket 1: 2)...
		for _, req := range []Request{guaranteed("a", 10000, 0), guaranteed("b", 20000, 0), guaranteed("c", 20000, 0), guaranteed("d", 18000, 0)} {
			_, _, err := p.Allocate(req)
			require.NoError(t, err)
		}
		// ...then node 1 frees: socket 0 has 30 free, socket 1 22.
		p.Release("b")
		pl, _, err := p.Allocate(guaranteed("big", 25000, 0))
		require.NoError(t, err)
		require.NoError(t, p.Check())
		if kubelet {
			assert.Equal(t, []int{1, 3}, nodesOf(snc, pl.CPUs), "the kubelet's packing: %q", pl.CPUs)
			continue
		}
		assert.Equal(t, []int{0, 1}, nodesOf(snc, pl.CPUs), "one socket: %q", pl.CPUs)
	}
}

// TestWholeCoresBeforeTightestNode: a 2-CPU grant takes a whole core on a
// roomier node rather than the two half-free cores of node 0, which it would
// fill exactly (the tightest fit).
func TestWholeCoresBeforeTightestNode(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // cpu N and N+40 are siblings; node 0: 0-9,40-49
	p := newPolicy(t, snc, Config{})
	// A container adopted on node 0 but for CPUs 9 and 48: two half cores.
	held := cpuset.Range(0, 8).Union(cpuset.Range(40, 47)).Union(cpuset.New(49))
	report := p.Restore(Snapshot{}, []Running{{Request: guaranteed("held", int64(held.Size())*1000, 0), CPUs: held}})
	require.Equal(t, []string{"held"}, report.Adopted)
	pl, _, err := p.Allocate(guaranteed("pair", 2000, 0))
	require.NoError(t, err)
	assert.Equal(t, []int{1}, nodesOf(snc, pl.CPUs), "%q", pl.CPUs)
	for _, id := range pl.CPUs.List() {
		assert.True(t, snc.Siblings(id).IsSubsetOf(pl.CPUs), "cpu %d's core is split: %q", id, pl.CPUs)
	}
	// A single CPU takes a half-free core rather than break a whole one.
	one, _, err := p.Allocate(guaranteed("one", 1000, 0))
	require.NoError(t, err)
	assert.True(t, one.CPUs.IsSubsetOf(cpuset.New(9, 48)), "%q", one.CPUs)
	require.NoError(t, p.Check())
}

// TestGrowthGoesNearest: a resized grant keeps its CPUs and takes what its
// node cannot give from the closest node, on its socket, though a node of
// the other socket would be the tighter fit.
func TestGrowthGoesNearest(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	p := newPolicy(t, snc, Config{})
	g, _, err := p.Allocate(guaranteed("g", 4000, 0))
	require.NoError(t, err)
	require.Equal(t, []int{0}, nodesOf(snc, g.CPUs))
	for _, req := range []Request{guaranteed("fill0", 16000, 0), guaranteed("half1", 10000, 0), guaranteed("most2", 15000, 0)} {
		_, _, err := p.Allocate(req)
		require.NoError(t, err)
	}
	on := func(id string) []int { pl, _ := p.Placement(id); return nodesOf(snc, pl.CPUs) }
	require.Equal(t, []int{0}, on("fill0"))
	require.Equal(t, []int{1}, on("half1"))
	require.Equal(t, []int{2}, on("most2"), "node 2 keeps 5 free CPUs, node 1 10")
	grown, _, err := p.Resize(guaranteed("g", 8000, 0))
	require.NoError(t, err)
	assert.True(t, g.CPUs.IsSubsetOf(grown.CPUs), "the grant keeps its CPUs: %q, then %q", g.CPUs, grown.CPUs)
	assert.Equal(t, []int{0, 1}, nodesOf(snc, grown.CPUs), "the rest on the closest node: %q", grown.CPUs)
	require.NoError(t, p.Check())
}

// TestFewestNodesAcrossSockets: more than a socket holds takes the fewest
// nodes, one socket whole and the closest of the other.
func TestFewestNodesAcrossSockets(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless") // 8 nodes of 32 CPUs, 4 per socket
	p := newPolicy(t, nps, Config{})
	pl, _, err := p.Allocate(guaranteed("huge", 140000, 0))
	require.NoError(t, err)
	nodes := nodesOf(nps, pl.CPUs)
	assert.Len(t, nodes, 5, "140 CPUs need 5 nodes of 32: %v", nodes)
	perSocket := map[int]int{}
	for _, n := range nodes {
		cpu, _ := nps.CPU(nps.CPUsOfNode(n).Min())
		perSocket[cpu.Socket]++
	}
	assert.ElementsMatch(t, []int{4, 1}, []int{perSocket[0], perSocket[1]}, "a whole socket and one node: %v", nodes)
	require.NoError(t, p.Check())
}
