package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// entry is one live container.
type entry struct {
	req   Request
	pl    Placement
	group numaMask     // the Memory Manager group, 0 when no memory is accounted
	held  []NodeMemory // what the container holds of each node's memory (beyond its pod's reservation)
	// cpuLess is what it holds of the CPU-less nodes besides (cpuless.go).
	cpuLess []NodeMemory
	// reserve is a reservation for the container's pod (pod scope) that
	// placing the container made, committed with it.
	reserve *reservation
}

// Policy is the allocation state of one node. Not safe for concurrent use (the plugin serializes).
type Policy struct {
	topo *topology.Topology
	cfg  Config
	m    *machine
	tm   *topologyManager
	mm   *memoryManager
	opts assignOptions

	available cpuset.CPUSet
	reserved  cpuset.CPUSet
	isolated  cpuset.CPUSet // kernel-isolated CPUs the policy may grant
	// broken are CPUs whose core is not wholly grantable (a sibling is
	// reserved, isolated or unavailable); full-pcpus-only never grants them.
	broken        cpuset.CPUSet
	reservedNS    map[string]bool
	cpuLessNearby map[int][]int // CPU node -> the CPU-less nodes closest to it

	exclusive    cpuset.CPUSet // union of the exclusive grants
	isolatedUsed cpuset.CPUSet // union of the isolated grants
	shared       cpuset.CPUSet
	containers   map[string]*entry
	sharedIDs    []string // the shared containers, sorted
	pods         map[string]*podState
	// creating is the container Allocate is placing: only its creation
	// shows a pod's pod-level resources by the CPUs its containers request
	// together (podlevel.go).
	creating string
	// restoring is how many containers a Restore has yet to place anew:
	// those it cannot place go on the shared pool, which a grant must then
	// not empty, as for shared containers.
	restoring int
}

// New validates cfg against t and returns a Policy with no containers.
func New(t *topology.Topology, cfg Config) (*Policy, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: no topology", ErrInvalidConfig)
	}
	if err := validateOptions(cfg); err != nil {
		return nil, err
	}
	p := &Policy{
		topo: t, cfg: cfg, m: newMachine(t),
		opts: assignOptions{spread: cfg.SpreadAcrossCores, alignUncore: cfg.AlignByUncoreCache,
			distribute: cfg.DistributeAcrossNUMA, fullPCPUsOnly: cfg.FullPCPUsOnly},
		reservedNS: map[string]bool{},
		containers: map[string]*entry{},
		pods:       map[string]*podState{},
	}
	for _, ns := range cfg.ReservedNamespaces {
		p.reservedNS[ns] = true
	}
	if err := p.initPools(); err != nil {
		return nil, err
	}
	if err := p.initNUMA(); err != nil {
		return nil, err
	}
	p.shared = p.sharedPool(p.exclusive)
	if p.shared.IsEmpty() {
		return nil, fmt.Errorf("%w: no CPU is left for the shared pool: available %q, reserved %q (strict %v), isolated %q",
			ErrInvalidConfig, p.available, p.reserved, cfg.StrictReservation, p.isolated)
	}
	return p, nil
}

// validateOptions rejects the option combinations the kubelet rejects.
func validateOptions(cfg Config) error {
	conflicts := []struct {
		a, b     bool
		what     string
		withWhat string
	}{
		{cfg.FullPCPUsOnly, cfg.SpreadAcrossCores, "full-pcpus-only", "spread-across-cores"},
		{cfg.DistributeAcrossNUMA, cfg.SpreadAcrossCores, "distribute-across-numa", "spread-across-cores"},
		{cfg.AlignByUncoreCache, cfg.SpreadAcrossCores, "align-by-uncore-cache", "spread-across-cores"},
		{cfg.AlignByUncoreCache, cfg.DistributeAcrossNUMA, "align-by-uncore-cache", "distribute-across-numa"},
	}
	for _, c := range conflicts {
		if c.a && c.b {
			return fmt.Errorf("%w: options %s and %s cannot be used together", ErrInvalidConfig, c.what, c.withWhat)
		}
	}
	switch cfg.TopologyPolicy {
	case "", TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode:
	default:
		return fmt.Errorf("%w: topology policy %q: expected none, best-effort, restricted or single-numa-node", ErrInvalidConfig, cfg.TopologyPolicy)
	}
	switch cfg.TopologyScope {
	case "", ScopeContainer, ScopePod:
	default:
		return fmt.Errorf("%w: topology scope %q: expected container or pod", ErrInvalidConfig, cfg.TopologyScope)
	}
	switch cfg.ReservedGuaranteed {
	case "", ReservedGuaranteedExclusive, ReservedGuaranteedReserved, ReservedGuaranteedAllowFewer:
	default:
		return fmt.Errorf("%w: reserved-namespaces-guaranteed %q: expected %s, %s or %s", ErrInvalidConfig, cfg.ReservedGuaranteed,
			ReservedGuaranteedExclusive, ReservedGuaranteedReserved, ReservedGuaranteedAllowFewer)
	}
	if cfg.AlignBySocket && cfg.TopologyPolicy == TopologySingleNUMANode {
		// As the kubelet: a grant cannot be both on one node and socket-aligned.
		return fmt.Errorf("%w: option align-by-socket cannot be used with topology policy %s", ErrInvalidConfig, TopologySingleNUMANode)
	}
	if cfg.MaxAllowableNUMANodes != 0 && cfg.MaxAllowableNUMANodes < DefaultMaxAllowableNUMANodes {
		return fmt.Errorf("%w: max-allowable-numa-nodes %d: expected at least %d, as the kubelet", ErrInvalidConfig,
			cfg.MaxAllowableNUMANodes, DefaultMaxAllowableNUMANodes)
	}
	if cfg.ReservedCPUCount < 0 {
		return fmt.Errorf("%w: reserved CPU count %d is negative", ErrInvalidConfig, cfg.ReservedCPUCount)
	}
	if !cfg.ReservedCPUs.IsEmpty() && cfg.ReservedCPUCount > 0 {
		return fmt.Errorf("%w: both reserved CPUs %q and a reserved CPU count %d are set: expected one of them",
			ErrInvalidConfig, cfg.ReservedCPUs, cfg.ReservedCPUCount)
	}
	return nil
}

func (p *Policy) initPools() error {
	all := p.topo.CPUs()
	p.available = all
	if !p.cfg.AvailableCPUs.IsEmpty() {
		if extra := p.cfg.AvailableCPUs.Difference(all); !extra.IsEmpty() {
			return fmt.Errorf("%w: available CPUs %q include %q, which are not CPUs of the machine (%q)",
				ErrInvalidConfig, p.cfg.AvailableCPUs, extra, all)
		}
		p.available = p.cfg.AvailableCPUs
	}
	switch {
	case !p.cfg.ReservedCPUs.IsEmpty():
		if outside := p.cfg.ReservedCPUs.Difference(p.available); !outside.IsEmpty() {
			return fmt.Errorf("%w: reserved CPUs %q include %q, outside the available CPUs %q",
				ErrInvalidConfig, p.cfg.ReservedCPUs, outside, p.available)
		}
		p.reserved = p.cfg.ReservedCPUs
	case p.cfg.ReservedCPUCount > 0:
		// Like the kubelet: the reserved CPUs are chosen as a grant would be.
		reserved, err := p.m.takeByTopology(p.available, p.cfg.ReservedCPUCount, p.opts)
		if err != nil {
			return fmt.Errorf("%w: reserving %d CPUs out of the available %q: %w",
				ErrInvalidConfig, p.cfg.ReservedCPUCount, p.available, err)
		}
		p.reserved = reserved
	}
	p.isolated = p.topo.Isolated().Intersection(p.available).Difference(p.reserved)
	grantable := p.available.Difference(p.reserved).Difference(p.isolated)
	for _, core := range p.m.groups[levelCore] {
		if !core.cpus.IsSubsetOf(grantable) && !core.cpus.IsSubsetOf(p.isolated) {
			p.broken = p.broken.Union(core.cpus)
		}
	}
	return nil
}

func (p *Policy) initNUMA() error {
	tm := &topologyManager{
		policy:        p.cfg.TopologyPolicy,
		preferClosest: p.cfg.PreferClosestNUMA,
		distance: func(a, b int) int {
			d, _ := p.topo.Distance(a, b)
			return d
		},
	}
	for _, g := range p.m.groups[levelNode] {
		if g.id >= 64 {
			return fmt.Errorf("%w: NUMA node %d: node ids above 63 are not supported", ErrInvalidConfig, g.id)
		}
		tm.nodes = append(tm.nodes, g.id)
		tm.all |= maskOf(g.id)
	}
	if tm.policy == TopologyNone || tm.policy == "" {
		tm.policy = TopologyNone
	} else if err := p.checkNUMANodeCount(len(tm.nodes)); err != nil {
		return err
	}
	if p.cfg.AlignBySocket {
		if sockets := len(p.m.groups[levelSocket]); sockets > len(tm.nodes) {
			return fmt.Errorf("%w: option align-by-socket needs at least as many NUMA nodes as sockets, as the kubelet: this machine has %d sockets and %d NUMA nodes with CPUs",
				ErrInvalidConfig, sockets, len(tm.nodes))
		}
		tm.alignBySocket = true
		tm.nodesPerSocket = len(tm.nodes) / len(p.m.groups[levelSocket])
		tm.socketsOf = func(m numaMask) int { return len(p.socketsOf(p.cpusOf(m))) }
	}
	for node := range p.cfg.ReservedMemory {
		if _, ok := p.topo.Node(node); !ok {
			return fmt.Errorf("%w: reserved memory for NUMA node %d, which the machine does not have", ErrInvalidConfig, node)
		}
	}
	p.tm = tm
	mm, err := newMemoryManager(p.topo, tm, p.cfg.ReservedMemory)
	if err != nil {
		return err
	}
	p.mm = mm
	p.cpuLessNearby = map[int][]int{}
	cpuLess := p.topo.CPULessNodes()
	for _, n := range tm.nodes {
		best := -1
		for _, c := range cpuLess {
			d, _ := p.topo.Distance(n, c)
			switch {
			case best < 0 || d < best:
				best = d
				p.cpuLessNearby[n] = []int{c}
			case d == best:
				p.cpuLessNearby[n] = append(p.cpuLessNearby[n], c)
			}
		}
	}
	return nil
}

// checkNUMANodeCount refuses a Topology Manager policy on a machine with
// more NUMA nodes than max-allowable-numa-nodes, as the kubelet does (it
// counts every node, CPU-less ones included), and on one with more than 16
// nodes with CPUs, beyond which the plugin cannot enumerate node sets.
func (p *Policy) checkNUMANodeCount(withCPUs int) error {
	limit := p.cfg.MaxAllowableNUMANodes
	if limit == 0 {
		limit = DefaultMaxAllowableNUMANodes
	}
	if all := len(p.topo.Nodes()); all > limit {
		return fmt.Errorf("%w: topology policy %q on a machine with %d NUMA nodes (%d with CPUs): more than max-allowable-numa-nodes %d; "+
			"the kubelet refuses it too: raise max-allowable-numa-nodes, or use topology policy none",
			ErrInvalidConfig, p.cfg.TopologyPolicy, all, withCPUs, limit)
	}
	if withCPUs > 16 {
		return fmt.Errorf("%w: topology policy %q on %d NUMA nodes with CPUs: at most 16 are supported",
			ErrInvalidConfig, p.cfg.TopologyPolicy, withCPUs)
	}
	return nil
}

// sharedUsers is how many containers need the shared pool not to be empty.
func (p *Policy) sharedUsers() int { return len(p.sharedIDs) + p.restoring }

// sharedPool is what is left for shared containers given the exclusive grants.
func (p *Policy) sharedPool(exclusive cpuset.CPUSet) cpuset.CPUSet {
	pool := p.available.Difference(p.isolated).Difference(exclusive)
	if p.cfg.StrictReservation {
		pool = pool.Difference(p.reserved)
	}
	return pool
}

// freeExclusive: the CPUs an exclusive grant may take now.
func (p *Policy) freeExclusive() cpuset.CPUSet {
	return p.available.Difference(p.reserved).Difference(p.isolated).Difference(p.exclusive)
}

func (p *Policy) freeIsolated() cpuset.CPUSet { return p.isolated.Difference(p.isolatedUsed) }

// classify says which pool a request belongs to and how many CPUs it needs.
// An explicit preference beats the namespace, which beats the static policy.
func (p *Policy) classify(req Request) (PoolKind, int, error) {
	wholeCPUs := int((req.CPURequest + 999) / 1000)
	switch req.CPU {
	case CPUReserved:
		return PoolReserved, 0, nil
	case CPUShared:
		return PoolShared, 0, nil
	case CPUIsolatedPrefer, CPUIsolatedRequire:
		return PoolIsolated, max(1, wholeCPUs), nil
	case CPUAuto:
	default:
		return "", 0, fmt.Errorf("%w: %s: CPU preference %q: expected %q, %q, %q or %q",
			ErrInvalidRequest, name(req), req.CPU, CPUShared, CPUReserved, CPUIsolatedPrefer, CPUIsolatedRequire)
	}
	exclusive := p.ownsExclusive(req)
	if p.reservedNS[req.Namespace] && !(exclusive && p.reservedGuaranteed() == ReservedGuaranteedExclusive) {
		return PoolReserved, 0, nil
	}
	switch {
	case exclusive:
		return PoolExclusive, int(req.CPURequest / 1000), nil
	case p.inPodSharedPool(req):
		return PoolPodShared, 0, nil
	}
	return PoolShared, 0, nil
}

// ownsExclusive is the kubelet's static policy: a Guaranteed container
// with a whole number of CPUs. A pod with pod-level resources (KEP-2837)
// is Guaranteed by its pod-level requests and limits, and then, as the
// kubelet 1.37 checks (KEP-5526), the container must be Guaranteed on its
// own too; what the runtime shows of such pods is in podlevel.go.
func (p *Policy) ownsExclusive(req Request) bool {
	return req.QOS == k8s.QOSGuaranteed && req.CPURequest > 0 && req.CPURequest%1000 == 0 &&
		(req.CPULimit == 0 || req.CPULimit == req.CPURequest) && !(wholePod(req) && p.hasPodLevelResources(req))
}

// reservedGuaranteed is the configured choice for Guaranteed containers in
// reserved namespaces.
func (p *Policy) reservedGuaranteed() ReservedGuaranteed {
	if p.cfg.ReservedGuaranteed == "" {
		return ReservedGuaranteedExclusive
	}
	return p.cfg.ReservedGuaranteed
}

func name(req Request) string {
	return fmt.Sprintf("container %s/%s/%s", req.Namespace, req.Pod, req.Container)
}

func validate(req Request) error {
	switch {
	case req.ContainerID == "":
		return fmt.Errorf("%w: %s: no container id", ErrInvalidRequest, name(req))
	case req.CPURequest < 0 || req.CPULimit < 0 || req.Memory < 0:
		return fmt.Errorf("%w: %s: negative CPU request %d, CPU limit %d or memory %d",
			ErrInvalidRequest, name(req), req.CPURequest, req.CPULimit, req.Memory)
	case req.CPURequest > int64(cpuset.MaxCPU+1)*1000:
		return fmt.Errorf("%w: %s: CPU request %dm is larger than any machine", ErrInvalidRequest, name(req), req.CPURequest)
	}
	for size, bytes := range req.HugePages {
		if size == 0 || bytes < 0 {
			return fmt.Errorf("%w: %s: hugepages of %d bytes per page: %d bytes requested", ErrInvalidRequest, name(req), size, bytes)
		}
	}
	return nil
}

// Allocate places a new container. It returns its placement and every other
// container whose CPUs or Mems changed. Allocating a known container again
// resizes it (the same request gives the same placement).
func (p *Policy) Allocate(req Request) (Placement, []Placement, error) {
	if _, known := p.containers[req.ContainerID]; known {
		return p.Resize(req)
	}
	if err := validate(req); err != nil {
		return Placement{}, nil, err
	}
	before := p.shared
	p.creating = req.ContainerID
	defer func() { p.creating = "" }()
	e, err := p.place(req, cpuset.CPUSet{})
	if err != nil {
		return Placement{}, nil, err
	}
	e, moved := p.commit(e, cpuset.CPUSet{})
	return e.pl, p.changes(before, req.PodUID, req.ContainerID, moved), nil
}

// commit assigns a placed container; when its pod thereby shows it has
// pod-level resources and containers of it move (settlePodLevel), the
// container is placed again, as what they freed (its pod's reservation)
// may suit it better. It returns the entry assigned and the placements of
// the containers that moved.
func (p *Policy) commit(e *entry, keep cpuset.CPUSet) (*entry, []Placement) {
	p.assign(e)
	moved := p.settlePodLevel(e.req)
	if len(moved) == 0 {
		return e, nil
	}
	p.unassign(e)
	if again, err := p.place(e.req, keep); err == nil {
		e = again
	}
	p.assign(e)
	return e, moved
}

// Resize changes the resources of a known container in place: an exclusive
// grant keeps what it can of its CPUs; a change of pool moves it. On error
// the old placement stays intact.
func (p *Policy) Resize(req Request) (Placement, []Placement, error) {
	old, known := p.containers[req.ContainerID]
	if !known {
		return Placement{}, nil, fmt.Errorf("%w: %s: resize of container %q, which has no placement", ErrUnknownContainer, name(req), req.ContainerID)
	}
	if err := validate(req); err != nil {
		return Placement{}, nil, err
	}
	before := p.shared
	// What the pod showed outlives its only container's resize.
	podLevel := p.pods[old.pl.PodUID].podLevel
	keepPodLevel := func() {
		if podLevel {
			p.podState(old.pl.PodUID).podLevel = true
		}
	}
	p.unassign(old)
	if req.PodUID == old.pl.PodUID {
		keepPodLevel()
	}
	keep := cpuset.CPUSet{}
	if old.pl.Pool == PoolExclusive || old.pl.Pool == PoolIsolated {
		keep = old.pl.CPUs
	}
	e, err := p.place(req, keep)
	if err != nil {
		p.assign(old)
		keepPodLevel()
		return Placement{}, nil, fmt.Errorf("resize: %w", err)
	}
	e, moved := p.commit(e, keep)
	return e.pl, p.changes(before, req.PodUID, req.ContainerID, moved), nil
}

// Release forgets a container; an unknown id is a no-op. It returns the
// other containers whose CPUs or Mems changed.
func (p *Policy) Release(containerID string) []Placement {
	e, known := p.containers[containerID]
	if !known {
		return nil
	}
	before := p.shared
	p.unassign(e)
	if pod := p.pods[e.pl.PodUID]; pod != nil && pod.closing && pod.containers == 0 {
		p.forgetPod(e.pl.PodUID)
	}
	return p.changes(before, e.pl.PodUID, containerID, nil)
}

// changes are the placements of the containers other than except that a
// change in the pod podUID moved: the containers placed again (moved), the
// shared containers when the shared pool was before and is no more, and the
// pod's own shared containers; each once, as it is now.
func (p *Policy) changes(before cpuset.CPUSet, podUID, except string, moved []Placement) []Placement {
	changed := p.sharedChanges(before, except)
	if ofPod := p.podSharedChanges(podUID, except); len(ofPod) > 0 {
		changed = append(changed, ofPod...)
	}
	if len(moved) == 0 {
		return changed
	}
	seen := map[string]bool{}
	var out []Placement
	for _, pl := range append(moved, changed...) {
		if !seen[pl.ContainerID] {
			seen[pl.ContainerID] = true
			cur, _ := p.Placement(pl.ContainerID)
			out = append(out, cur)
		}
	}
	return out
}

// assign records a placed container and its grant.
func (p *Policy) assign(e *entry) {
	id := e.pl.ContainerID
	p.containers[id] = e
	pod := p.podState(e.pl.PodUID)
	pod.containers++
	pod.cpuRequests += e.req.CPURequest
	if e.reserve != nil {
		p.hold(pod, e.reserve)
		e.reserve = nil
	}
	switch e.pl.Pool {
	case PoolExclusive:
		p.exclusive = p.exclusive.Union(e.pl.CPUs)
		if pod.res != nil {
			pod.res.used = pod.res.used.Union(e.pl.CPUs.Intersection(pod.res.cpus))
		}
	case PoolIsolated:
		p.isolatedUsed = p.isolatedUsed.Union(e.pl.CPUs)
	case PoolShared:
		i, _ := slices.BinarySearch(p.sharedIDs, id)
		p.sharedIDs = slices.Insert(p.sharedIDs, i, id)
	case PoolPodShared:
		i, _ := slices.BinarySearch(pod.shared, id)
		pod.shared = slices.Insert(pod.shared, i, id)
	}
	p.mm.takeFree(e.cpuLess)
	if e.group != 0 {
		p.mm.reclaim(e.group, e.held)
		for r, size := range inPod(e, pod.res) {
			pod.res.memUsed[r] += size
		}
	}
	if pod.affinity == 0 && e.pl.Pool != PoolShared && e.pl.Pool != PoolReserved && len(e.pl.NUMANodes) > 0 {
		pod.affinity = maskOf(e.pl.NUMANodes...)
	}
	p.shared = p.sharedPool(p.exclusive)
}

// unassign is the exact inverse of assign, except that a reservation stays
// with its pod: the container's share of it returns to it.
func (p *Policy) unassign(e *entry) {
	id := e.pl.ContainerID
	delete(p.containers, id)
	pod := p.pods[e.pl.PodUID]
	switch e.pl.Pool {
	case PoolExclusive:
		freed := e.pl.CPUs
		if pod.res != nil {
			pod.res.used = pod.res.used.Difference(e.pl.CPUs)
			freed = freed.Difference(pod.res.cpus)
		}
		p.exclusive = p.exclusive.Difference(freed)
	case PoolIsolated:
		p.isolatedUsed = p.isolatedUsed.Difference(e.pl.CPUs)
	case PoolShared:
		if i, found := slices.BinarySearch(p.sharedIDs, id); found {
			p.sharedIDs = slices.Delete(p.sharedIDs, i, i+1)
		}
	case PoolPodShared:
		if i, found := slices.BinarySearch(pod.shared, id); found {
			pod.shared = slices.Delete(pod.shared, i, i+1)
		}
	}
	if e.group != 0 {
		for r, size := range inPod(e, pod.res) {
			pod.res.memUsed[r] -= size
		}
		p.mm.give(e.group, e.held)
	}
	p.mm.giveFree(e.cpuLess)
	pod.cpuRequests -= e.req.CPURequest
	if pod.containers--; pod.containers == 0 && pod.res == nil {
		delete(p.pods, e.pl.PodUID)
	}
	p.shared = p.sharedPool(p.exclusive)
}

// sharedChanges updates the shared containers other than except when the
// shared pool changed, and returns their new placements.
func (p *Policy) sharedChanges(before cpuset.CPUSet, except string) []Placement {
	if p.shared.Equal(before) {
		return nil
	}
	nodes := p.topo.NodesOfCPUs(p.shared)
	mems := [2]cpuset.CPUSet{p.mems(nodes, false), p.mems(nodes, true)}
	changed := make([]Placement, 0, len(p.sharedIDs))
	for _, id := range p.sharedIDs {
		e := p.containers[id]
		e.pl.CPUs = p.shared
		e.pl.Mems = mems[0]
		if e.req.CPULessMemory {
			e.pl.Mems = mems[1]
		}
		if id != except {
			changed = append(changed, clonePlacement(e.pl))
		}
	}
	return changed
}

// mems is cpuset.mems for nodes, with the closest CPU-less nodes if asked.
func (p *Policy) mems(nodes []int, cpuLess bool) cpuset.CPUSet {
	all := slices.Clone(nodes)
	if cpuLess {
		for _, n := range nodes {
			all = append(all, p.cpuLessNearby[n]...)
		}
	}
	return cpuset.New(all...)
}

func clonePlacement(pl Placement) Placement {
	pl.NUMANodes = slices.Clone(pl.NUMANodes)
	if pl.HugePages != nil {
		hp := make(map[uint64]int64, len(pl.HugePages))
		for k, v := range pl.HugePages {
			hp[k] = v
		}
		pl.HugePages = hp
	}
	return pl
}

// Placement returns the placement of a container.
func (p *Policy) Placement(containerID string) (Placement, bool) {
	e, ok := p.containers[containerID]
	if !ok {
		return Placement{}, false
	}
	return clonePlacement(e.pl), true
}

// Placements returns every placement, sorted by container id.
func (p *Policy) Placements() []Placement {
	ids := p.sortedIDs()
	out := make([]Placement, 0, len(ids))
	for _, id := range ids {
		out = append(out, clonePlacement(p.containers[id].pl))
	}
	return out
}

func (p *Policy) sortedIDs() []string {
	ids := make([]string, 0, len(p.containers))
	for id := range p.containers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Config returns the configuration the policy applies.
func (p *Policy) Config() Config { return p.cfg }

// SharedCPUs returns the shared pool.
func (p *Policy) SharedCPUs() cpuset.CPUSet { return p.shared }

// ReservedCPUs returns the reserved CPUs (reserved-cpus, or those that
// reserved-cpu-count chose).
func (p *Policy) ReservedCPUs() cpuset.CPUSet { return p.reserved }

// SharedMems returns the cpuset.mems of the shared containers: the NUMA
// nodes of the shared pool, with the closest CPU-less nodes for those that
// may use CPU-less memory (Request.CPULessMemory).
func (p *Policy) SharedMems(cpuLess bool) cpuset.CPUSet {
	return p.mems(p.topo.NodesOfCPUs(p.shared), cpuLess)
}

// cpuCount renders a number of CPUs for messages.
func cpuCount(n int) string {
	if n == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", n)
}

func joinNodes(nodes []int) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ",")
}
