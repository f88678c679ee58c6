package policy

import (
	"errors"
	"fmt"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Check verifies the invariants of the state and returns every violation
// found, or nil:
//   - exclusive grants overlap neither each other nor the reserved or the
//     isolated CPUs, and lie within the available CPUs; isolated grants lie
//     within the isolated CPUs and overlap no other grant;
//   - the shared pool is what the grants leave, and is not empty while
//     shared containers exist; every shared container runs on exactly it;
//   - reserved containers run on the reserved CPUs;
//   - every container's Mems are the nodes its placement implies;
//   - the Memory Manager's free memory plus what containers hold is what
//     each node has, every node's group is that of its containers, and
//     groups do not overlap.
func (p *Policy) Check() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var exclusive, isolated cpuset.CPUSet
	shared := 0
	for _, id := range p.sortedIDs() {
		e := p.containers[id]
		pl := e.pl
		if pl.ContainerID != id {
			fail("container %s: placement is for %q", id, pl.ContainerID)
		}
		switch pl.Pool {
		case PoolExclusive:
			if o := pl.CPUs.Intersection(exclusive.Union(isolated)); !o.IsEmpty() {
				fail("container %s: exclusive CPUs %q overlap another grant on %q", id, pl.CPUs, o)
			}
			if o := pl.CPUs.Intersection(p.reserved.Union(p.isolated)); !o.IsEmpty() {
				fail("container %s: exclusive CPUs %q overlap the reserved or isolated CPUs on %q", id, pl.CPUs, o)
			}
			if !pl.CPUs.IsSubsetOf(p.available) || pl.CPUs.IsEmpty() {
				fail("container %s: exclusive CPUs %q empty or outside the available %q", id, pl.CPUs, p.available)
			}
			exclusive = exclusive.Union(pl.CPUs)
		case PoolIsolated:
			if !pl.CPUs.IsSubsetOf(p.isolated) || pl.CPUs.IsEmpty() {
				fail("container %s: isolated CPUs %q empty or outside the isolated %q", id, pl.CPUs, p.isolated)
			}
			if o := pl.CPUs.Intersection(exclusive.Union(isolated)); !o.IsEmpty() {
				fail("container %s: isolated CPUs %q overlap another grant on %q", id, pl.CPUs, o)
			}
			isolated = isolated.Union(pl.CPUs)
		case PoolShared:
			shared++
			if !pl.CPUs.Equal(p.shared) {
				fail("container %s: shared container on %q, the shared pool is %q", id, pl.CPUs, p.shared)
			}
		case PoolReserved:
			if !pl.CPUs.Equal(p.reserved) {
				fail("container %s: reserved container on %q, the reserved CPUs are %q", id, pl.CPUs, p.reserved)
			}
		default:
			fail("container %s: unknown pool %q", id, pl.Pool)
		}
		if want := p.expectedMems(e); !pl.Mems.Equal(want) {
			fail("container %s: mems %q, expected %q", id, pl.Mems, want)
		}
	}
	if !exclusive.Equal(p.exclusive) || !isolated.Equal(p.isolatedUsed) {
		fail("granted CPUs recorded as %q exclusive and %q isolated, the containers hold %q and %q",
			p.exclusive, p.isolatedUsed, exclusive, isolated)
	}
	if want := p.sharedPool(exclusive); !p.shared.Equal(want) {
		fail("shared pool is %q, expected %q", p.shared, want)
	}
	if shared > 0 && p.shared.IsEmpty() {
		fail("shared pool is empty with %d shared containers", shared)
	}
	if shared != len(p.sharedIDs) {
		fail("%d shared containers, %d recorded", shared, len(p.sharedIDs))
	}
	errs = append(errs, p.checkMemoryAccounting()...)
	return errors.Join(errs...)
}

func (p *Policy) expectedMems(e *entry) cpuset.CPUSet {
	if e.group != 0 {
		return p.mems(e.group.nodes(), e.req.CPULessMemory)
	}
	return p.mems(p.topo.NodesOfCPUs(e.pl.CPUs), e.req.CPULessMemory)
}

func (p *Policy) checkMemoryAccounting() []error {
	var errs []error
	held := map[int]map[memoryResource]uint64{}
	assignments := map[int]int{}
	groups := map[int]numaMask{}
	for _, id := range p.sortedIDs() {
		e := p.containers[id]
		if e.group == 0 {
			continue
		}
		for _, n := range e.group.nodes() {
			assignments[n]++
			if g, seen := groups[n]; seen && g != e.group {
				errs = append(errs, fmt.Errorf("NUMA node %d is in memory groups {%s} and {%s}", n, g, e.group))
			}
			groups[n] = e.group
		}
		for _, h := range e.held {
			if held[h.Node] == nil {
				held[h.Node] = map[memoryResource]uint64{}
			}
			held[h.Node][memoryResource(h.PageSize)] += h.Bytes
		}
	}
	for id, n := range p.mm.nodes {
		for r, alloc := range n.allocatable {
			if got := n.free[r] + held[id][r]; got != alloc {
				errs = append(errs, fmt.Errorf("NUMA node %d: %s free %d + held %d != allocatable %d", id, r, n.free[r], held[id][r], alloc))
			}
		}
		want := groups[id]
		if want == 0 {
			want = maskOf(id)
		}
		if n.assignments != assignments[id] || n.group != want {
			errs = append(errs, fmt.Errorf("NUMA node %d: %d assignments in group {%s}, containers say %d in {%s}",
				id, n.assignments, n.group, assignments[id], want))
		}
	}
	return errs
}
