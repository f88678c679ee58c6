package policy

// The Topology Manager's pod scope. The kubelet admits a pod as a unit: it
// merges the hints of the whole pod (the sums of its containers' requests)
// and allocates every container at admission, on the pod's affinity. NRI
// shows a pod's containers one at a time, but every one of them comes with
// the sandbox, which carries the pod's sums (PodSandbox.Linux.PodResources:
// the kubelet's PodRequests and PodLimits, as cpu shares and a memory limit).
// So, at a pod's first exclusive grant, the policy admits the whole pod and
// reserves its CPUs and memory on the pod's affinity; its containers take
// their grants from the reservation first and give them back to it, and the
// reservation lasts until the pod goes (ReleasePod), so that another pod
// cannot take what a later container of this one needs.
//
// What the sandbox does not show, and so is not reserved: which containers
// get exclusive CPUs (a Guaranteed pod's non-integer containers count in the
// sum, so the reservation may hold CPUs the kubelet would leave shared), the
// pod's hugepages (only the first container's, then taken per container on
// the pod's memory group) and the devices of the containers not created yet
// (only the first container's devices give hints). A container that needs
// more than is left of its pod's reservation takes the rest like any other.

import (
	"fmt"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// podState is what the policy remembers of a pod.
type podState struct {
	containers int
	// affinity is the pod's NUMA affinity: its reservation's, else (pod
	// scope without the pod's sums) its first aligned container's; 0 until then.
	affinity numaMask
	res      *reservation // pod scope: what is held for the pod, nil if nothing
	closing  bool         // ReleasePod came while containers were still placed
	// shared are its containers on the pod's shared pool (PoolPodShared), sorted.
	shared []string
	// cpuRequests sums its placed containers' CPU requests (millicores);
	// podLevel: they showed that the pod has pod-level resources (podlevel.go).
	cpuRequests int64
	podLevel    bool
}

// reservation is what a pod admitted as a unit holds.
type reservation struct {
	affinity numaMask
	cpus     cpuset.CPUSet // the pod's CPUs, granted to its containers or not
	used     cpuset.CPUSet // those granted to its containers now
	group    numaMask      // the memory group, 0 when the pod holds no memory
	held     []NodeMemory  // the memory accounted for the pod
	memUsed  map[memoryResource]uint64
}

// free are the pod's CPUs no container of it holds.
func (r *reservation) free() cpuset.CPUSet { return r.cpus.Difference(r.used) }

// left is the pod's reserved memory that no container of it uses now.
func (r *reservation) left() map[memoryResource]uint64 {
	left := total(r.held)
	for res, used := range r.memUsed {
		left[res] -= min(left[res], used)
	}
	return left
}

// beyond is what of mem the pod's reserved memory cannot cover now.
func (r *reservation) beyond(mem map[memoryResource]uint64) map[memoryResource]uint64 {
	left := r.left()
	out := map[memoryResource]uint64{}
	for res, size := range mem {
		if size > left[res] {
			out[res] = size - left[res]
		}
	}
	return out
}

// podScope: the kubelet's Topology Manager uses the pod scope only under a
// policy other than none.
func (p *Policy) podScope() bool {
	return p.cfg.TopologyScope == ScopePod && p.tm.policy != TopologyNone
}

// reservationOf returns the reservation of the pod, or nil.
func (p *Policy) reservationOf(podUID string) *reservation {
	if pod := p.pods[podUID]; pod != nil {
		return pod.res
	}
	return nil
}

// podCPUs is the number of exclusive CPUs the pod's sums ask for, as far as
// they can tell: the whole CPUs of its CPU request, for a Guaranteed pod.
func podCPUs(req Request) int { return int(req.PodCPURequest / 1000) }

// reserves reports whether placing req (n exclusive CPUs) admits its pod as
// a unit: the pod scope, the pod's sums known and covering the container,
// and nothing of the pod aligned yet.
func (p *Policy) reserves(req Request, n int) bool {
	if !p.podScope() || req.QOS != k8s.QOSGuaranteed || podCPUs(req) < n {
		return false
	}
	pod := p.pods[req.PodUID]
	return pod == nil || pod.res == nil && pod.affinity == 0
}

// reservePod admits the whole pod of req, as the kubelet's pod scope
// does, and chooses its CPUs and memory group: the hints of the pod's CPUs
// and memory (at least the container's own) and of the container's devices.
func (p *Policy) reservePod(req Request, mem map[memoryResource]uint64, free cpuset.CPUSet) (*reservation, error) {
	n := podCPUs(req)
	podMem := map[memoryResource]uint64{}
	for r, size := range mem {
		podMem[r] = size
	}
	if req.PodMemory > 0 {
		podMem[0] = max(podMem[0], uint64(req.PodMemory))
	}
	who := fmt.Sprintf("pod %s/%s (topology manager scope pod: %s and %d bytes of memory for the whole pod)",
		req.Namespace, req.Pod, cpuCount(n), podMem[0])
	if n > free.Size() {
		return nil, fmt.Errorf("%w: %s: %d exclusive CPUs free", ErrInsufficientCPUs, who, free.Size())
	}
	providers := []provider{p.tm.cpuHints(p.m, p.perNode(free), p.perNode(cpuset.CPUSet{}), n)}
	if len(podMem) > 0 {
		providers = append(providers, p.mm.hints(podMem))
	}
	affinity, err := p.admit(req, who, providers)
	if err != nil {
		return nil, err
	}
	cpus, err := p.chooseCPUs(n, affinity, free, cpuset.CPUSet{}, cpuset.CPUSet{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInsufficientCPUs, who, err)
	}
	if p.sharedUsers() > 0 && p.sharedPool(p.exclusive.Union(cpus)).IsEmpty() {
		return nil, fmt.Errorf("%w: %s: %d exclusive CPUs free, and the shared pool must keep at least 1 CPU for %d shared containers",
			ErrInsufficientCPUs, who, free.Size(), p.sharedUsers())
	}
	r := &reservation{affinity: affinity, cpus: cpus, memUsed: map[memoryResource]uint64{}}
	if len(podMem) > 0 {
		group, _, err := p.memoryGroup(podMem, affinity, cpus)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", who, err)
		}
		r.group, r.held = group, p.mm.plan(group, podMem)
	}
	return r, nil
}

// inPodSharedPool reports whether req runs on its pod's shared pool
// (KEP-5526, the kubelet 1.37's pod scope): a container without exclusive
// CPUs of its own in a Guaranteed pod with pod-level resources and a whole
// number of CPUs for the pod, under the pod scope.
func (p *Policy) inPodSharedPool(req Request) bool {
	return p.podScope() && req.QOS == k8s.QOSGuaranteed && podCPUs(req) > 0 && req.PodCPURequest%1000 == 0 &&
		p.hasPodLevelResources(req)
}

// placePodShared places a container on its pod's shared pool: the CPUs of
// the pod's reservation that its exclusive containers do not hold, and the
// pod's memory nodes; its memory is the pod's, held by the reservation. The
// pod's first container reserves the pod, as a first exclusive one does.
// With no CPU left there (the exclusive containers hold the whole pod) it
// is refused, as the kubelet refuses such a pod.
func (p *Policy) placePodShared(req Request) (*entry, error) {
	res, fresh := p.reservationOf(req.PodUID), (*reservation)(nil)
	if res == nil {
		if !p.reserves(req, 0) {
			return p.placeShared(req, "shared: its pod's CPUs were placed without a reservation")
		}
		mem := map[memoryResource]uint64{}
		if req.QOS == k8s.QOSGuaranteed {
			mem = requested(req)
		}
		r, err := p.reservePod(req, mem, p.freeExclusive())
		if err != nil {
			return nil, err
		}
		res, fresh = r, r
	}
	cpus := res.free()
	if cpus.IsEmpty() {
		return nil, fmt.Errorf("%w: %s: no CPU of its pod's %s on NUMA nodes {%s} is left for its containers without exclusive CPUs: "+
			"the pod's exclusive containers hold them all (the kubelet refuses such a pod); give the pod more CPUs than its exclusive containers request",
			ErrInsufficientCPUs, name(req), cpuCount(res.cpus.Size()), res.affinity)
	}
	e := &entry{req: req, reserve: fresh, pl: Placement{
		ContainerID: req.ContainerID, PodUID: req.PodUID, Pool: PoolPodShared, CPUs: cpus,
		Mems: p.podSharedMems(res, cpus, req.CPULessMemory), NUMANodes: res.affinity.nodes(),
		Reason: fmt.Sprintf("pod-shared: no exclusive CPUs of its own in a Guaranteed pod with pod-level resources: "+
			"its pod's CPUs that the pod's exclusive containers do not hold, of its %s on NUMA nodes {%s} (topology manager scope pod)",
			cpuCount(res.cpus.Size()), res.affinity),
	}}
	return e, nil
}

// podSharedMems is the cpuset.mems of a pod's shared pool: the pod's memory
// group, else the nodes of its CPUs.
func (p *Policy) podSharedMems(r *reservation, cpus cpuset.CPUSet, cpuLess bool) cpuset.CPUSet {
	if r.group != 0 {
		return p.mems(r.group.nodes(), cpuLess)
	}
	return p.mems(p.topo.NodesOfCPUs(cpus), cpuLess)
}

// podSharedChanges moves the pod's shared containers other than except to
// what is now its shared pool, and returns their new placements.
func (p *Policy) podSharedChanges(podUID, except string) []Placement {
	pod := p.pods[podUID]
	if pod == nil || pod.res == nil || len(pod.shared) == 0 {
		return nil
	}
	cpus := pod.res.free()
	var changed []Placement
	for _, id := range pod.shared {
		e := p.containers[id]
		if e.pl.CPUs.Equal(cpus) {
			continue
		}
		e.pl.CPUs, e.pl.Mems = cpus, p.podSharedMems(pod.res, cpus, e.req.CPULessMemory)
		if id != except {
			changed = append(changed, clonePlacement(e.pl))
		}
	}
	return changed
}

// inPod is what of a container's memory its pod's reservation covers: what
// it requests beyond what it holds itself.
func inPod(e *entry, r *reservation) map[memoryResource]uint64 {
	if r == nil || e.group == 0 || e.group != r.group {
		return nil
	}
	out := map[memoryResource]uint64{}
	held := total(e.held)
	for res, size := range requested(e.req) {
		if size > held[res] {
			out[res] = size - held[res]
		}
	}
	return out
}

// hold commits a new reservation.
func (p *Policy) hold(pod *podState, r *reservation) {
	pod.res, pod.affinity = r, r.affinity
	p.exclusive = p.exclusive.Union(r.cpus)
	if r.group != 0 {
		p.mm.reclaim(r.group, r.held)
	}
}

// ReleasePod forgets what the pod scope holds for a pod whose sandbox is
// stopped or removed, and returns the containers whose CPUs or Mems changed
// and whether the pod held anything. While some of its containers are still
// placed, the reservation goes with the last of them. An unknown pod is a
// no-op.
func (p *Policy) ReleasePod(podUID string) ([]Placement, bool) {
	pod := p.pods[podUID]
	if pod == nil || pod.res == nil {
		return nil, false
	}
	if pod.containers > 0 {
		pod.closing = true
		return nil, true
	}
	before := p.shared
	p.forgetPod(podUID)
	return p.sharedChanges(before, ""), true
}

// forgetPod drops a pod with no container, giving back its reservation.
func (p *Policy) forgetPod(podUID string) {
	if r := p.pods[podUID].res; r != nil {
		p.exclusive = p.exclusive.Difference(r.cpus)
		if r.group != 0 {
			p.mm.give(r.group, r.held)
		}
	}
	delete(p.pods, podUID)
	p.shared = p.sharedPool(p.exclusive)
}

// restorePod reinstates a saved reservation if its CPUs are free and its
// memory can be accounted as it was.
func (p *Policy) restorePod(s SavedPod, sharedRunning int) error {
	free := p.freeExclusive()
	switch {
	case s.CPUs.IsEmpty():
		return fmt.Errorf("no CPUs")
	case !s.CPUs.IsSubsetOf(free):
		return fmt.Errorf("CPUs %q are not free in the exclusive pool (taken, reserved, isolated or unavailable: %q)", s.CPUs, s.CPUs.Difference(free))
	case sharedRunning > 0 && p.sharedPool(p.exclusive.Union(s.CPUs)).IsEmpty():
		return fmt.Errorf("CPUs %q would leave no CPU for %d shared containers", s.CPUs, sharedRunning)
	}
	r := &reservation{affinity: maskOf(s.NUMANodes...), cpus: s.CPUs, group: maskOf(s.MemoryNodes...),
		held: cloneHeld(s.Memory), memUsed: map[memoryResource]uint64{}}
	if r.group != 0 || len(r.held) > 0 {
		if err := p.mm.checkHeld(r.group, r.held); err != nil {
			return err
		}
	}
	pod := p.podState(s.PodUID)
	pod.closing = s.Closing
	p.hold(pod, r)
	p.shared = p.sharedPool(p.exclusive)
	return nil
}

func cloneHeld(held []NodeMemory) []NodeMemory {
	if len(held) == 0 {
		return nil
	}
	return append([]NodeMemory(nil), held...)
}
