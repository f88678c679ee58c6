package policy

// Snapshot and Restore: after the plugin or the runtime restarts, the state
// is rebuilt from the checkpoint and what the containers actually run on,
// without moving any container whose placement is still consistent.
//
// Restore goes in three passes after the pods' reservations (pod scope),
// each in container id order so that conflicts
// resolve the same way every time: first the checkpointed containers that
// still run where the checkpoint says (kept), then the containers the
// checkpoint does not know, where they run (adopted), and last everything
// that could be neither, placed anew (replaced). Exclusive and isolated
// grants go before shared ones within each pass, so that a shared container
// never holds a CPU a grant needs.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Snapshot returns the durable state: every container's request, placement
// and memory accounting, sorted by container id.
func (p *Policy) Snapshot() Snapshot {
	ids := p.sortedIDs()
	s := Snapshot{Containers: make([]SavedContainer, 0, len(ids))}
	for _, id := range ids {
		e := p.containers[id]
		saved := SavedContainer{Request: cloneRequest(e.req), Placement: clonePlacement(e.pl)}
		if e.group != 0 {
			saved.MemoryNodes = e.group.nodes()
			saved.Memory = slices.Clone(e.held)
			sortHeld(saved.Memory)
			saved.CPULessMemory = cloneHeld(e.cpuLess)
		}
		s.Containers = append(s.Containers, saved)
	}
	for _, uid := range slices.Sorted(maps.Keys(p.pods)) {
		if p.pods[uid].podLevel {
			s.PodLevel = append(s.PodLevel, uid)
		}
		if r := p.pods[uid].res; r != nil {
			pod := SavedPod{PodUID: uid, NUMANodes: r.affinity.nodes(), CPUs: r.cpus, MemoryNodes: r.group.nodes(),
				Memory: cloneHeld(r.held), Closing: p.pods[uid].closing}
			sortHeld(pod.Memory)
			s.Pods = append(s.Pods, pod)
		}
	}
	return s
}

func cloneRequest(r Request) Request {
	r.Devices = slices.Clone(r.Devices)
	if r.HugePages != nil {
		r.HugePages = clonePlacement(Placement{HugePages: r.HugePages}).HugePages
	}
	return r
}

// Restore replaces the state by the saved one, reconciled with the running
// containers, and reports what it kept, adopted, replaced and dropped.
func (p *Policy) Restore(saved Snapshot, running []Running) RestoreReport {
	p.reset()
	// Sized up front: growing maps of 10,000 containers step by step was a
	// good part of a large Synchronize's garbage.
	p.containers = make(map[string]*entry, len(running))
	runs := p.ranked(running)
	byID := make(map[string]SavedContainer, len(saved.Containers))
	for _, s := range saved.Containers {
		byID[s.Placement.ContainerID] = s
	}
	var report RestoreReport
	isRunning := make(map[string]bool, len(runs))
	var anew []Running
	reasons := map[string]string{}
	p.markPodLevel(saved.PodLevel, runs)
	sharedRunning := 0
	for _, r := range runs {
		isRunning[r.Request.ContainerID] = true
		if pool, _, err := p.classify(r.Request); err == nil && (pool == PoolShared || pool == PoolReserved && p.reserved.IsEmpty()) {
			sharedRunning++
		}
	}
	// The pods' reservations first: their containers' grants come from them.
	for _, pod := range saved.Pods {
		if err := p.restorePod(pod, sharedRunning); err != nil {
			if report.DroppedPods == nil {
				report.DroppedPods = map[string]string{}
			}
			report.DroppedPods[pod.PodUID] = err.Error()
		}
	}
	// First the checkpointed containers that run where it says; then, where
	// they run, those it does not know or records elsewhere (created or
	// resized after its last write, see nriplugin's persister): a
	// checkpoint behind the runtime moves no container that is consistent.
	stale := map[string]string{}
	for _, r := range runs {
		s, known := byID[r.Request.ContainerID]
		if !known {
			continue
		}
		e, err := p.fromCheckpoint(r, s, sharedRunning)
		if err != nil {
			stale[r.Request.ContainerID] = err.Error()
			continue
		}
		p.assign(e)
		report.Kept = append(report.Kept, r.Request.ContainerID)
	}
	for _, r := range runs {
		id := r.Request.ContainerID
		why, isStale := stale[id]
		if _, known := byID[id]; known && !isStale {
			continue
		}
		e, err := p.fromRunning(r, sharedRunning)
		if err != nil {
			anew = append(anew, r)
			if !isStale {
				why = err.Error()
			}
			reasons[id] = why
			continue
		}
		p.assign(e)
		report.Adopted = append(report.Adopted, id)
	}
	replaced := map[string]bool{}
	for i, r := range anew {
		p.restoring = len(anew) - i - 1
		pl := p.placeAnew(r.Request, reasons[r.Request.ContainerID])
		report.Replaced = append(report.Replaced, pl)
		replaced[r.Request.ContainerID] = true
	}
	p.restoring = 0
	for _, s := range saved.Containers {
		if !isRunning[s.Placement.ContainerID] {
			report.Dropped = append(report.Dropped, s.Placement.ContainerID)
		}
	}
	slices.Sort(report.Dropped)
	p.forgetClosedPods()
	for uid, pod := range p.pods {
		if pod.containers == 0 && pod.res == nil {
			delete(p.pods, uid) // marked by markPodLevel, gone since
		}
	}
	p.refreshShared()
	for _, r := range runs {
		e, tracked := p.containers[r.Request.ContainerID]
		if !tracked {
			continue
		}
		if replaced[r.Request.ContainerID] || differs(r.CPUs, e.pl.CPUs) || differs(r.Mems, e.pl.Mems) {
			report.Updates = append(report.Updates, clonePlacement(e.pl))
		}
	}
	for i, pl := range report.Replaced {
		if e, ok := p.containers[pl.ContainerID]; ok {
			reason := pl.Reason
			report.Replaced[i] = clonePlacement(e.pl)
			report.Replaced[i].Reason = reason
		}
	}
	return report
}

// markPodLevel records, before anything is placed, the pods known to have
// pod-level resources and those a running container shows it of, so that
// their containers are classified as before the restart (podlevel.go).
// What the pods' containers request together is not counted: the running
// containers may have been resized since their sandbox's sums were taken.
func (p *Policy) markPodLevel(known []string, runs []Running) {
	for _, uid := range known {
		p.podState(uid).podLevel = true
	}
	for _, r := range runs {
		if guaranteedByPod(r.Request) {
			p.podState(r.Request.PodUID).podLevel = true
		}
	}
}

// podState returns the state of a pod, made if it has none.
func (p *Policy) podState(uid string) *podState {
	pod := p.pods[uid]
	if pod == nil {
		pod = &podState{}
		p.pods[uid] = pod
	}
	return pod
}

// forgetClosedPods drops the restored reservations of released pods that
// have no container any more.
func (p *Policy) forgetClosedPods() {
	for uid, pod := range p.pods {
		if pod.closing && pod.containers == 0 {
			p.forgetPod(uid)
		}
	}
}

// differs reports whether a container must be updated: the runtime does not
// show it on its placement. An empty cpuset is no exception: it is what a
// container created without the plugin has, or one whose update never
// reached the runtime (a reply after NRI's deadline), and it runs on every
// CPU. A placement is applied once the runtime shows it, never because the
// checkpoint says so.
func differs(actual, placed cpuset.CPUSet) bool {
	return !placed.IsEmpty() && !actual.Equal(placed)
}

// ranked returns the running containers with grants before shared
// containers, then by container id. Each is classified once: a comparator
// that classified would do it n log n times, 140,000 at 10,000 containers.
func (p *Policy) ranked(running []Running) []Running {
	type rankedRun struct {
		grant bool
		run   Running
	}
	rs := make([]rankedRun, len(running))
	for i, r := range running {
		pool, _, err := p.classify(r.Request)
		rs[i] = rankedRun{grant: err == nil && (pool == PoolExclusive || pool == PoolIsolated), run: r}
	}
	slices.SortFunc(rs, func(a, b rankedRun) int {
		if a.grant != b.grant {
			if a.grant {
				return -1
			}
			return 1
		}
		return strings.Compare(a.run.Request.ContainerID, b.run.Request.ContainerID)
	})
	out := make([]Running, len(rs))
	for i, r := range rs {
		out[i] = r.run
	}
	return out
}

// reset forgets every container.
func (p *Policy) reset() {
	p.exclusive, p.isolatedUsed = cpuset.CPUSet{}, cpuset.CPUSet{}
	p.containers = map[string]*entry{}
	p.sharedIDs = nil
	p.pods = map[string]*podState{}
	p.mm, _ = newMemoryManager(p.topo, p.tm, p.cfg.ReservedMemory) // validated by New
	p.shared = p.sharedPool(p.exclusive)
}

// refreshShared sets every shared container to the final shared pool, and
// every pod's shared containers to their pod's.
func (p *Policy) refreshShared() {
	nodes := p.topo.NodesOfCPUs(p.shared)
	for _, id := range p.sharedIDs {
		e := p.containers[id]
		e.pl.CPUs = p.shared
		e.pl.Mems = p.mems(nodes, e.req.CPULessMemory)
	}
	for uid := range p.pods {
		p.podSharedChanges(uid, "")
	}
}

// fromCheckpoint rebuilds a checkpointed container if the checkpoint still
// holds: same pool and size for its request, running on the recorded CPUs,
// which are free, and its memory accountable as recorded.
func (p *Policy) fromCheckpoint(r Running, s SavedContainer, sharedRunning int) (*entry, error) {
	req := r.Request
	if err := validate(req); err != nil {
		return nil, err
	}
	pool, n, err := p.classify(req)
	if err != nil {
		return nil, err
	}
	pl := clonePlacement(s.Placement)
	pl.PodUID = req.PodUID
	switch {
	case pl.Pool == pool:
	case pool == PoolIsolated && req.CPU == CPUIsolatedPrefer && pl.Pool == PoolExclusive:
	case pool == PoolReserved && p.reserved.IsEmpty() && pl.Pool == PoolShared:
	case pool == PoolPodShared && pl.Pool == PoolShared: // its pod had no reservation
	default:
		return nil, fmt.Errorf("checkpointed in the %s pool, its request now belongs in the %s pool", pl.Pool, pool)
	}
	e := &entry{req: req, pl: pl}
	switch pl.Pool {
	case PoolShared, PoolReserved:
		e.pl.CPUs = p.shared
		if pl.Pool == PoolReserved {
			e.pl.CPUs = p.reserved
		}
		e.pl.Mems = p.mems(p.topo.NodesOfCPUs(e.pl.CPUs), req.CPULessMemory)
		return e, nil
	case PoolPodShared:
		// On what its pod's restored reservation leaves, which the grants
		// restored after it may still shrink (refreshShared).
		res := p.reservationOf(req.PodUID)
		if res == nil || res.free().IsEmpty() {
			return nil, fmt.Errorf("on its pod's shared pool, but the pod's reservation was not restored or leaves it no CPU")
		}
		e.pl.CPUs = res.free()
		e.pl.Mems = p.podSharedMems(res, e.pl.CPUs, req.CPULessMemory)
		return e, nil
	}
	if !r.CPUs.IsEmpty() && !r.CPUs.Equal(pl.CPUs) {
		return nil, fmt.Errorf("checkpointed on CPUs %q, running on %q", pl.CPUs, r.CPUs)
	}
	if err := p.checkGrant(pl.Pool, n, pl.CPUs, sharedRunning, p.podFree(req)); err != nil {
		return nil, err
	}
	if len(s.MemoryNodes) > 0 || len(s.Memory) > 0 {
		e.group = maskOf(s.MemoryNodes...)
		e.held = slices.Clone(s.Memory)
		if err := p.checkMemory(req, e.group, e.held); err != nil {
			return nil, err
		}
		if e.cpuLess, err = p.restoreCPULess(req, e.group, cloneHeld(s.CPULessMemory)); err != nil {
			return nil, err
		}
	} else if req.QOS == "Guaranteed" && len(requested(req)) > 0 {
		return nil, fmt.Errorf("its memory is not in the checkpoint")
	}
	return e, nil
}

// fromRunning adopts a container the checkpoint does not know where it runs,
// if that is consistent: a grant on free CPUs of the right pool and size,
// memory that fits on its nodes.
func (p *Policy) fromRunning(r Running, sharedRunning int) (*entry, error) {
	req := r.Request
	if err := validate(req); err != nil {
		return nil, err
	}
	pool, n, err := p.classify(req)
	if err != nil {
		return nil, err
	}
	if pool == PoolIsolated && !r.CPUs.IsEmpty() && !r.CPUs.IsSubsetOf(p.isolated) && req.CPU == CPUIsolatedPrefer {
		pool = PoolExclusive
	}
	switch pool {
	case PoolShared:
		return p.placeShared(req, "shared: adopted after a restart")
	case PoolReserved, PoolPodShared:
		return p.place(req, cpuset.CPUSet{})
	}
	if r.CPUs.IsEmpty() {
		return nil, fmt.Errorf("its CPUs are unknown")
	}
	if err := p.checkGrant(pool, n, r.CPUs, sharedRunning, p.podFree(req)); err != nil {
		return nil, err
	}
	e := p.newEntry(req, pool, r.CPUs, 0, fmt.Sprintf("%s: adopted after a restart where it runs; %s", pool, cpuCount(n)))
	if mem := requested(req); req.QOS == "Guaranteed" && len(mem) > 0 {
		nodes := p.topo.NodesOfCPUs(r.CPUs)
		if !r.Mems.IsEmpty() {
			nodes = nil
			for _, n := range r.Mems.List() {
				if p.tm.all.has(n) {
					nodes = append(nodes, n)
				}
			}
		}
		group := maskOf(nodes...)
		if !p.mm.canGroup(group) {
			return nil, fmt.Errorf("its memory nodes {%s} overlap another memory group", group)
		}
		for res, size := range mem {
			if p.mm.sum(group, res, freeOf) < size {
				return nil, fmt.Errorf("%s: %d bytes do not fit on NUMA nodes {%s}", res, size, group)
			}
		}
		if e.cpuLess, err = p.placeCPULess(req, group); err != nil {
			return nil, err
		}
		e.group = group
		e.held = p.mm.plan(group, mem)
		e.pl.Mems = p.mems(nodes, req.CPULessMemory)
		e.pl.Memory = req.Memory
		e.pl.HugePages = cloneRequest(req).HugePages
	}
	return e, nil
}

// podFree are the CPUs of the container's pod's reservation that no
// container of it holds: an exclusive grant of the pod may be on them.
func (p *Policy) podFree(req Request) cpuset.CPUSet {
	if r := p.reservationOf(req.PodUID); r != nil {
		return r.free()
	}
	return cpuset.CPUSet{}
}

// checkGrant reports why cpus cannot be granted again as a pool's n CPUs;
// an exclusive grant may also be on podFree.
func (p *Policy) checkGrant(pool PoolKind, n int, cpus cpuset.CPUSet, sharedRunning int, podFree cpuset.CPUSet) error {
	if cpus.Size() != n {
		return fmt.Errorf("holds %s, its request is for %s", cpuCount(cpus.Size()), cpuCount(n))
	}
	free := p.freeExclusive().Union(podFree)
	if pool == PoolIsolated {
		free = p.freeIsolated()
	}
	if !cpus.IsSubsetOf(free) {
		return fmt.Errorf("%s CPUs %q are not free in the %s pool (taken, reserved, isolated or unavailable: %q)",
			pool, cpus, pool, cpus.Difference(free))
	}
	if pool == PoolExclusive && sharedRunning > 0 && p.sharedPool(p.exclusive.Union(cpus)).IsEmpty() {
		return fmt.Errorf("CPUs %q would leave no CPU for %d shared containers", cpus, sharedRunning)
	}
	return nil
}

// checkMemory reports why a container's saved memory cannot be accounted
// again: it must hold what it requests, less what its pod's reservation
// (same group) still covers.
func (p *Policy) checkMemory(req Request, group numaMask, held []NodeMemory) error {
	want := map[memoryResource]uint64{}
	if req.QOS == "Guaranteed" {
		want = requested(req)
	}
	got := total(held)
	covered := map[memoryResource]uint64{}
	if r := p.reservationOf(req.PodUID); r != nil && r.group == group {
		covered = r.left()
	}
	resources := slices.Sorted(maps.Keys(want))
	for r := range got {
		if _, ok := want[r]; !ok {
			resources = append(resources, r)
		}
	}
	for _, r := range resources {
		if got[r] > want[r] || want[r]-got[r] > covered[r] {
			return fmt.Errorf("%s: holds %d bytes, requests %d (its pod's reservation covers %d more)", r, got[r], want[r], covered[r])
		}
	}
	return p.mm.checkHeld(group, held)
}

// placeAnew places a container that could not be kept or adopted. When even
// that fails it is confined.
func (p *Policy) placeAnew(req Request, why string) Placement {
	e, err := p.place(req, cpuset.CPUSet{})
	if err != nil {
		return p.confine(req, fmt.Sprintf("not restored (%s) and cannot be placed: %v", why, err))
	}
	p.assign(e)
	pl := clonePlacement(e.pl)
	pl.Reason = fmt.Sprintf("placed anew after a restart (%s): %s", why, e.pl.Reason)
	return pl
}

// confine puts a running container that cannot be placed on the shared pool,
// marked unplaced: left where it runs (on every CPU, when it was created
// without the plugin) it would run on other containers' exclusive CPUs. It
// then follows the shared pool as the shared containers do. Only when every
// CPU is granted (no shared pool) does it stay out of the state, reported
// unplaced with no CPUs.
func (p *Policy) confine(req Request, why string) Placement {
	if p.shared.IsEmpty() {
		return Placement{ContainerID: req.ContainerID, PodUID: req.PodUID, Pool: PoolShared, Unplaced: true,
			Reason: why + "; cannot be confined either: exclusive grants hold every CPU of the shared pool"}
	}
	e := p.newEntry(req, PoolShared, p.shared, 0, why+"; confined to the shared pool")
	e.pl.Unplaced = true
	p.assign(e)
	return clonePlacement(e.pl)
}
