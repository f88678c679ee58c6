package policy

// Choosing CPUs, as the kubelet's static CPU manager policy chooses them
// (pkg/kubelet/cm/cpumanager/cpu_assignment.go): the same steps in the same
// order with the same tie-breaks, so that the same free CPUs and request give
// the same answer. Free CPUs are counted per core, NUMA node, socket and
// uncore cache in arrays that are updated as CPUs are taken, instead of the
// kubelet's maps that are rebuilt on every query.

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// group is a set of CPUs sharing a core, NUMA node, socket or uncore cache.
// id is the kubelet's id for it, the tie-break when two groups have as many
// free CPUs.
type group struct {
	id   int
	cpus cpuset.CPUSet
}

// Levels of the CPU hierarchy, indexes into machine.groups and the counts.
const (
	levelCore = iota
	levelNode
	levelSocket
	levelUncore
	numLevels
)

// noUncoreBase offsets the uncore id of CPUs with no known L3 cache: the
// kubelet falls back to the socket id, which must not collide with L3 ids.
const noUncoreBase = 1 << 20

// machine is the CPU side of a topology, indexed for the allocator.
type machine struct {
	all    cpuset.CPUSet
	groups [numLevels][]group // each by ascending id
	// of[level][cpu] is the index in groups[level] of the cpu's group.
	of [numLevels][]int
	// children[parent][child][i] lists, ascending, the child groups with CPUs
	// in parent group i (e.g. the cores of socket i).
	children [numLevels][numLevels][][]int
	// The kubelet's per-group sizes are machine averages.
	cpusPerCore, cpusPerSocket, cpusPerUncore int
	// numaFirst: NUMA nodes hold whole sockets (NumSockets >= NumNUMANodes),
	// so nodes are taken before sockets and sorted first.
	numaFirst bool
}

func newMachine(t *topology.Topology) *machine {
	m := &machine{all: t.CPUs()}
	maxID := 0
	for _, c := range t.CPUList() {
		maxID = max(maxID, c.ID)
	}
	for level := range m.of {
		m.of[level] = make([]int, maxID+1)
	}
	// The kubelet's core id is the lowest CPU id of the core.
	for _, core := range t.Cores() {
		m.groups[levelCore] = append(m.groups[levelCore], group{id: core.CPUs.Min(), cpus: core.CPUs})
	}
	for _, node := range t.Nodes() {
		if cpus := t.CPUsOfNode(node); !cpus.IsEmpty() {
			m.groups[levelNode] = append(m.groups[levelNode], group{id: node, cpus: cpus})
		}
	}
	for _, socket := range t.Sockets() {
		m.groups[levelSocket] = append(m.groups[levelSocket], group{id: socket, cpus: t.CPUsOfSocket(socket)})
	}
	uncores := map[int]cpuset.CPUSet{}
	for _, c := range t.CPUList() {
		id := c.L3
		if id == topology.NoCache {
			id = noUncoreBase + c.Socket
		}
		uncores[id] = uncores[id].Union(cpuset.New(c.ID))
	}
	for id, cpus := range uncores {
		m.groups[levelUncore] = append(m.groups[levelUncore], group{id: id, cpus: cpus})
	}
	for level := range m.groups {
		slices.SortFunc(m.groups[level], func(a, b group) int { return cmp.Compare(a.id, b.id) })
		for i, g := range m.groups[level] {
			for _, cpu := range g.cpus.List() {
				m.of[level][cpu] = i
			}
		}
	}
	for parent := range numLevels {
		for child := range numLevels {
			m.children[parent][child] = make([][]int, len(m.groups[parent]))
			for ci, g := range m.groups[child] {
				seen := map[int]bool{}
				for _, cpu := range g.cpus.List() {
					pi := m.of[parent][cpu]
					if !seen[pi] {
						seen[pi] = true
						m.children[parent][child][pi] = append(m.children[parent][child][pi], ci)
					}
				}
			}
		}
	}
	numCPUs := m.all.Size()
	m.cpusPerCore = numCPUs / len(m.groups[levelCore])
	m.cpusPerSocket = numCPUs / len(m.groups[levelSocket])
	m.cpusPerUncore = numCPUs / len(m.groups[levelUncore])
	m.numaFirst = len(m.groups[levelSocket]) >= len(m.groups[levelNode])
	return m
}

// errNotEnoughCPUs is what the kubelet says when the free CPUs are too few.
func errNotEnoughCPUs(requested, available int) error {
	return fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", requested, available)
}

// accumulator collects CPUs for one request from a set of free CPUs.
type accumulator struct {
	m      *machine
	free   cpuset.CPUSet
	count  [numLevels][]int // free CPUs per group
	needed int
	result cpuset.CPUSet
	spread bool // spread-across-cores: threads sorted by socket, not packed by core
}

func newAccumulator(m *machine, free cpuset.CPUSet, needed int, spread bool) *accumulator {
	a := &accumulator{m: m, free: free.Intersection(m.all), needed: needed, spread: spread}
	for level := range a.count {
		a.count[level] = make([]int, len(m.groups[level]))
	}
	for _, cpu := range a.free.List() {
		for level := range a.count {
			a.count[level][m.of[level][cpu]]++
		}
	}
	return a
}

func (a *accumulator) take(cpus cpuset.CPUSet) {
	for _, cpu := range cpus.Intersection(a.free).List() {
		for level := range a.count {
			a.count[level][a.m.of[level][cpu]]--
		}
	}
	a.result = a.result.Union(cpus)
	a.free = a.free.Difference(a.result)
	a.needed -= cpus.Size()
}

func (a *accumulator) satisfied() bool         { return a.needed < 1 }
func (a *accumulator) failed() bool            { return a.needed > a.free.Size() }
func (a *accumulator) needsAtLeast(n int) bool { return a.needed >= n }

// isFree reports whether every CPU of group i of the level is free; sockets,
// cores and uncore caches compare with the machine's average size, as the
// kubelet does.
func (a *accumulator) isFree(level, i int) bool {
	size := a.m.groups[level][i].cpus.Size()
	switch level {
	case levelSocket:
		size = a.m.cpusPerSocket
	case levelCore:
		size = a.m.cpusPerCore
	}
	return a.count[level][i] == size
}

// sortByFree orders group indexes by ascending free CPUs, then id, keeping
// only groups with free CPUs.
func (a *accumulator) sortByFree(level int, idx []int) []int {
	out := make([]int, 0, len(idx))
	for _, i := range idx {
		if a.count[level][i] > 0 {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(x, y int) int {
		return cmp.Or(cmp.Compare(a.count[level][x], a.count[level][y]),
			cmp.Compare(a.m.groups[level][x].id, a.m.groups[level][y].id))
	})
	return out
}

// within lists, for each parent in order, its children with free CPUs in
// that parent, sorted by free CPUs; a child under several parents is listed
// once, under the first.
func (a *accumulator) within(parentLevel int, parents []int, childLevel int) []int {
	var out []int
	seen := make([]bool, len(a.m.groups[childLevel]))
	for _, p := range parents {
		var here []int
		for _, c := range a.m.children[parentLevel][childLevel][p] {
			if !seen[c] && a.freeWithin(childLevel, c, parentLevel, p) {
				seen[c] = true
				here = append(here, c)
			}
		}
		out = append(out, a.sortByFree(childLevel, here)...)
	}
	return out
}

// freeWithin reports whether group c of childLevel has free CPUs inside
// group p of parentLevel. Cores lie within every other group, so their count
// answers without set algebra.
func (a *accumulator) freeWithin(childLevel, c, parentLevel, p int) bool {
	if childLevel == levelCore {
		return a.count[levelCore][c] > 0
	}
	g := a.m.groups[childLevel][c].cpus.Intersection(a.free)
	return !g.Intersection(a.m.groups[parentLevel][p].cpus).IsEmpty()
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// sortNodes: the NUMA nodes with free CPUs, fewest free first; when sockets
// hold several nodes, grouped by socket in socket order.
func (a *accumulator) sortNodes() []int {
	if a.m.numaFirst {
		return a.sortByFree(levelNode, allIndexes(len(a.m.groups[levelNode])))
	}
	return a.within(levelSocket, a.sortSockets(), levelNode)
}

// sortSockets: the mirror image of sortNodes.
func (a *accumulator) sortSockets() []int {
	if a.m.numaFirst {
		return a.within(levelNode, a.sortNodes(), levelSocket)
	}
	return a.sortByFree(levelSocket, allIndexes(len(a.m.groups[levelSocket])))
}

// sortCores: the cores with free CPUs, fewest free first, grouped by the
// lower of socket and node in that one's order.
func (a *accumulator) sortCores() []int {
	if a.m.numaFirst {
		return a.within(levelSocket, a.sortSockets(), levelCore)
	}
	return a.within(levelNode, a.sortNodes(), levelCore)
}

// sortUncores: the uncore caches with free CPUs, node by node. Unlike the
// other lists, a cache spanning several nodes is listed under each, as the
// kubelet lists it.
func (a *accumulator) sortUncores() []int {
	var out []int
	for _, n := range a.sortNodes() {
		var here []int
		for _, u := range a.m.children[levelNode][levelUncore][n] {
			if a.freeWithin(levelUncore, u, levelNode, n) {
				here = append(here, u)
			}
		}
		out = append(out, a.sortByFree(levelUncore, here)...)
	}
	return out
}

// sortCPUs: the free CPUs in the order single threads are taken: core by
// core (packed), or socket by socket in id order (spread).
func (a *accumulator) sortCPUs() []int {
	var out []int
	if a.spread {
		for _, s := range a.sortSockets() {
			out = append(out, a.m.groups[levelSocket][s].cpus.Intersection(a.free).List()...)
		}
		return out
	}
	for _, c := range a.sortCores() {
		out = append(out, a.m.groups[levelCore][c].cpus.Intersection(a.free).List()...)
	}
	return out
}

// takeFull takes, in order, every entirely free group of the level that the
// request still fills.
func (a *accumulator) takeFull(level int, order []int) {
	var free []int
	seen := make([]bool, len(a.m.groups[level]))
	for _, i := range order {
		if !seen[i] && a.isFree(level, i) {
			seen[i] = true
			free = append(free, i)
		}
	}
	for _, i := range free {
		cpus := a.m.groups[level][i].cpus
		if a.needsAtLeast(cpus.Size()) {
			a.take(cpus)
		}
	}
}

func (a *accumulator) takeFullNodes()   { a.takeFull(levelNode, a.sortNodes()) }
func (a *accumulator) takeFullSockets() { a.takeFull(levelSocket, a.sortSockets()) }
func (a *accumulator) takeFullUncore()  { a.takeFull(levelUncore, a.sortUncores()) }
func (a *accumulator) takeFullCores()   { a.takeFull(levelCore, a.sortCores()) }

// takePartialUncore takes the rest of the request from one uncore cache if
// its lowest-id cores with free CPUs hold exactly what is needed (an odd
// request on SMT leaves out the last thread of the last core).
func (a *accumulator) takePartialUncore(u int) {
	coresNeeded := (a.needed + a.m.cpusPerCore - 1) / a.m.cpusPerCore
	var cores []int
	for _, cpu := range a.m.groups[levelUncore][u].cpus.Intersection(a.free).List() {
		cores = append(cores, a.m.of[levelCore][cpu])
	}
	slices.SortFunc(cores, func(x, y int) int { return cmp.Compare(a.m.groups[levelCore][x].id, a.m.groups[levelCore][y].id) })
	cores = slices.Compact(cores)
	if len(cores) > coresNeeded {
		cores = cores[:coresNeeded]
	}
	var cpus cpuset.CPUSet
	for _, c := range cores {
		cpus = cpus.Union(a.m.groups[levelCore][c].cpus.Intersection(a.free))
	}
	if a.needed%2 != 0 && a.m.cpusPerCore > 1 {
		if list := cpus.List(); len(list) > a.needed {
			cpus = cpuset.New(list[:len(list)-1]...)
		}
	}
	if a.needed == cpus.Size() {
		a.take(cpus)
	}
}

// takeUncoreCache takes whole uncore caches while the request fills them,
// then tries to fit the rest into a single one.
func (a *accumulator) takeUncoreCache() {
	for _, u := range a.sortUncores() {
		if a.needsAtLeast(a.m.cpusPerUncore) {
			a.takeFullUncore()
		}
		if a.satisfied() {
			return
		}
		a.takePartialUncore(u)
		if a.satisfied() {
			return
		}
	}
}

func (a *accumulator) takeRemainingCPUs() {
	for _, cpu := range a.sortCPUs() {
		a.take(cpuset.New(cpu))
		if a.satisfied() {
			return
		}
	}
}

// assignOptions are the static policy options that change how CPUs are chosen.
type assignOptions struct {
	spread        bool // spread-across-cores
	alignUncore   bool // align-by-uncore-cache
	distribute    bool // distribute-across-numa
	fullPCPUsOnly bool
}

// takeByTopology chooses n CPUs from free, as the kubelet's
// staticPolicy.takeByTopology.
func (m *machine) takeByTopology(free cpuset.CPUSet, n int, opts assignOptions) (cpuset.CPUSet, error) {
	if opts.distribute {
		groupSize := 1
		if opts.fullPCPUsOnly {
			groupSize = m.cpusPerCore
		}
		return m.takeDistributed(free, n, groupSize, opts.spread)
	}
	return m.takePacked(free, n, opts.spread, opts.alignUncore)
}

// takePacked is the kubelet's takeByTopologyNUMAPacked: whole sockets and
// NUMA nodes (the larger first), then whole uncore caches (if asked), then
// whole cores (unless spreading), then single threads, each time from the
// groups with the fewest free CPUs first.
func (m *machine) takePacked(free cpuset.CPUSet, n int, spread, alignUncore bool) (cpuset.CPUSet, error) {
	a := newAccumulator(m, free, n, spread)
	if a.satisfied() {
		return a.result, nil
	}
	if a.failed() {
		return cpuset.CPUSet{}, errNotEnoughCPUs(n, a.free.Size())
	}
	steps := []func(){a.takeFullSockets, a.takeFullNodes}
	if m.numaFirst {
		steps = []func(){a.takeFullNodes, a.takeFullSockets}
	}
	if alignUncore {
		steps = append(steps, a.takeUncoreCache)
	}
	if !spread {
		steps = append(steps, a.takeFullCores)
	}
	steps = append(steps, a.takeRemainingCPUs)
	for _, step := range steps {
		step()
		if a.satisfied() {
			return a.result, nil
		}
	}
	return cpuset.CPUSet{}, fmt.Errorf("failed to allocate cpus")
}

// takeDistributed is the kubelet's takeByTopologyNUMADistributed (KEP-2902):
// spread the request evenly, in groups of groupSize CPUs, over the fewest
// NUMA nodes that can hold it, choosing among equally many nodes the set that
// leaves the free CPUs most balanced; pack within each node.
func (m *machine) takeDistributed(free cpuset.CPUSet, n, groupSize int, spread bool) (cpuset.CPUSet, error) {
	if n%groupSize != 0 {
		return m.takePacked(free, n, spread, false)
	}
	a := newAccumulator(m, free, n, spread)
	if a.satisfied() {
		return a.result, nil
	}
	if a.failed() {
		return cpuset.CPUSet{}, errNotEnoughCPUs(n, a.free.Size())
	}
	numas := a.sortNodes()
	freeIn := func(node int) int { return a.count[levelNode][node] }
	minNUMAs, maxNUMAs := a.rangeNodesNeeded(groupSize, len(numas))
	for k := minNUMAs; k <= maxNUMAs; k++ {
		best := m.bestDistribution(numas, freeIn, k, n, groupSize)
		if best.combo == nil {
			continue
		}
		distribution := (n / len(best.combo) / groupSize) * groupSize
		for _, node := range best.combo {
			distribution = min(distribution, freeIn(node)/groupSize*groupSize)
		}
		for _, node := range best.combo {
			cpus, _ := m.takePacked(m.groups[levelNode][node].cpus.Intersection(a.free), distribution, spread, false)
			a.take(cpus)
		}
		for remainder := n - distribution*len(best.combo); remainder > 0; {
			progress := false
			for _, node := range best.remainder {
				if remainder == 0 {
					break
				}
				if freeIn(node) < groupSize {
					continue
				}
				cpus, _ := m.takePacked(m.groups[levelNode][node].cpus.Intersection(a.free), groupSize, spread, false)
				a.take(cpus)
				remainder -= groupSize
				progress = true
			}
			if !progress { // the kubelet would loop forever here
				return cpuset.CPUSet{}, fmt.Errorf("cannot distribute %d remaining CPUs in groups of %d", remainder, groupSize)
			}
		}
		if a.needed != 0 {
			return cpuset.CPUSet{}, fmt.Errorf("accounting error, remaining: %d", a.needed)
		}
		return a.result, nil
	}
	return m.takePacked(free, n, spread, false)
}

// rangeNodesNeeded is the least and most NUMA nodes the request can span.
func (a *accumulator) rangeNodesNeeded(groupSize, nodesAvailable int) (lo, hi int) {
	numNodes := len(a.m.groups[levelNode])
	numGroups := (a.m.all.Size()-1)/groupSize + 1
	groupsPerNode := (numGroups-1)/numNodes + 1
	groupsNeeded := (a.needed-1)/groupSize + 1
	return (groupsNeeded-1)/groupsPerNode + 1, min(groupsNeeded, nodesAvailable)
}

type distribution struct {
	combo, remainder []int
}

// bestDistribution picks, among the k-combinations of numas that can hold n
// CPUs evenly in groups, the one leaving the most balanced free CPUs (lowest
// standard deviation), and the subset of it that takes the remainder.
func (m *machine) bestDistribution(numas []int, freeIn func(int) int, k, n, groupSize int) distribution {
	bestBalance := math.MaxFloat64
	var best distribution
	iterateCombinations(numas, k, func(combo []int) bool {
		if bestBalance == 0 {
			return false
		}
		total, groups := 0, 0
		for _, node := range combo {
			total += freeIn(node)
			groups += freeIn(node) / groupSize
		}
		if total < n || groups*groupSize < n {
			return true
		}
		even := (n / len(combo) / groupSize) * groupSize
		for _, node := range combo {
			if freeIn(node) < even {
				return true
			}
		}
		after := make(map[int]int, len(numas))
		for _, node := range numas {
			after[node] = freeIn(node)
		}
		for _, node := range combo {
			after[node] -= even
		}
		remainder := n - even*len(combo)
		var candidates []int
		for _, node := range combo {
			if after[node] >= groupSize {
				candidates = append(candidates, node)
			}
		}
		localBalance := math.MaxFloat64
		var localRemainder []int
		if remainder == 0 {
			localBalance = standardDeviation(numas, after)
		}
		for size := len(candidates); remainder > 0 && size >= 1; size-- {
			iterateCombinations(candidates, size, func(subset []int) bool {
				left := remainder
				trial := make(map[int]int, len(after))
				sum := 0
				for node, v := range after {
					trial[node] = v
				}
				for _, node := range subset {
					sum += trial[node]
				}
				if sum < left {
					return true
				}
				for left > 0 {
					progress := false
					for _, node := range subset {
						if left == 0 {
							break
						}
						if trial[node] < groupSize {
							continue
						}
						trial[node] -= groupSize
						left -= groupSize
						progress = true
					}
					if !progress { // the kubelet would loop forever here
						return true
					}
				}
				if balance := standardDeviation(numas, trial); balance < localBalance {
					localBalance = balance
					localRemainder = subset
				}
				return true
			})
		}
		if localBalance < bestBalance {
			bestBalance = localBalance
			best = distribution{combo: combo, remainder: localRemainder}
		}
		return true
	})
	return best
}

// iterateCombinations calls f on every k-subset of n, in lexicographic order
// of positions, until f returns false. f gets a fresh slice each time.
func iterateCombinations(n []int, k int, f func([]int) bool) {
	if k < 1 {
		return
	}
	var walk func(start int, acc []int) bool
	walk = func(start int, acc []int) bool {
		if len(acc) == k {
			return f(slices.Clone(acc))
		}
		for i := start; i <= len(n)-(k-len(acc)); i++ {
			if !walk(i+1, append(acc, n[i])) {
				return false
			}
		}
		return true
	}
	walk(0, make([]int, 0, k))
}

// standardDeviation of the values of nodes, rounded to 3 decimals as the
// kubelet rounds it (so that ties are ties).
func standardDeviation(nodes []int, values map[int]int) float64 {
	var sum float64
	for _, node := range nodes {
		sum += float64(values[node])
	}
	mean := math.Round(sum/float64(len(nodes))*1000) / 1000
	var sq float64
	for _, node := range nodes {
		d := float64(values[node]) - mean
		sq += d * d
	}
	return math.Round(math.Sqrt(sq/float64(len(nodes)))*1000) / 1000
}
