package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The refusals name the rule that refused. Each case below is one of the
// three the plugin's users hit: isolated CPUs held back, Topology Manager
// hints that disagree, memory that cannot form a group.

// TestRefusalNamesTheIsolatedCPUsHeldBack: an ordinary grant refused for
// want of CPUs that the isolated ones would have given names them.
func TestRefusalNamesTheIsolatedCPUsHeldBack(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved") // node 0: even CPUs, node 1: odd; 5 and 11 isolated
	t.Run("too few CPUs", func(t *testing.T) {
		p := newPolicy(t, inter, Config{})
		_, _, err := p.Allocate(guaranteed("big", 11000, 0))
		require.ErrorIs(t, err, ErrInsufficientCPUs)
		assert.ErrorContains(t, err, "11 exclusive CPUs requested, 10 free")
		assert.ErrorContains(t, err, `the isolated CPUs "5,11" (the kernel's isolcpus; 2 of them free) would make it fit, but they are held back for containers that ask for them`)
		// Without them it would not fit either: nothing is said of them.
		_, _, err = p.Allocate(guaranteed("huge", 13000, 0))
		require.ErrorIs(t, err, ErrInsufficientCPUs)
		assert.NotContains(t, err.Error(), "isolated CPUs \"5,11\"")
	})
	t.Run("no single node", func(t *testing.T) {
		p := newPolicy(t, inter, Config{TopologyPolicy: TopologySingleNUMANode})
		_, _, err := p.Allocate(guaranteed("fill", 4000, 0))
		require.NoError(t, err)
		// Node 0 has 2 CPUs left, node 1 4 and its 2 isolated ones.
		_, _, err = p.Allocate(guaranteed("five", 5000, 0))
		require.ErrorIs(t, err, ErrTopologyAffinity)
		assert.ErrorContains(t, err, "cpu fits on no single NUMA node")
		assert.ErrorContains(t, err, `the isolated CPUs "5,11"`)
		assert.ErrorContains(t, err, "held back for containers that ask for them (annotation cpu.nri-suite.io: prefer-isolated or require-isolated)")
		require.NoError(t, p.Check())
	})
}

// TestRefusalNamesTheHintsThatDisagree: under restricted and
// single-numa-node, the refusal says which resources' hints disagreed, or
// which one fits nowhere acceptable on its own, and where each would fit.
func TestRefusalNamesTheHintsThatDisagree(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	node0, _ := snc.Node(0)
	tests := []struct {
		name   string
		policy TopologyPolicy
		req    Request
		want   []string
	}{
		{name: "restricted: CPUs on one node, devices on two", policy: TopologyRestricted,
			req: withDevices(guaranteed("a", 2000, 0), 1, 2),
			want: []string{"the hints of cpu and devices disagree: no NUMA nodes that both prefer",
				"cpu prefers NUMA nodes {0} or {1} or {2} or {3}; devices prefers NUMA nodes {1,2}"}},
		{name: "restricted: memory on two nodes, devices on one", policy: TopologyRestricted,
			req:  withDevices(guaranteed("a", 2000, int64(node0.MemTotal)+gib), 3),
			want: []string{"the hints of cpu and memory disagree", "the hints of memory and devices disagree", "devices prefers NUMA nodes {3}"}},
		{name: "single-numa-node: memory of two nodes", policy: TopologySingleNUMANode,
			req:  guaranteed("a", 2000, int64(node0.MemTotal)+gib),
			want: []string{"memory fits on no single NUMA node", "cpu prefers NUMA nodes {0} or {1}"}},
		{name: "restricted: more memory than the machine", policy: TopologyRestricted,
			req:  guaranteed("a", 2000, 5*int64(node0.MemTotal)),
			want: []string{"memory fits on no set of NUMA nodes: only", "bytes of memory free on all the NUMA nodes together"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t, snc, Config{TopologyPolicy: tc.policy})
			_, _, err := p.Allocate(tc.req)
			require.ErrorIs(t, err, ErrTopologyAffinity)
			assert.ErrorContains(t, err, "topology manager policy "+string(tc.policy)+" cannot align the resources: ")
			for _, want := range tc.want {
				assert.ErrorContains(t, err, want)
			}
			assert.Empty(t, p.Placements())
		})
	}
}

// TestRefusalSaysWhyMemoryCannotGroup: with memory free on the machine but
// on nodes that cannot serve one container together, the refusal says which
// nodes are in the way and what the nodes free to group have.
func TestRefusalSaysWhyMemoryCannotGroup(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	node0, _ := snc.Node(0)
	nodeMem := int64(node0.MemTotal)
	p := newPolicy(t, snc, Config{})
	// Every node holds a single-node grant but node 3; nodes 2 and 3 would
	// hold the request together.
	for _, id := range []string{"n0", "n1", "n2"} {
		_, _, err := p.Allocate(guaranteed(id, 20000, gib))
		require.NoError(t, err)
	}
	_, _, err := p.Allocate(guaranteed("wide", 2000, nodeMem+gib))
	require.ErrorIs(t, err, ErrInsufficientMemory)
	for _, want := range []string{
		"no group of any NUMA nodes can hold it: enough is free on the NUMA nodes together, but not on nodes that can form one group",
		"node 0 holds the memory of 1 container of its own, and a node that does cannot join a group",
		"node 2 holds the memory of 1 container of its own",
		"the nodes free to form a group, {3}, have",
	} {
		assert.ErrorContains(t, err, want)
	}
	require.NoError(t, p.Check())
}
