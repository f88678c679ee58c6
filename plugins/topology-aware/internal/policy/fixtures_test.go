package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// nodesOf returns the NUMA nodes of cpus.
func nodesOf(t *topology.Topology, cpus cpuset.CPUSet) []int { return t.NodesOfCPUs(cpus) }

func TestTopologyManagerPolicies(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // 4 nodes of 20 CPUs
	perNode := snc.CPUsOfNode(0).Size()
	tests := []struct {
		name      string
		cfg       Config
		req       Request
		wantNodes []int  // admitted affinity
		wantErr   string // substring, wraps ErrTopologyAffinity
	}{
		{name: "single-numa-node fits one node", cfg: Config{TopologyPolicy: TopologySingleNUMANode},
			req: guaranteed("a", int64(perNode/2)*1000, gib), wantNodes: []int{0}},
		{name: "single-numa-node refuses more than a node", cfg: Config{TopologyPolicy: TopologySingleNUMANode},
			req: guaranteed("a", int64(perNode+2)*1000, 0), wantErr: "cpu fits on no single NUMA node"},
		{name: "restricted admits the narrowest pair", cfg: Config{TopologyPolicy: TopologyRestricted},
			req: guaranteed("a", int64(perNode+2)*1000, 0), wantNodes: []int{0, 1}},
		{name: "best-effort follows a device", cfg: Config{TopologyPolicy: TopologyBestEffort},
			req: withDevices(guaranteed("a", 4000, gib), 2), wantNodes: []int{2}},
		{name: "restricted follows a device", cfg: Config{TopologyPolicy: TopologyRestricted},
			req: withDevices(guaranteed("a", 4000, 0), 3), wantNodes: []int{3}},
		{name: "single-numa-node refuses devices on two nodes", cfg: Config{TopologyPolicy: TopologySingleNUMANode},
			req: withDevices(guaranteed("a", 2000, 0), 1, 2), wantErr: "devices fits on no single NUMA node"},
		{name: "restricted admits devices on two nodes with CPUs on both", cfg: Config{TopologyPolicy: TopologyRestricted},
			req: withDevices(guaranteed("a", 2000, 0), 1, 2), wantErr: "cpu prefers NUMA nodes {0} or {1}"},
		{name: "best-effort admits what restricted refuses", cfg: Config{TopologyPolicy: TopologyBestEffort},
			req: withDevices(guaranteed("a", 2000, 0), 1, 2), wantNodes: []int{0, 1}},
		{name: "none gives no affinity", cfg: Config{TopologyPolicy: TopologyNone},
			req: withDevices(guaranteed("a", 2000, 0), 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, snc, tt.cfg)
			pl, _, err := p.Allocate(tt.req)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrTopologyAffinity)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, p.Placements())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantNodes, pl.NUMANodes)
			if len(tt.wantNodes) > 0 {
				assert.Subset(t, tt.wantNodes, nodesOf(snc, pl.CPUs), "CPUs %q outside the affinity", pl.CPUs)
			}
			require.NoError(t, p.Check())
		})
	}
}

func withDevices(req Request, nodes ...int) Request {
	for _, n := range nodes {
		req.Devices = append(req.Devices, Device{ID: "pci dev", NUMANode: n})
	}
	return req
}

func TestPreferClosestNUMANodes(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // nodes 0,1 on socket 0, 2,3 on socket 1
	perNode := snc.CPUsOfNode(0).Size()
	for _, closest := range []bool{false, true} {
		p := newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted, PreferClosestNUMA: closest})
		// Fill node 1 so that {0,1} cannot hold the next request.
		_, _, err := p.Allocate(withDevices(guaranteed("fill", int64(perNode)*1000, 0), 1))
		require.NoError(t, err)
		pl, _, err := p.Allocate(guaranteed("wide", int64(perNode+2)*1000, 0))
		require.NoError(t, err)
		want := []int{0, 2} // narrowest, lowest ids
		if closest {
			want = []int{2, 3} // same socket: distance 11, not 21
		}
		assert.Equal(t, want, pl.NUMANodes, "prefer-closest=%v", closest)
		require.NoError(t, p.Check())
	}
}

func TestPodScope(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	p := newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod})
	first := withDevices(guaranteed("a", 2000, 0), 2)
	first.PodUID = "pod"
	pl, _, err := p.Allocate(first)
	require.NoError(t, err)
	require.Equal(t, []int{2}, pl.NUMANodes)
	second := guaranteed("b", 2000, 0)
	second.PodUID = "pod"
	pl, _, err = p.Allocate(second)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, pl.NUMANodes, "a later container of the pod follows its first affinity")
	other := guaranteed("c", 2000, 0)
	pl, _, err = p.Allocate(other)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, pl.NUMANodes, "another pod is free to go elsewhere")
	conflict := withDevices(guaranteed("d", 2000, 0), 1)
	conflict.PodUID = "pod"
	_, _, err = p.Allocate(conflict)
	require.ErrorIs(t, err, ErrTopologyAffinity)
	assert.Contains(t, err.Error(), "pod prefers NUMA nodes {2}")
}

func TestCPUOptions(t *testing.T) {
	smt := fixture(t, "smt-1s-8c")                // siblings N, N+4
	nps := fixture(t, "nps4-2s-12n-256c-cpuless") // L3 per 8 cores (16 CPUs)
	snc := fixture(t, "snc-2s-4n-80c")
	tests := []struct {
		name  string
		topo  *topology.Topology
		cfg   Config
		milli int64
		check func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet)
	}{
		{"default packs whole cores", smt, Config{}, 4000, func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet) {
			for _, cpu := range cpus.List() {
				assert.True(t, topo.Siblings(cpu).IsSubsetOf(cpus), "core of %d split in %q", cpu, cpus)
			}
		}},
		{"spread-across-cores takes one thread per core", smt, Config{SpreadAcrossCores: true}, 4000, func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet) {
			for _, cpu := range cpus.List() {
				assert.Equal(t, 1, topo.Siblings(cpu).Intersection(cpus).Size(), "siblings of %d both in %q", cpu, cpus)
			}
		}},
		{"align-by-uncore-cache fills one L3", nps, Config{AlignByUncoreCache: true, ReservedCPUCount: 2}, 16000, func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet) {
			c, _ := topo.CPU(cpus.Min())
			assert.True(t, cpus.Equal(topo.CPUsOfCache(3, c.L3)), "%q is not one L3 group", cpus)
		}},
		{"distribute-across-numa splits evenly", snc, Config{DistributeAcrossNUMA: true}, 24000, func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet) {
			nodes := topo.NodesOfCPUs(cpus)
			require.Len(t, nodes, 2)
			assert.Equal(t, 12, cpus.Intersection(topo.CPUsOfNode(nodes[0])).Size())
			assert.Equal(t, 12, cpus.Intersection(topo.CPUsOfNode(nodes[1])).Size())
		}},
		{"full-pcpus-only avoids the reserved core's sibling", smt, Config{FullPCPUsOnly: true, ReservedCPUs: cpuset.New(0)}, 6000, func(t *testing.T, topo *topology.Topology, cpus cpuset.CPUSet) {
			assert.Equal(t, "1-3,5-7", cpus.String())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, tt.topo, tt.cfg)
			pl, _, err := p.Allocate(guaranteed("a", tt.milli, 0))
			require.NoError(t, err)
			assert.Equal(t, int(tt.milli/1000), pl.CPUs.Size())
			tt.check(t, tt.topo, pl.CPUs)
			require.NoError(t, p.Check())
		})
	}
}

func TestMemoryAndCPULessNodes(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless")
	node0, _ := nps.Node(0)
	cpuLess := nps.CPULessNodes()
	require.NotEmpty(t, cpuLess)
	nearest := nearestCPULess(nps, 0)
	// 12 NUMA nodes: more than the kubelet's default max-allowable-numa-nodes.
	p := newPolicy(t, nps, Config{TopologyPolicy: TopologyRestricted, MaxAllowableNUMANodes: 12})
	plain, _, err := p.Allocate(guaranteed("plain", 2000, gib))
	require.NoError(t, err)
	assert.Equal(t, "0", plain.Mems.String(), "CPU-less nodes only on request")
	assert.Equal(t, gib, plain.Memory)
	hbm := guaranteed("hbm", 2000, gib)
	hbm.CPULessMemory = true
	withHBM, _, err := p.Allocate(hbm)
	require.NoError(t, err)
	assert.Equal(t, cpuset.New(append([]int{0}, nearest...)...).String(), withHBM.Mems.String())
	shared := burstable("shared", 500)
	shared.CPULessMemory = true
	sh, _, err := p.Allocate(shared)
	require.NoError(t, err)
	want := cpuset.New(nodesOf(nps, p.SharedCPUs())...)
	for _, n := range nodesOf(nps, p.SharedCPUs()) {
		want = want.Union(cpuset.New(nearestCPULess(nps, n)...))
	}
	assert.Equal(t, want.String(), sh.Mems.String(), "a shared container asking for CPU-less memory gets the nearest ones")
	assert.True(t, sh.Mems.Contains(cpuLess[0]))
	// More memory than one node has: a group of two nodes, which no
	// single-node container may then use.
	// Restricted refuses memory that needs two nodes for CPUs that fit one.
	big := int64(node0.MemTotal) + gib
	_, _, err = p.Allocate(guaranteed("wide", 2000, big))
	require.ErrorIs(t, err, ErrTopologyAffinity)
	assert.Contains(t, err.Error(), "memory prefers NUMA nodes {1,2}")
	require.NoError(t, p.Check())
	// Best-effort places it on a group of two nodes, away from node 0 whose
	// single-node containers keep it out of any group.
	be := newPolicy(t, nps, Config{TopologyPolicy: TopologyBestEffort, MaxAllowableNUMANodes: 12})
	_, _, err = be.Allocate(guaranteed("plain", 2000, gib))
	require.NoError(t, err)
	wide, _, err := be.Allocate(guaranteed("wide", 2000, big))
	require.NoError(t, err)
	assert.Equal(t, "1-2", wide.Mems.String(), "memory group")
	require.NoError(t, be.Check())
	for _, u := range be.Usage() {
		if u.Pool == PoolExclusive && wide.Mems.Contains(u.Node) {
			assert.Positive(t, u.MemoryGranted, "node %d", u.Node)
		}
	}
	_, _, err = be.Allocate(guaranteed("single", 2000, gib))
	require.NoError(t, err)
	single, _ := be.Placement("single")
	assert.False(t, single.Mems.Contains(1) || single.Mems.Contains(2), "a single-node container joined the group: %q", single.Mems)
	_, _, err = be.Allocate(guaranteed("huge", 2000, int64(node0.MemTotal)*20))
	require.ErrorIs(t, err, ErrInsufficientMemory)
	require.NoError(t, be.Check())
}

func TestPools(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved") // CPUs 5, 11 isolated
	t.Run("isolated", func(t *testing.T) {
		p := newPolicy(t, inter, Config{})
		req := guaranteed("iso", 2000, 0)
		req.CPU = CPUIsolatedRequire
		pl, _, err := p.Allocate(req)
		require.NoError(t, err)
		assert.Equal(t, PoolIsolated, pl.Pool)
		assert.Equal(t, "5,11", pl.CPUs.String())
		more := guaranteed("more", 1000, 0)
		more.CPU, more.CPUAnnotation = CPUIsolatedRequire, `cpu.nri-suite.io="require-isolated"`
		_, _, err = p.Allocate(more)
		require.ErrorIs(t, err, ErrInsufficientCPUs)
		assert.ErrorContains(t, err, `1 CPU requested from the isolated CPUs by annotation cpu.nri-suite.io="require-isolated", but 0 of the isolated CPUs "5,11" are free`)
		more.CPU = CPUIsolatedPrefer
		pl, _, err = p.Allocate(more)
		require.NoError(t, err)
		assert.Equal(t, PoolExclusive, pl.Pool)
		assert.False(t, p.SharedCPUs().Contains(5), "isolated CPUs never join the shared pool")
		require.NoError(t, p.Check())
	})
	t.Run("reserved and strict", func(t *testing.T) {
		for _, strict := range []bool{false, true} {
			p := newPolicy(t, inter, Config{ReservedCPUCount: 2, ReservedNamespaces: []string{"kube-system"}, StrictReservation: strict})
			sys := burstable("dns", 100)
			sys.Namespace = "kube-system"
			pl, _, err := p.Allocate(sys)
			require.NoError(t, err)
			assert.Equal(t, PoolReserved, pl.Pool)
			assert.Equal(t, p.reserved, pl.CPUs)
			assert.Equal(t, !strict, p.reserved.IsSubsetOf(p.SharedCPUs()), "strict=%v shared %q", strict, p.SharedCPUs())
			annotated := guaranteed("pinned", 2000, 0)
			annotated.CPU = CPUShared
			pl, _, err = p.Allocate(annotated)
			require.NoError(t, err)
			assert.Equal(t, PoolShared, pl.Pool)
		}
	})
	t.Run("shared pool never empties", func(t *testing.T) {
		small := fixture(t, "this-machine")
		p := newPolicy(t, small, Config{})
		_, _, err := p.Allocate(burstable("web", 100))
		require.NoError(t, err)
		_, _, err = p.Allocate(guaranteed("db", int64(small.CPUs().Size())*1000, 0))
		require.ErrorIs(t, err, ErrInsufficientCPUs)
		assert.Contains(t, err.Error(), "shared pool must keep at least 1 CPU for 1 shared containers")
	})
	t.Run("grants update the shared containers", func(t *testing.T) {
		p := newPolicy(t, inter, Config{})
		_, _, err := p.Allocate(burstable("web", 100))
		require.NoError(t, err)
		pl, changed, err := p.Allocate(guaranteed("db", 2000, 0))
		require.NoError(t, err)
		require.Len(t, changed, 1)
		assert.Equal(t, "web", changed[0].ContainerID)
		assert.True(t, changed[0].CPUs.Intersection(pl.CPUs).IsEmpty())
		changed = p.Release("db")
		require.Len(t, changed, 1)
		assert.True(t, pl.CPUs.IsSubsetOf(changed[0].CPUs), "released grant returns to the shared pool")
		assert.Nil(t, p.Release("db"), "releasing twice is a no-op")
	})
}

func TestResize(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	p := newPolicy(t, snc, Config{ReservedCPUCount: 2})
	_, _, err := p.Allocate(burstable("web", 100))
	require.NoError(t, err)
	first, _, err := p.Allocate(guaranteed("db", 4000, 0))
	require.NoError(t, err)
	grown, changed, err := p.Resize(guaranteed("db", 8000, 0))
	require.NoError(t, err)
	assert.True(t, first.CPUs.IsSubsetOf(grown.CPUs), "grow keeps %q, got %q", first.CPUs, grown.CPUs)
	assert.Len(t, changed, 1)
	shrunk, _, err := p.Resize(guaranteed("db", 2000, 0))
	require.NoError(t, err)
	assert.True(t, shrunk.CPUs.IsSubsetOf(grown.CPUs))
	_, _, err = p.Resize(guaranteed("db", 1000*int64(snc.CPUs().Size()+1), 0))
	require.ErrorIs(t, err, ErrInsufficientCPUs)
	after, _ := p.Placement("db")
	assert.Equal(t, shrunk, after, "a failed resize leaves the grant intact")
	toShared, _, err := p.Resize(burstable("db", 1500))
	require.NoError(t, err)
	assert.Equal(t, PoolShared, toShared.Pool)
	assert.Equal(t, p.SharedCPUs(), toShared.CPUs)
	_, _, err = p.Resize(guaranteed("nobody", 1000, 0))
	require.ErrorIs(t, err, ErrUnknownContainer)
	require.NoError(t, p.Check())
}

func TestRestoreConflicts(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved")
	p := newPolicy(t, inter, Config{})
	_, _, err := p.Allocate(guaranteed("a", 2000, 0))
	require.NoError(t, err)
	a, _ := p.Placement("a")
	saved := p.Snapshot()
	fresh := newPolicy(t, inter, Config{})
	report := fresh.Restore(saved, []Running{
		{Request: guaranteed("a", 2000, 0), CPUs: a.CPUs, Mems: a.Mems},
		// Unknown to the checkpoint, claims a's CPUs: loses to the checkpoint.
		{Request: guaranteed("b", 2000, 0), CPUs: a.CPUs, Mems: a.Mems},
		// Unknown, on free CPUs: adopted where it runs.
		{Request: guaranteed("c", 1000, 0), CPUs: cpuset.New(3), Mems: cpuset.New(1)},
		{Request: burstable("d", 100), CPUs: inter.CPUs(), Mems: cpuset.New(0, 1)},
	})
	assert.Equal(t, []string{"a"}, report.Kept)
	assert.Equal(t, []string{"c", "d"}, report.Adopted)
	require.Len(t, report.Replaced, 1)
	assert.Equal(t, "b", report.Replaced[0].ContainerID)
	assert.Contains(t, report.Replaced[0].Reason, "not free")
	assert.True(t, report.Replaced[0].CPUs.Intersection(a.CPUs).IsEmpty())
	c, _ := fresh.Placement("c")
	assert.Equal(t, "3", c.CPUs.String())
	var updated []string
	for _, u := range report.Updates {
		updated = append(updated, u.ContainerID)
	}
	assert.Equal(t, []string{"b", "d"}, updated, "only the replaced and the shared one whose pool differs")
	require.NoError(t, fresh.Check())
	report = fresh.Restore(fresh.Snapshot(), nil)
	assert.Equal(t, []string{"a", "b", "c", "d"}, report.Dropped)
	assert.Empty(t, fresh.Placements())
}

// nearestCPULess: the CPU-less nodes at the least distance from node.
func nearestCPULess(t *topology.Topology, node int) []int {
	best := -1
	var out []int
	for _, c := range t.CPULessNodes() {
		d, _ := t.Distance(node, c)
		if best < 0 || d < best {
			best, out = d, []int{c}
		} else if d == best {
			out = append(out, c)
		}
	}
	return out
}

// TestSharedMems: what SharedMems says is what the shared containers get,
// also after a grant took a whole node out of the shared pool.
func TestSharedMems(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless")
	p := newPolicy(t, nps, Config{})
	plain := burstable("plain", 500)
	hbm := burstable("hbm", 500)
	hbm.CPULessMemory = true
	for _, req := range []Request{plain, hbm} {
		_, _, err := p.Allocate(req)
		require.NoError(t, err)
	}
	check := func(when string) {
		got, _ := p.Placement("plain")
		assert.Equal(t, got.Mems.String(), p.SharedMems(false).String(), "%s: plain shared container", when)
		got, _ = p.Placement("hbm")
		assert.Equal(t, got.Mems.String(), p.SharedMems(true).String(), "%s: shared container with CPU-less memory", when)
		assert.True(t, p.SharedMems(false).IsSubsetOf(p.SharedMems(true)))
		assert.False(t, p.SharedMems(false).Equal(p.SharedMems(true)), "%s: the CPU-less nodes are added", when)
	}
	check("at start")
	before := p.SharedMems(false)
	whole := nps.CPUsOfNode(0).Size()
	_, _, err := p.Allocate(guaranteed("node", int64(whole)*1000, 0))
	require.NoError(t, err)
	check("after a grant of a whole node")
	assert.Equal(t, before.Size()-1, p.SharedMems(false).Size(), "the granted node left the shared pool's nodes")
}
