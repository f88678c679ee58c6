package policy

// Which NUMA nodes a grant's CPUs come from when nothing narrower decides:
// under topology policy none, and within an admitted affinity of several
// nodes. A user picks this plugin for locality, so a grant goes, in order:
//
//  1. within one NUMA node, when one has room: the node where it gets whole
//     cores and breaks the fewest free cores, then the one it fills most
//     tightly (the fewest free CPUs, as the kubelet packs), then the lowest id;
//  2. else within one socket: the fewest of its nodes that have room,
//     closest by distance;
//  3. else the fewest nodes of the machine that have room, closest by
//     distance.
//
// It is a preference and never refuses: whatever fits somewhere is granted.
// Within the chosen nodes the CPUs are packed as the kubelet packs them
// (cpuassign.go). The option kubelet-packing (Config.KubeletPacking) makes
// the kubelet's own choice instead, over every free CPU, bit for bit.

import (
	"cmp"
	"slices"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// takeCPUs chooses n CPUs out of free. near are the NUMA nodes the grant
// already has CPUs on (what a resize keeps, the part taken on its
// affinity): the nodes closest to them are preferred.
func (p *Policy) takeCPUs(free cpuset.CPUSet, n int, near numaMask) (cpuset.CPUSet, error) {
	if !p.cfg.KubeletPacking && n > 0 {
		if nodes := p.preferredNodes(free, n, near); nodes != 0 {
			free = free.Intersection(p.cpusOf(nodes))
		}
	}
	return p.m.takeByTopology(free, n, p.opts)
}

// nodeSet is a candidate set of NUMA nodes for a grant.
type nodeSet struct {
	mask     numaMask
	count    int     // nodes in the set
	distance float64 // mean distance between the set's nodes and the grant's other nodes
	free     int     // free CPUs in the set: fewer is a tighter fit
}

// better orders candidates: fewer nodes, closer, tighter, lower ids.
func (s nodeSet) better(o nodeSet) bool {
	if c := cmp.Or(cmp.Compare(s.count, o.count), cmp.Compare(s.distance, o.distance), cmp.Compare(s.free, o.free)); c != 0 {
		return c < 0
	}
	return s.mask < o.mask
}

// preferredNodes returns the NUMA nodes whose free CPUs a grant of n is
// packed on, or 0 when free cannot hold n anywhere.
func (p *Policy) preferredNodes(free cpuset.CPUSet, n int, near numaMask) numaMask {
	counts := p.perNode(free)
	if near == 0 {
		if node, ok := p.bestSingleNode(free, counts, n); ok {
			return node
		}
	}
	var best nodeSet
	for s := range p.m.groups[levelSocket] {
		nodes := p.m.children[levelSocket][levelNode][s]
		if near&^p.nodeMask(nodes) != 0 {
			continue // the grant is on another socket already
		}
		if c, ok := p.fewestClosest(nodes, counts, n, near); ok && (best.mask == 0 || c.better(best)) {
			best = c
		}
	}
	if best.mask == 0 {
		best, _ = p.fewestClosest(allIndexes(len(counts)), counts, n, near)
	}
	return best.mask
}

// nodeMask is the mask of node groups given by index.
func (p *Policy) nodeMask(idx []int) numaMask {
	var m numaMask
	for _, i := range idx {
		m |= maskOf(p.m.groups[levelNode][i].id)
	}
	return m
}

// bestSingleNode is step 1: of the nodes with room, the one where the
// kubelet's packing gives whole cores and breaks the fewest free cores, then
// the tightest fit, then the lowest id.
func (p *Policy) bestSingleNode(free cpuset.CPUSet, counts []int, n int) (numaMask, bool) {
	type score struct{ shared, broken, free, id int }
	var best *score
	for i, g := range p.m.groups[levelNode] {
		if counts[i] < n {
			continue
		}
		local := free.Intersection(g.cpus)
		grant, err := p.m.takeByTopology(local, n, p.opts)
		if err != nil {
			continue
		}
		shared, broken := p.m.coreSplits(grant, local)
		s := score{shared, broken, counts[i], g.id}
		if best == nil || cmp.Or(cmp.Compare(s.shared, best.shared), cmp.Compare(s.broken, best.broken),
			cmp.Compare(s.free, best.free), cmp.Compare(s.id, best.id)) < 0 {
			best = &s
		}
	}
	if best == nil {
		return 0, false
	}
	return maskOf(best.id), true
}

// coreSplits counts the cores a grant takes only part of (it shares them
// with another container, or leaves a thread free) and, of those, the ones
// that were wholly free before: a later grant can no longer have them whole.
func (m *machine) coreSplits(grant, free cpuset.CPUSet) (shared, broken int) {
	var cores []int
	for _, cpu := range grant.List() {
		cores = append(cores, m.of[levelCore][cpu])
	}
	slices.Sort(cores)
	for _, c := range slices.Compact(cores) {
		cpus := m.groups[levelCore][c].cpus
		if cpus.IsSubsetOf(grant) {
			continue
		}
		shared++
		if cpus.IsSubsetOf(free) {
			broken++
		}
	}
	return shared, broken
}

// fewestClosest returns, among the node groups idx, a set of the fewest
// nodes whose free CPUs (counts, by group index) hold n, the closest by
// distance together with near. The fewest is exact: k, the size of the
// largest-first prefix that holds n. Closeness is searched from every seed
// node, adding the nodes closest to it while the set can still reach n with
// the nodes left, which is exact for pairs and close for larger sets at a
// cubic cost, where trying every set would be exponential in the nodes.
func (p *Policy) fewestClosest(idx []int, counts []int, n int, near numaMask) (nodeSet, bool) {
	byFree := slices.Clone(idx)
	slices.SortStableFunc(byFree, func(a, b int) int { return cmp.Compare(counts[b], counts[a]) })
	k, sum := 0, 0
	for _, i := range byFree {
		if sum >= n {
			break
		}
		sum += counts[i]
		k++
	}
	if sum < n {
		return nodeSet{}, false
	}
	// reach is what the largest slots free counts of byFree outside taken add up to.
	reach := func(taken []int, slots int) int {
		total := 0
		for _, i := range byFree {
			if slots == 0 {
				break
			}
			if !slices.Contains(taken, i) {
				total += counts[i]
				slots--
			}
		}
		return total
	}
	var best nodeSet
	for _, seed := range idx {
		if counts[seed] == 0 || counts[seed]+reach([]int{seed}, k-1) < n {
			continue
		}
		seedID := p.m.groups[levelNode][seed].id
		others := slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return i == seed })
		slices.SortStableFunc(others, func(a, b int) int {
			return cmp.Or(cmp.Compare(p.tm.distance(seedID, p.m.groups[levelNode][a].id), p.tm.distance(seedID, p.m.groups[levelNode][b].id)),
				cmp.Compare(counts[b], counts[a]))
		})
		// Each step finds a node: the largest one left always keeps n
		// within reach, as k is the fewest.
		set, total := []int{seed}, counts[seed]
		for added := true; len(set) < k && added; {
			added = false
			for _, c := range others {
				if !slices.Contains(set, c) && counts[c] > 0 && total+counts[c]+reach(append(slices.Clone(set), c), k-len(set)-1) >= n {
					set, total, added = append(set, c), total+counts[c], true
					break
				}
			}
		}
		mask := p.nodeMask(set)
		c := nodeSet{mask: mask, count: k, distance: p.tm.meanDistance(mask | near), free: total}
		if best.mask == 0 || c.better(best) {
			best = c
		}
	}
	return best, best.mask != 0
}
