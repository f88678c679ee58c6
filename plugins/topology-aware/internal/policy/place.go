package policy

// Placing one container: which pool, which CPUs, which memory nodes. place
// computes an entry without changing the Policy; assign commits it.

import (
	"fmt"
	"slices"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// place computes where req goes. keep are CPUs the container had before a
// resize (already returned to the free CPUs): they are kept where possible.
func (p *Policy) place(req Request, keep cpuset.CPUSet) (*entry, error) {
	pool, n, err := p.classify(req)
	if err != nil {
		return nil, err
	}
	switch pool {
	case PoolReserved:
		return p.placeReserved(req)
	case PoolIsolated:
		free := p.freeIsolated()
		if free.Size() >= n {
			return p.placeExclusive(req, PoolIsolated, n, free, keep.Intersection(p.isolated))
		}
		if req.CPU == CPUIsolatedRequire {
			asked := "CPU preference " + string(req.CPU)
			if req.CPUAnnotation != "" {
				asked = "annotation " + req.CPUAnnotation
			}
			have := fmt.Sprintf("but %d of the isolated CPUs %q are free", free.Size(), p.isolated)
			if p.isolated.IsEmpty() {
				have = "but the node isolates no CPUs (the kernel's isolcpus)"
			}
			return nil, fmt.Errorf("%w: %s: %s requested from the isolated CPUs by %s, %s",
				ErrInsufficientCPUs, name(req), cpuCount(n), asked, have)
		}
		return p.placeExclusive(req, PoolExclusive, n, p.freeExclusive(), keep.Difference(p.isolated))
	case PoolExclusive:
		return p.placeExclusive(req, PoolExclusive, n, p.freeExclusive(), keep.Difference(p.isolated))
	case PoolPodShared:
		return p.placePodShared(req)
	default:
		why := "shared: not Guaranteed with an integer CPU request"
		switch {
		case req.CPU == CPUShared:
			why = "shared: annotated for shared CPUs"
		case req.QOS == k8s.QOSGuaranteed && req.CPURequest%1000 == 0:
			why = "shared: Guaranteed through its pod's pod-level resources, not on its own: no exclusive CPUs, as the kubelet gives it none"
		}
		return p.placeShared(req, why)
	}
}

func (p *Policy) newEntry(req Request, pool PoolKind, cpus cpuset.CPUSet, affinity numaMask, reason string) *entry {
	return &entry{req: req, pl: Placement{
		ContainerID: req.ContainerID, PodUID: req.PodUID, Pool: pool, CPUs: cpus,
		Mems: p.mems(p.topo.NodesOfCPUs(cpus), req.CPULessMemory), NUMANodes: affinity.nodes(), Reason: reason,
	}}
}

func (p *Policy) placeReserved(req Request) (*entry, error) {
	cpus, what := p.reserved, fmt.Sprintf("the %d reserved CPUs %q", p.reserved.Size(), p.reserved)
	if p.reserved.IsEmpty() {
		cpus, what = p.shared, fmt.Sprintf("the %d CPUs of the shared pool %q (none are reserved)", p.shared.Size(), p.shared)
	}
	warning, err := p.squeezed(req, what, cpus)
	if err != nil {
		return nil, err
	}
	var e *entry
	if p.reserved.IsEmpty() {
		e, err = p.placeShared(req, "reserved pool requested but no CPUs are reserved: shared")
	} else {
		why := "reserved: annotated for the reserved CPUs"
		if req.CPU == CPUAuto {
			why = "reserved: namespace " + req.Namespace + " runs on the reserved CPUs"
		}
		e = p.newEntry(req, PoolReserved, p.reserved, 0, why)
	}
	if e != nil {
		e.pl.Warning = warning
	}
	return e, err
}

// squeezed checks a Guaranteed container with an integer CPU request that
// the configuration keeps in its reserved namespace's pool (cpus, described
// by what)
// rather than giving it exclusive CPUs as the kubelet would: it is refused
// when the pool has fewer CPUs than it requests, unless the configuration
// allows that, and then it runs with a warning. It is never squeezed
// silently: its CPU quota says more than it can use.
func (p *Policy) squeezed(req Request, what string, cpus cpuset.CPUSet) (string, error) {
	if req.CPU != CPUAuto || !p.ownsExclusive(req) {
		return "", nil
	}
	n := int(req.CPURequest / 1000)
	if cpus.Size() >= n {
		return "", nil
	}
	msg := fmt.Sprintf("a Guaranteed request of %s in namespace %s, which reserved-namespaces-guaranteed: %s keeps on %s",
		cpuCount(n), req.Namespace, p.reservedGuaranteed(), what)
	if p.reservedGuaranteed() == ReservedGuaranteedAllowFewer {
		return msg + ", fewer than it requests: its CPU quota allows more than it can use", nil
	}
	return "", fmt.Errorf("%w: %s: %s, fewer than it requests: reserve more CPUs, or set reserved-namespaces-guaranteed: %s (exclusive CPUs, as the kubelet gives them) or %s (run it on them anyway, with a warning)",
		ErrInsufficientCPUs, name(req), msg, ReservedGuaranteedExclusive, ReservedGuaranteedAllowFewer)
}

func (p *Policy) placeShared(req Request, why string) (*entry, error) {
	if p.shared.IsEmpty() {
		return nil, fmt.Errorf("%w: %s: shared CPUs requested, but exclusive grants hold every CPU of the shared pool (%d exclusive, %d available, %q reserved)",
			ErrInsufficientCPUs, name(req), p.exclusive.Size(), p.available.Size(), p.reserved)
	}
	affinity, err := p.admit(req, "", nil)
	if err != nil {
		return nil, err
	}
	return p.newEntry(req, PoolShared, p.shared, affinity, why), nil
}

// admit asks the Topology Manager for the container's affinity, given the
// hints of its CPUs and memory (if any), its devices and, under the pod
// scope, its pod; who names what is admitted, for the error ("": the
// container, named only on the error path, which is not the hot one).
func (p *Policy) admit(req Request, who string, providers []provider) (numaMask, error) {
	if p.tm.policy == TopologyNone {
		return 0, nil
	}
	if devices := p.deviceNodes(req); devices != 0 {
		providers = append(providers, p.tm.deviceHints(devices))
	}
	if pod := p.pods[req.PodUID]; p.cfg.TopologyScope == ScopePod && pod != nil && pod.affinity != 0 {
		providers = append(providers, provider{resource: "pod", hints: []hint{{mask: pod.affinity, preferred: true}}})
	}
	if len(providers) == 0 {
		return 0, nil
	}
	best, ok := p.tm.merge(providers)
	if !ok {
		if who == "" {
			who = name(req)
		}
		return 0, fmt.Errorf("%w: %s: topology manager policy %s cannot align the resources: %s",
			ErrTopologyAffinity, who, p.tm.policy, p.tm.explain(providers))
	}
	return best.mask, nil
}

// deviceNodes are the NUMA nodes of the container's devices (by their node,
// else by their local CPUs when those are not the whole machine).
func (p *Policy) deviceNodes(req Request) numaMask {
	var mask numaMask
	for _, d := range req.Devices {
		switch {
		case d.NUMANode >= 0 && p.tm.all.has(d.NUMANode):
			mask |= maskOf(d.NUMANode)
		case d.NUMANode < 0 && !d.CPUs.IsEmpty():
			if local := maskOf(p.topo.NodesOfCPUs(d.CPUs)...) & p.tm.all; local != p.tm.all {
				mask |= local
			}
		}
	}
	return mask
}

// placeExclusive grants n whole CPUs from free to req. Under the pod scope
// the grant comes from the pod's reservation first, made by the pod's first
// grant (pod.go): the pod's affinity then stands for the container's own
// CPU and memory hints, as in the kubelet.
func (p *Policy) placeExclusive(req Request, pool PoolKind, n int, free, keep cpuset.CPUSet) (*entry, error) {
	if p.cfg.FullPCPUsOnly {
		if n%p.m.cpusPerCore != 0 {
			return nil, fmt.Errorf("%w: %s: %s requested, but full-pcpus-only grants whole cores of %d CPUs: request a multiple of %d",
				ErrInsufficientCPUs, name(req), cpuCount(n), p.m.cpusPerCore, p.m.cpusPerCore)
		}
		free = free.Difference(p.broken)
	}
	mem := map[memoryResource]uint64{}
	if req.QOS == k8s.QOSGuaranteed {
		mem = requested(req)
	}
	var res, fresh *reservation
	if pool == PoolExclusive {
		if res = p.reservationOf(req.PodUID); res != nil {
			free = free.Union(res.free())
		} else if p.reserves(req, n) {
			r, err := p.reservePod(req, mem, free)
			if err != nil {
				return nil, err
			}
			res, fresh = r, r
		}
	}
	// A resize keeps only CPUs it may still take: a container that moved to
	// another pod (its id reused) must leave its old pod's reservation.
	keep = keep.Intersection(free)
	if n > free.Size() {
		return nil, p.notEnough(req, pool, n, free)
	}
	var affinity numaMask
	var err error
	switch {
	case fresh != nil:
		affinity = fresh.affinity
	case res != nil:
		affinity, err = p.admit(req, "", nil)
	default:
		var providers []provider
		if p.tm.policy != TopologyNone {
			freeCount, ownCount := p.perNode(free.Difference(keep)), p.perNode(keep)
			providers = append(providers, p.tm.cpuHints(p.m, freeCount, ownCount, n))
			if len(mem) > 0 {
				providers = append(providers, p.mm.hints(mem))
			}
		}
		affinity, err = p.admit(req, "", providers)
		if err != nil && pool == PoolExclusive {
			err = p.isolatedHeldBack(err, req, n, free, keep, providers)
		}
	}
	if err != nil {
		return nil, err
	}
	var podFree cpuset.CPUSet
	if res != nil {
		podFree = res.free()
	}
	cpus, err := p.chooseCPUs(n, affinity, free, keep, podFree)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInsufficientCPUs, name(req), err)
	}
	if pod := p.pods[req.PodUID]; res != nil && pod != nil && len(pod.shared) > 0 && res.free().Difference(cpus).IsEmpty() {
		return nil, fmt.Errorf("%w: %s: %s requested, which would leave none of its pod's %s for the pod's %s without exclusive CPUs: "+
			"the kubelet refuses such a pod; give the pod more CPUs than its exclusive containers request",
			ErrInsufficientCPUs, name(req), cpuCount(n), cpuCount(res.cpus.Size()), containerCount(len(pod.shared)))
	}
	if pool == PoolExclusive && p.sharedUsers() > 0 {
		taken := p.exclusive.Union(cpus)
		if fresh != nil {
			taken = taken.Union(fresh.cpus)
		}
		if p.sharedPool(taken).IsEmpty() {
			return nil, p.notEnough(req, pool, n, free)
		}
	}
	e := p.newEntry(req, pool, cpus, affinity, p.exclusiveReason(req, pool, cpus, res))
	e.reserve = fresh
	if len(mem) > 0 {
		if err := p.placeMemory(e, mem, affinity, res); err != nil {
			return nil, fmt.Errorf("%s: %w", name(req), err)
		}
	}
	return e, nil
}

// placeMemory accounts a grant's memory: on its pod's memory group, beyond
// what the pod's reservation covers, or on a group of its own.
func (p *Policy) placeMemory(e *entry, mem map[memoryResource]uint64, affinity numaMask, res *reservation) error {
	group, own, why := numaMask(0), mem, ""
	if res != nil && res.group != 0 {
		group, own = res.group, res.beyond(mem)
		if !p.mm.fits(group, own) {
			return fmt.Errorf("%w: beyond its pod's reservation: %s", ErrInsufficientMemory, p.mm.shortfall(own, group))
		}
		why = " (its pod's)"
	} else {
		var err error
		if group, why, err = p.memoryGroup(mem, affinity, e.pl.CPUs); err != nil {
			return err
		}
	}
	cpuLess, err := p.placeCPULess(e.req, group)
	if err != nil {
		return err
	}
	e.group, e.cpuLess = group, cpuLess
	e.held = p.mm.plan(group, own)
	e.pl.Mems = p.mems(group.nodes(), e.req.CPULessMemory)
	e.pl.Memory = e.req.Memory
	e.pl.HugePages = clonePlacement(Placement{HugePages: e.req.HugePages}).HugePages
	e.pl.Reason += fmt.Sprintf("; memory on NUMA nodes {%s}%s", group, why)
	return nil
}

// memoryGroup chooses the Memory Manager group of a grant, and says why
// when it is not the nodes of its CPUs. Memory follows the CPUs: the group
// is the NUMA nodes of the CPUs whenever a group there can hold it. Else,
// with a Topology Manager affinity, those nodes with the rest of the
// affinity; else the closest group that can hold it (memoryManager.closest),
// never a node of the machine chosen regardless of where the CPUs are.
func (p *Policy) memoryGroup(mem map[memoryResource]uint64, affinity numaMask, cpus cpuset.CPUSet) (numaMask, string, error) {
	local := maskOf(p.topo.NodesOfCPUs(cpus)...) & p.tm.all
	if p.mm.holds(local, mem) {
		return local, "", nil
	}
	why := fmt.Sprintf(" (not on its CPUs' NUMA nodes {%s} alone: %s; ", local, p.mm.whyNot(local, mem))
	if wider := local | affinity; affinity != 0 && p.mm.holds(wider, mem) {
		return wider, why + "with the rest of its NUMA affinity)", nil
	}
	group, ok := p.mm.closest(mem, local)
	if !ok {
		return 0, "", fmt.Errorf("%w: %s", ErrInsufficientMemory, p.mm.shortfall(mem, 0))
	}
	return group, why + "the closest NUMA nodes that can hold it)", nil
}

// chooseCPUs is the kubelet's allocateCPUs: the CPUs of the affinity first,
// the rest from anywhere in free. keep (what a resized grant keeps), then
// podFree (its pod's reservation), both within free, are taken first.
func (p *Policy) chooseCPUs(n int, affinity numaMask, free, keep, podFree cpuset.CPUSet) (cpuset.CPUSet, error) {
	return p.chooseNear(n, affinity, 0, free, keep, podFree)
}

// chooseNear is chooseCPUs for a grant that has CPUs on the nodes near
// already: what it takes besides goes as close to them as it can.
func (p *Policy) chooseNear(n int, affinity, near numaMask, free, keep, podFree cpuset.CPUSet) (cpuset.CPUSet, error) {
	if keep.IsEmpty() {
		keep, podFree = podFree, cpuset.CPUSet{}
	}
	if !keep.IsEmpty() {
		if n <= keep.Size() {
			return p.takeCPUs(keep, n, near)
		}
		kept := maskOf(p.topo.NodesOfCPUs(keep)...)
		more, err := p.chooseNear(n-keep.Size(), affinity|kept, near|kept, free.Difference(keep),
			podFree.Difference(keep), cpuset.CPUSet{})
		return keep.Union(more), err
	}
	var result cpuset.CPUSet
	if affinity != 0 {
		aligned := p.alignedCPUs(affinity).Intersection(free)
		taken, err := p.takeCPUs(aligned, min(n, aligned.Size()), near)
		if err != nil {
			return cpuset.CPUSet{}, err
		}
		result = taken
	}
	rest, err := p.takeCPUs(free.Difference(result), n-result.Size(), near|affinity)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return result.Union(rest), nil
}

// alignedCPUs are the CPUs of the affinity's NUMA nodes or, with
// align-by-socket, of their sockets, as the kubelet's getAlignedCPUs.
func (p *Policy) alignedCPUs(affinity numaMask) cpuset.CPUSet {
	cpus := p.cpusOf(affinity)
	if p.cfg.AlignBySocket {
		for _, s := range p.socketsOf(cpus) {
			cpus = cpus.Union(p.topo.CPUsOfSocket(s))
		}
	}
	return cpus
}

// socketsOf lists the sockets of cpus.
func (p *Policy) socketsOf(cpus cpuset.CPUSet) []int {
	var out []int
	for _, s := range p.topo.Sockets() {
		if !p.topo.CPUsOfSocket(s).Intersection(cpus).IsEmpty() {
			out = append(out, s)
		}
	}
	return out
}

func (p *Policy) cpusOf(mask numaMask) cpuset.CPUSet {
	var cpus cpuset.CPUSet
	for _, node := range mask.nodes() {
		cpus = cpus.Union(p.topo.CPUsOfNode(node))
	}
	return cpus
}

// perNode counts cpus per NUMA node, in the order of the machine's nodes.
func (p *Policy) perNode(cpus cpuset.CPUSet) []int {
	counts := make([]int, len(p.m.groups[levelNode]))
	for _, cpu := range cpus.List() {
		counts[p.m.of[levelNode][cpu]]++
	}
	return counts
}

// notEnough explains a grant that does not fit: too few free CPUs, or (with
// n <= free) the shared pool that must not become empty.
func (p *Policy) notEnough(req Request, pool PoolKind, n int, free cpuset.CPUSet) error {
	msg := fmt.Sprintf("%s: %d %s CPUs requested, %d free", name(req), n, pool, free.Size())
	if capacity := p.capacity(pool); n > capacity {
		msg += fmt.Sprintf(", and the machine can never grant more than %d (%d CPUs available, %d reserved, %d isolated)",
			capacity, p.available.Size(), p.reserved.Size(), p.isolated.Size())
	}
	if n <= free.Size() {
		msg = fmt.Sprintf("%s: %d exclusive CPUs requested, %d free in the shared pool (shared pool must keep at least 1 CPU for %d shared containers)",
			name(req), n, free.Size(), p.sharedUsers())
	}
	if p.cfg.FullPCPUsOnly {
		msg += " (full-pcpus-only: CPUs of partly reserved, isolated or unavailable cores are not counted)"
	}
	if isolated := p.freeIsolated(); pool == PoolExclusive && n > free.Size() && n <= free.Size()+isolated.Size() {
		msg += "; " + p.heldBackNote(isolated)
	}
	return fmt.Errorf("%w: %s", ErrInsufficientCPUs, msg)
}

// heldBackNote names the free isolated CPUs that an ordinary grant may not
// take.
func (p *Policy) heldBackNote(free cpuset.CPUSet) string {
	return fmt.Sprintf("the isolated CPUs %q (the kernel's isolcpus; %d of them free) would make it fit, but they are held back for containers that ask for them "+
		"(annotation cpu.nri-suite.io: prefer-isolated or require-isolated)", p.isolated, free.Size())
}

// isolatedHeldBack adds to a Topology Manager refusal of an ordinary grant
// that the free isolated CPUs, which it may not take, would have let the
// CPUs align: the refusal is then theirs.
func (p *Policy) isolatedHeldBack(err error, req Request, n int, free, keep cpuset.CPUSet, providers []provider) error {
	isolated := p.freeIsolated()
	if isolated.IsEmpty() || len(providers) == 0 {
		return err
	}
	withIsolated := slices.Clone(providers)
	withIsolated[0] = p.tm.cpuHints(p.m, p.perNode(free.Union(isolated).Difference(keep)), p.perNode(keep), n)
	if _, again := p.admit(req, "", withIsolated); again != nil {
		return err
	}
	return fmt.Errorf("%w; %s", err, p.heldBackNote(isolated))
}

// capacity is how many CPUs the pool could grant with no grant made.
func (p *Policy) capacity(pool PoolKind) int {
	if pool == PoolIsolated {
		return p.isolated.Size()
	}
	all := p.available.Difference(p.reserved).Difference(p.isolated)
	if p.cfg.FullPCPUsOnly {
		all = all.Difference(p.broken)
	}
	return all.Size()
}

func (p *Policy) exclusiveReason(req Request, pool PoolKind, cpus cpuset.CPUSet, res *reservation) string {
	why := "exclusive: Guaranteed with an integer CPU request"
	switch {
	case res != nil:
		why += fmt.Sprintf(", from its pod's reservation of %s on NUMA nodes {%s} (topology manager scope pod)", cpuCount(res.cpus.Size()), res.affinity)
	case pool == PoolIsolated:
		why = "isolated: annotated " + string(req.CPU)
	case req.CPU == CPUIsolatedPrefer:
		why = "exclusive: annotated prefer-isolated, not enough isolated CPUs free"
	}
	return fmt.Sprintf("%s; %s on NUMA nodes {%s}", why, cpuCount(cpus.Size()), joinNodes(p.topo.NodesOfCPUs(cpus)))
}
