package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Check verifies the invariants of the state and returns every violation
// found, or nil:
//   - exclusive grants overlap neither each other nor the reserved or the
//     isolated CPUs, and lie within the available CPUs; isolated grants lie
//     within the isolated CPUs and overlap no other grant;
//   - the shared pool is what the grants leave, and is not empty while
//     shared containers exist; every shared container runs on exactly it;
//   - reserved containers run on the reserved CPUs; a pod's shared
//     containers on what its reservation holds beyond its exclusive grants;
//   - every container's Mems are the nodes its placement implies;
//   - the Memory Manager's free memory plus what containers and pods hold
//     is what each node has, every node's group is that of its containers
//     and pods, and groups do not overlap;
//   - a pod's reservation (pod scope) overlaps no other pod's CPUs nor the
//     reserved or isolated CPUs, records exactly what its containers use of
//     it, and every pod counts its containers.
func (p *Policy) Check() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var exclusive, isolated cpuset.CPUSet
	shared := 0
	// Sorted once: for errors in a stable order. Simulate checks after
	// every step of thousands.
	ids, pods := p.sortedIDs(), slices.Sorted(maps.Keys(p.pods))
	for _, id := range ids {
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
		case PoolPodShared:
			pod := p.pods[pl.PodUID]
			switch {
			case pod == nil || pod.res == nil:
				fail("container %s: on its pod's shared pool, but the pod holds no reservation", id)
			case !pl.CPUs.Equal(pod.res.free()) || pl.CPUs.IsEmpty():
				fail("container %s: on %q, its pod's shared pool is %q", id, pl.CPUs, pod.res.free())
			case !slices.Contains(pod.shared, id):
				fail("container %s: on its pod's shared pool, not recorded there", id)
			}
		default:
			fail("container %s: unknown pool %q", id, pl.Pool)
		}
		if want := p.expectedMems(e); !pl.Mems.Equal(want) {
			fail("container %s: mems %q, expected %q", id, pl.Mems, want)
		}
	}
	exclusive = exclusive.Union(p.checkPods(ids, pods, fail))
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
	errs = append(errs, p.checkMemoryAccounting(ids, pods)...)
	return errors.Join(errs...)
}

// checkPods checks the pods and their reservations (the containers' and
// the pods' ids sorted), and returns the CPUs the reservations hold.
func (p *Policy) checkPods(ids, pods []string, fail func(string, ...any)) cpuset.CPUSet {
	counts := make(map[string]int, len(pods))
	used := map[string]cpuset.CPUSet{}
	memUsed := map[string]map[memoryResource]uint64{}
	for _, id := range ids {
		e := p.containers[id]
		uid := e.pl.PodUID
		counts[uid]++
		r := p.reservationOf(uid)
		if r == nil {
			continue
		}
		if e.pl.Pool == PoolExclusive {
			used[uid] = used[uid].Union(e.pl.CPUs.Intersection(r.cpus))
		}
		if memUsed[uid] == nil {
			memUsed[uid] = map[memoryResource]uint64{}
		}
		for res, size := range inPod(e, r) {
			memUsed[uid][res] += size
		}
	}
	var held cpuset.CPUSet
	for _, uid := range pods {
		pod := p.pods[uid]
		if pod.containers != counts[uid] || pod.containers == 0 && (pod.res == nil || pod.closing) {
			fail("pod %s: %d containers recorded, %d placed", uid, pod.containers, counts[uid])
		}
		for _, id := range pod.shared {
			if e := p.containers[id]; e == nil || e.pl.Pool != PoolPodShared || e.pl.PodUID != uid {
				fail("pod %s: records %s on its shared pool, which is not placed there", uid, id)
			}
		}
		r := pod.res
		if r == nil {
			continue
		}
		if o := r.cpus.Intersection(held.Union(p.reserved).Union(p.isolated)); !o.IsEmpty() || !r.cpus.IsSubsetOf(p.available) {
			fail("pod %s: reserved CPUs %q overlap another pod's, the reserved or the isolated CPUs on %q, or are not all available", uid, r.cpus, o)
		}
		for _, id := range ids {
			if e := p.containers[id]; e.pl.PodUID != uid && (e.pl.Pool == PoolExclusive || e.pl.Pool == PoolIsolated) {
				if o := e.pl.CPUs.Intersection(r.cpus); !o.IsEmpty() {
					fail("pod %s: reserved CPUs %q granted to container %s of another pod on %q", uid, r.cpus, id, o)
				}
			}
		}
		if !r.used.Equal(used[uid]) {
			fail("pod %s: reservation records %q as used, its containers hold %q of it", uid, r.used, used[uid])
		}
		reserved := total(r.held)
		for _, res := range slices.Sorted(maps.Keys(reserved)) {
			if r.memUsed[res] != memUsed[uid][res] || r.memUsed[res] > reserved[res] {
				fail("pod %s: %s: reservation of %d bytes records %d used, its containers use %d", uid, res, reserved[res], r.memUsed[res], memUsed[uid][res])
			}
		}
		held = held.Union(r.cpus)
	}
	return held
}

func (p *Policy) expectedMems(e *entry) cpuset.CPUSet {
	if pod := p.pods[e.pl.PodUID]; e.pl.Pool == PoolPodShared && pod != nil && pod.res != nil {
		return p.podSharedMems(pod.res, e.pl.CPUs, e.req.CPULessMemory)
	}
	if e.group != 0 {
		return p.mems(e.group.nodes(), e.req.CPULessMemory)
	}
	return p.mems(p.topo.NodesOfCPUs(e.pl.CPUs), e.req.CPULessMemory)
}

func (p *Policy) checkMemoryAccounting(ids, pods []string) []error {
	var errs []error
	held := map[int]map[memoryResource]uint64{}
	assignments := map[int]int{}
	groups := map[int]numaMask{}
	// account adds what a container or a pod holds in its memory group.
	account := func(group numaMask, memory []NodeMemory) {
		for _, n := range group.nodes() {
			assignments[n]++
			if g, seen := groups[n]; seen && g != group {
				errs = append(errs, fmt.Errorf("NUMA node %d is in memory groups {%s} and {%s}", n, g, group))
			}
			groups[n] = group
		}
		for _, h := range memory {
			if held[h.Node] == nil {
				held[h.Node] = map[memoryResource]uint64{}
			}
			held[h.Node][memoryResource(h.PageSize)] += h.Bytes
		}
	}
	for _, id := range ids {
		e := p.containers[id]
		account(e.group, e.held)
		account(0, e.cpuLess)
		if got, want := cpuLessBytes(e.cpuLess), p.cpuLessRequest(e.req, e.group); got != want {
			errs = append(errs, fmt.Errorf("container %s: holds %d bytes of CPU-less memory, expected %d", id, got, want))
		}
		for _, h := range e.cpuLess {
			if !slices.Contains(p.cpuLessOf(e.group.nodes()), h.Node) || h.PageSize != 0 {
				errs = append(errs, fmt.Errorf("container %s: CPU-less memory held on node %d (page size %d), not a CPU-less node of its mems %q", id, h.Node, h.PageSize, e.pl.Mems))
			}
		}
	}
	for _, uid := range pods {
		if r := p.pods[uid].res; r != nil {
			account(r.group, r.held)
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

// cpuLessBytes is the memory (not hugepages) held on CPU-less nodes.
func cpuLessBytes(held []NodeMemory) uint64 {
	var sum uint64
	for _, h := range held {
		if h.PageSize == 0 {
			sum += h.Bytes
		}
	}
	return sum
}
