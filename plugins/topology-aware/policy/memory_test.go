package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// TestMemoryBesideStraddlingCPUs is the churn refusal reduced: without a
// Topology Manager affinity (policy none), a grant's CPUs are packed across
// NUMA nodes 0 and 1, which both serve single-node memory grants. No group
// containing {0,1} can ever form, yet the kubelet, which without an affinity
// takes the Memory Manager's own best hint wherever the CPUs are, admits the
// container; so must we, and refuse only when no group anywhere holds it.
func TestMemoryBesideStraddlingCPUs(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // 4 nodes of 20 CPUs
	perNode := int64(snc.CPUsOfNode(0).Size())
	node0, _ := snc.Node(0)
	nodeMem := int64(node0.MemTotal)
	tests := []struct {
		name     string
		memory   int64
		wantMems string // the memory group; empty: refused
		wantErr  string
	}{
		{name: "fits one node: the best single node, local to half the CPUs", memory: gib, wantMems: "0"},
		{name: "needs two nodes: the free pair away from the single-node grants", memory: nodeMem + gib, wantMems: "2-3"},
		{name: "more than any group can hold: refused", memory: 3 * nodeMem,
			wantErr: "no group of any NUMA nodes can hold it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t, snc, Config{TopologyPolicy: TopologyNone})
			// Node 0 keeps one free core, node 1 gets a single-node grant:
			// both serve single-node memory grants.
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
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrInsufficientMemory)
				assert.ErrorContains(t, err, "container default/pod-straddle/c: ")
				assert.ErrorContains(t, err, tc.wantErr)
				_, known := p.Placement("straddle")
				assert.False(t, known, "a refused container has no placement")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int{0, 1}, nodesOf(snc, pl.CPUs), "the scenario needs CPUs across nodes 0 and 1: %q", pl.CPUs)
			assert.Equal(t, tc.wantMems, pl.Mems.String())
			assert.Equal(t, tc.memory, pl.Memory)
			assert.Contains(t, pl.Reason, "no memory group with the CPUs' nodes {0,1} can hold it")
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
