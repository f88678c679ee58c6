package policy

// The Memory Manager's static policy (pkg/kubelet/cm/memorymanager): memory
// and hugepages of Guaranteed exclusive containers are accounted per NUMA
// node. A container lives on one node, or on a group of nodes when one is not
// enough; a node is in at most one group at a time, and a node serving a
// single-node container cannot join a group, so groups never overlap.
//
// Unlike the kubelet, which releases a container's memory from its group's
// nodes in node order, every container remembers how much it took from each
// node, so that release is the exact inverse of allocation.

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology"
)

// memoryResource is regular memory (0) or hugepages of a page size in bytes.
type memoryResource uint64

func (r memoryResource) String() string {
	if r == 0 {
		return "memory"
	}
	return fmt.Sprintf("hugepages-%dkB", uint64(r)/1024)
}

// NodeMemory is what one container holds of one resource on one node.
type NodeMemory struct {
	Node     int    `json:"node"`
	PageSize uint64 `json:"pageSize,omitempty"` // 0: regular memory
	Bytes    uint64 `json:"bytes"`
}

type nodeMemory struct {
	allocatable map[memoryResource]uint64
	free        map[memoryResource]uint64
	assignments int      // containers holding memory here
	group       numaMask // the nodes this one serves containers with
}

type memoryManager struct {
	// nodes are the nodes with CPUs, which form groups, and the CPU-less
	// ones (HBM, PMEM, CXL), which never do: the containers that may use
	// them hold their memory there besides (cpuless.go).
	nodes map[int]*nodeMemory
	tm    *topologyManager
}

func newMemoryManager(t *topology.Topology, tm *topologyManager, reserved map[int]uint64) (*memoryManager, error) {
	mm := &memoryManager{nodes: map[int]*nodeMemory{}, tm: tm}
	for _, id := range append(slices.Clone(tm.nodes), t.CPULessNodes()...) {
		n, _ := t.Node(id)
		state := &nodeMemory{allocatable: map[memoryResource]uint64{}, free: map[memoryResource]uint64{}, group: maskOf(id)}
		total := n.MemTotal
		for _, hp := range n.HugePages {
			size := hp.Size * hp.Total
			state.allocatable[memoryResource(hp.Size)] = size
			total -= min(total, size)
		}
		if reserved[id] > total {
			return nil, fmt.Errorf("%w: reserved memory on NUMA node %d is %d bytes, more than its %d bytes of memory outside hugepages",
				ErrInvalidConfig, id, reserved[id], total)
		}
		state.allocatable[0] = total - reserved[id]
		for r, v := range state.allocatable {
			state.free[r] = v
		}
		mm.nodes[id] = state
	}
	return mm, nil
}

// requested is what a request asks the Memory Manager for.
func requested(req Request) map[memoryResource]uint64 {
	out := map[memoryResource]uint64{}
	if req.Memory > 0 {
		out[0] = uint64(req.Memory)
	}
	for size, bytes := range req.HugePages {
		if bytes > 0 {
			out[memoryResource(size)] = uint64(bytes)
		}
	}
	return out
}

func (mm *memoryManager) sum(mask numaMask, r memoryResource, of func(*nodeMemory) map[memoryResource]uint64) uint64 {
	var total uint64
	for v := uint64(mask); v != 0; v &= v - 1 {
		if n := mm.nodes[bits.TrailingZeros64(v)]; n != nil {
			total += of(n)[r]
		}
	}
	return total
}

func freeOf(n *nodeMemory) map[memoryResource]uint64 { return n.free }

// hints are the kubelet's: every set of nodes that has the memory free and
// can form a group (a single node not in a group, or exactly an existing
// group, or nodes in no group); preferred are the sets as small as the
// smallest whose allocatable memory could hold the request.
func (mm *memoryManager) hints(req map[memoryResource]uint64) provider {
	// Per resource, the node's allocatable and free bytes by node id: the
	// subsets below sum them 2^nodes times.
	type table struct {
		want        uint64
		alloc, free [64]uint64
	}
	tables := make([]table, 0, len(req))
	for r, size := range req {
		tb := table{want: size}
		for _, id := range mm.tm.nodes {
			n := mm.nodes[id]
			tb.alloc[id], tb.free[id] = n.allocatable[r], n.free[r]
		}
		tables = append(tables, tb)
	}
	minSize := len(mm.tm.nodes)
	var out []hint
	mm.tm.subsets(func(mask numaMask) {
		for i := range tables {
			var alloc uint64
			for v := uint64(mask); v != 0; v &= v - 1 {
				alloc += tables[i].alloc[bits.TrailingZeros64(v)]
			}
			if alloc < tables[i].want {
				return
			}
		}
		minSize = min(minSize, mask.count())
		if !mm.canGroup(mask) {
			return
		}
		for i := range tables {
			var free uint64
			for v := uint64(mask); v != 0; v &= v - 1 {
				free += tables[i].free[bits.TrailingZeros64(v)]
			}
			if free < tables[i].want {
				return
			}
		}
		out = append(out, hint{mask: mask})
	})
	for i := range out {
		out[i].preferred = out[i].mask.count() == minSize
	}
	why := ""
	if len(out) == 0 {
		why = ": " + mm.whyNoGroup(req)
	}
	return provider{resource: "memory", hints: out, why: why}
}

// canGroup reports whether the nodes of mask may serve one container
// together without overlapping another group.
func (mm *memoryManager) canGroup(mask numaMask) bool {
	single := mask.count() == 1
	for v := uint64(mask); v != 0; v &= v - 1 {
		n := mm.nodes[bits.TrailingZeros64(v)]
		if single {
			if n.group.count() > 1 {
				return false
			}
			continue
		}
		if n.assignments > 0 && n.group != mask {
			return false
		}
	}
	return true
}

// holds reports whether the nodes of mask can serve one more container
// together and have req free.
func (mm *memoryManager) holds(mask numaMask, req map[memoryResource]uint64) bool {
	return mask != 0 && mm.canGroup(mask) && mm.fits(mask, req)
}

// closest returns the group for req when the nodes of the container's CPUs
// (local) cannot hold it: of the groups that can, the one with the most of
// local's nodes, then the fewest nodes, then the closest to local by
// distance, then the lowest ids. The candidates are the existing groups
// (whose nodes cannot join another), every single node, and the sets grown
// from each node, and from local, by adding the closest nodes that hold no
// memory yet until they hold req: a quadratic search where trying every set
// would be exponential in the nodes.
func (mm *memoryManager) closest(req map[memoryResource]uint64, local numaMask) (numaMask, bool) {
	var best numaMask
	consider := func(m numaMask) {
		if !mm.holds(m, req) {
			return
		}
		if best == 0 || mm.closer(m, best, local) {
			best = m
		}
	}
	seeds := []numaMask{local}
	for _, id := range mm.tm.nodes {
		seeds = append(seeds, maskOf(id))
		if g := mm.nodes[id].group; g.count() > 1 {
			consider(g)
		}
	}
	for _, seed := range seeds {
		consider(seed)
		if !mm.freeToGroup(seed) {
			continue
		}
		set := seed
		for _, id := range mm.byDistance(seed) {
			if set.has(id) || !mm.freeToGroup(maskOf(id)) {
				continue
			}
			set |= maskOf(id)
			if mm.fits(set, req) {
				consider(set)
				break
			}
		}
	}
	return best, best != 0
}

// closer orders candidate groups for closest.
func (mm *memoryManager) closer(a, b, local numaMask) bool {
	if oa, ob := (a & local).count(), (b & local).count(); oa != ob {
		return oa > ob
	}
	if a.count() != b.count() {
		return a.count() < b.count()
	}
	if da, db := mm.tm.meanDistance(a|local), mm.tm.meanDistance(b|local); da != db {
		return da < db
	}
	return a < b
}

// freeToGroup reports whether no node of mask holds memory: such nodes may
// form a new group of any shape.
func (mm *memoryManager) freeToGroup(mask numaMask) bool {
	for _, id := range mask.nodes() {
		if n := mm.nodes[id]; n == nil || n.assignments > 0 {
			return false
		}
	}
	return true
}

// byDistance lists the nodes with CPUs by their mean distance to the nodes
// of from, nearest first, ties by id.
func (mm *memoryManager) byDistance(from numaMask) []int {
	ids := slices.Clone(mm.tm.nodes)
	mean := func(id int) float64 {
		sum := 0
		for _, f := range from.nodes() {
			sum += mm.tm.distance(f, id)
		}
		return float64(sum) / float64(from.count())
	}
	slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(mean(a), mean(b)) })
	return ids
}

// whyNot says why the nodes of mask cannot hold req for one more container.
func (mm *memoryManager) whyNot(mask numaMask, req map[memoryResource]uint64) string {
	if blocked := mm.groupBlockers(mask); blocked != "" {
		return blocked
	}
	var parts []string
	for _, r := range sortedResources(req) {
		if free := mm.sum(mask, r, freeOf); free < req[r] {
			parts = append(parts, fmt.Sprintf("%d bytes of %s free there, %d requested", free, r, req[r]))
		}
	}
	return strings.Join(parts, ", ")
}

// groupBlockers says which nodes of mask keep it from serving a container
// as one group, and why; empty when none does.
func (mm *memoryManager) groupBlockers(mask numaMask) string {
	var parts []string
	seen := map[numaMask]bool{}
	for _, id := range mask.nodes() {
		n := mm.nodes[id]
		switch {
		case mask.count() == 1 && n.group.count() > 1:
			parts = append(parts, fmt.Sprintf("node %d is in the group {%s}", id, n.group))
		case mask.count() > 1 && n.assignments > 0 && n.group != mask && n.group.count() == 1:
			parts = append(parts, fmt.Sprintf("node %d holds the memory of %s of its own, and a node that does cannot join a group", id, containerCount(n.assignments)))
		case mask.count() > 1 && n.assignments > 0 && n.group != mask && !seen[n.group]:
			seen[n.group] = true
			parts = append(parts, fmt.Sprintf("nodes {%s} form a group holding the memory of %s, which no other group may overlap", n.group, containerCount(n.assignments)))
		}
	}
	return strings.Join(parts, "; ")
}

func containerCount(n int) string {
	if n == 1 {
		return "1 container"
	}
	return fmt.Sprintf("%d containers", n)
}

// shortfall says what is free where, and why no group can hold req.
func (mm *memoryManager) shortfall(req map[memoryResource]uint64, affinity numaMask) string {
	where := "any NUMA nodes"
	if affinity != 0 {
		where = "NUMA nodes containing {" + affinity.String() + "}"
	}
	msg := ""
	for _, r := range sortedResources(req) {
		msg += fmt.Sprintf("%s %d bytes requested; ", r, req[r])
	}
	msg += "free:"
	for _, id := range mm.tm.nodes {
		n := mm.nodes[id]
		msg += fmt.Sprintf(" node %d", id)
		for _, r := range sortedResources(req) {
			msg += fmt.Sprintf(" %s=%d", r, n.free[r])
		}
		if n.group.count() > 1 {
			msg += " (in group {" + n.group.String() + "})"
		}
		msg += ";"
	}
	return msg + " no group of " + where + " can hold it: " + mm.whyNoGroup(req)
}

// whyNoGroup says why no group can hold req: too little free in all, or
// the free memory sits on nodes that cannot group together.
func (mm *memoryManager) whyNoGroup(req map[memoryResource]uint64) string {
	var lacking []string
	for _, r := range sortedResources(req) {
		if free := mm.sum(mm.tm.all, r, freeOf); free < req[r] {
			lacking = append(lacking, fmt.Sprintf("%d bytes of %s free on all the NUMA nodes together", free, r))
		}
	}
	if len(lacking) > 0 {
		return "only " + strings.Join(lacking, " and ")
	}
	var free numaMask
	for _, id := range mm.tm.nodes {
		if mm.nodes[id].assignments == 0 {
			free |= maskOf(id)
		}
	}
	why := "enough is free on the NUMA nodes together, but not on nodes that can form one group: " + mm.groupBlockers(mm.tm.all)
	if free == 0 {
		return why + "; every node holds memory already"
	}
	var have []string
	for _, r := range sortedResources(req) {
		have = append(have, fmt.Sprintf("%d bytes of %s", mm.sum(free, r, freeOf), r))
	}
	return why + fmt.Sprintf("; the nodes free to form a group, {%s}, have %s free", free, strings.Join(have, " and "))
}

func sortedResources(req map[memoryResource]uint64) []memoryResource {
	out := make([]memoryResource, 0, len(req))
	for r := range req {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// plan splits req over the group's nodes, filling them in node order with
// what is free; reclaim accounts the result.
func (mm *memoryManager) plan(group numaMask, req map[memoryResource]uint64) []NodeMemory {
	return mm.planOn(group.nodes(), req)
}

func (mm *memoryManager) planOn(nodes []int, req map[memoryResource]uint64) []NodeMemory {
	var held []NodeMemory
	for _, r := range sortedResources(req) {
		left := req[r]
		for _, id := range nodes {
			got := min(left, mm.nodes[id].free[r])
			if got == 0 {
				continue
			}
			left -= got
			held = append(held, NodeMemory{Node: id, PageSize: uint64(r), Bytes: got})
		}
	}
	return held
}

// fits reports whether the group's free memory holds req.
func (mm *memoryManager) fits(group numaMask, req map[memoryResource]uint64) bool {
	for r, size := range req {
		if mm.sum(group, r, freeOf) < size {
			return false
		}
	}
	return true
}

// give back what reclaim accounted; group is the holder's group.
func (mm *memoryManager) give(group numaMask, held []NodeMemory) {
	for _, h := range held {
		mm.nodes[h.Node].free[memoryResource(h.PageSize)] += h.Bytes
	}
	for _, id := range group.nodes() {
		n := mm.nodes[id]
		n.assignments--
		if n.assignments == 0 {
			n.group = maskOf(id)
		}
	}
}

// takeFree and giveFree account memory held outside any group (CPU-less nodes).
func (mm *memoryManager) takeFree(held []NodeMemory) {
	for _, h := range held {
		mm.nodes[h.Node].free[memoryResource(h.PageSize)] -= h.Bytes
	}
}

func (mm *memoryManager) giveFree(held []NodeMemory) {
	for _, h := range held {
		mm.nodes[h.Node].free[memoryResource(h.PageSize)] += h.Bytes
	}
}

// checkHeld reports why memory a container held before a restart cannot be
// accounted again as it was: nodes outside its group, a group overlapping
// another, or not enough free.
func (mm *memoryManager) checkHeld(group numaMask, held []NodeMemory) error {
	if !mm.canGroup(group) {
		return fmt.Errorf("NUMA nodes {%s} overlap another memory group", group)
	}
	need := map[NodeMemory]uint64{}
	for _, h := range held {
		if mm.nodes[h.Node] == nil || !group.has(h.Node) {
			return fmt.Errorf("memory held on NUMA node %d, outside the group {%s}", h.Node, group)
		}
		need[NodeMemory{Node: h.Node, PageSize: h.PageSize}] += h.Bytes
	}
	for k, bytes := range need {
		if free := mm.nodes[k.Node].free[memoryResource(k.PageSize)]; free < bytes {
			return fmt.Errorf("%s: %d bytes held on NUMA node %d, %d free", memoryResource(k.PageSize), bytes, k.Node, free)
		}
	}
	return nil
}

// reclaim accounts exactly what a container or a pod holds (planned by plan,
// or restored and checked by checkHeld), as one more holder of the group.
func (mm *memoryManager) reclaim(group numaMask, held []NodeMemory) {
	for v := uint64(group); v != 0; v &= v - 1 {
		n := mm.nodes[bits.TrailingZeros64(v)]
		n.assignments++
		n.group = group
	}
	for _, h := range held {
		mm.nodes[h.Node].free[memoryResource(h.PageSize)] -= h.Bytes
	}
}

// total sums held memory by resource.
func total(held []NodeMemory) map[memoryResource]uint64 {
	out := map[memoryResource]uint64{}
	for _, h := range held {
		out[memoryResource(h.PageSize)] += h.Bytes
	}
	return out
}

// sortHeld orders held memory by node then page size, for stable snapshots.
func sortHeld(held []NodeMemory) {
	slices.SortFunc(held, func(a, b NodeMemory) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.PageSize, b.PageSize))
	})
}
