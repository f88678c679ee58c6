package policy

// The Topology Manager (pkg/kubelet/cm/topologymanager): every resource
// (CPUs, memory, devices, and under the pod scope the pod's affinity) offers
// NUMA affinity hints; the policy merges them into one affinity and admits or
// refuses the container.
//
// The kubelet merges by trying every permutation of one hint per resource,
// which on an 8-node machine is 255^resources merges. The comparison it
// applies is a total order, so the same winner is found directly: a merged
// hint is preferred only when every resource prefers the very same mask, so
// the preferred candidates are the intersection of the preferred masks; only
// when there is none are the non-preferred merges (bitwise ANDs) enumerated.

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// numaMask is a set of NUMA node ids, bit i for node i (ids below 64); 0
// stands for "any node" (the kubelet's nil affinity).
type numaMask uint64

func maskOf(nodes ...int) numaMask {
	var m numaMask
	for _, n := range nodes {
		m |= 1 << uint(n)
	}
	return m
}

func (m numaMask) count() int { return bits.OnesCount64(uint64(m)) }

func (m numaMask) has(node int) bool { return m&(1<<uint(node)) != 0 }

func (m numaMask) nodes() []int {
	var out []int
	for v := uint64(m); v != 0; v &= v - 1 {
		out = append(out, bits.TrailingZeros64(v))
	}
	return out
}

func (m numaMask) String() string {
	var b strings.Builder
	for i, n := range m.nodes() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, n)
	}
	return b.String()
}

// hint is one NUMA affinity a resource can live with.
type hint struct {
	mask      numaMask
	preferred bool
}

// provider is the hints of one resource. No hints at all means the resource
// cannot be placed anywhere (the kubelet's empty list).
type provider struct {
	resource string
	hints    []hint
	why      string // why there are no hints, if the resource can tell
}

// topologyManager merges hints under a policy.
type topologyManager struct {
	policy        TopologyPolicy
	preferClosest bool
	nodes         []int    // the NUMA nodes hints range over: those with CPUs
	all           numaMask // all of them
	distance      func(a, b int) int
	// alignBySocket (the kubelet's align-by-socket) also prefers CPU hints
	// spanning as few sockets as the request needs.
	alignBySocket  bool
	nodesPerSocket int
	socketsOf      func(numaMask) int
}

// subsets calls f with every non-empty subset of the manager's nodes.
func (tm *topologyManager) subsets(f func(numaMask)) {
	for bitsOfIdx := uint64(1); bitsOfIdx < 1<<uint(len(tm.nodes)); bitsOfIdx++ {
		var m numaMask
		for v := bitsOfIdx; v != 0; v &= v - 1 {
			m |= maskOf(tm.nodes[bits.TrailingZeros64(v)])
		}
		f(m)
	}
}

// merge returns the affinity for the providers' hints and whether the policy
// admits it. A zero mask means any node.
func (tm *topologyManager) merge(providers []provider) (hint, bool) {
	if tm.policy == TopologyNone || tm.policy == "" {
		return hint{}, true
	}
	lists := make([][]hint, len(providers))
	for i, p := range providers {
		lists[i] = p.hints
		if len(lists[i]) == 0 {
			lists[i] = []hint{{mask: 0, preferred: false}}
		}
		if tm.policy == TopologySingleNUMANode {
			lists[i] = singleNodeHints(lists[i])
		}
	}
	best, found := tm.bestPreferred(lists)
	if !found {
		best, found = tm.bestNonPreferred(lists)
	}
	if !found {
		best = hint{mask: tm.all}
	}
	if tm.policy == TopologySingleNUMANode && best.mask == tm.all {
		best.mask = 0
	}
	admit := tm.policy == TopologyBestEffort || best.preferred
	return best, admit
}

// singleNodeHints keeps the preferred hints of one node or of any node.
func singleNodeHints(hints []hint) []hint {
	var out []hint
	for _, h := range hints {
		if h.preferred && h.mask.count() <= 1 {
			out = append(out, h)
		}
	}
	return out
}

// bestPreferred: the fittest mask that every resource prefers. A resource
// preferring "any node" agrees with every mask; when all do, the merge is
// every node.
func (tm *topologyManager) bestPreferred(lists [][]hint) (hint, bool) {
	var candidates map[numaMask]bool // nil: not constrained yet
	for _, list := range lists {
		preferred := map[numaMask]bool{}
		anyNode := false
		for _, h := range list {
			if h.preferred && h.mask == 0 {
				anyNode = true
			} else if h.preferred {
				preferred[h.mask] = true
			}
		}
		if anyNode {
			continue
		}
		if candidates == nil {
			candidates = preferred
			continue
		}
		for m := range candidates {
			if !preferred[m] {
				delete(candidates, m)
			}
		}
	}
	if candidates == nil {
		return hint{mask: tm.all, preferred: true}, true
	}
	var best numaMask
	for m := range candidates {
		if best == 0 || tm.fitter(m, best) {
			best = m
		}
	}
	return hint{mask: best, preferred: true}, best != 0
}

// bestNonPreferred ranks every non-empty AND of one hint per resource as the
// kubelet's HintMerger.compare does: first the masks as wide as the widest
// of the resources' narrowest hints, then the narrower ones (widest first),
// then the wider ones (narrowest first); ties go to the fitter mask.
func (tm *topologyManager) bestNonPreferred(lists [][]hint) (hint, bool) {
	target := 0
	for _, list := range lists {
		narrowest := 0
		for _, h := range list {
			if h.mask != 0 && (narrowest == 0 || h.mask.count() < narrowest) {
				narrowest = h.mask.count()
			}
		}
		target = max(target, narrowest)
	}
	reach := map[numaMask]bool{tm.all: true}
	for _, list := range lists {
		next := map[numaMask]bool{}
		for m := range reach {
			for _, h := range list {
				if h.mask == 0 {
					next[m] = true
				} else if and := m & h.mask; and != 0 {
					next[and] = true
				}
			}
		}
		reach = next
	}
	tier := func(m numaMask) int {
		switch c := m.count(); {
		case c == target:
			return 0
		case c < target:
			return 1
		default:
			return 2
		}
	}
	var best numaMask
	for m := range reach {
		switch {
		case best == 0:
			best = m
		case tier(m) != tier(best):
			if tier(m) < tier(best) {
				best = m
			}
		case tier(m) == 1 && m.count() != best.count():
			if m.count() > best.count() {
				best = m
			}
		case tm.fitter(m, best):
			best = m
		}
	}
	return hint{mask: best}, best != 0
}

// fitter reports whether mask a beats mask b: fewer nodes, then (with
// prefer-closest-numa-nodes, except under single-numa-node) the shorter mean
// distance between them, then the lower node ids.
func (tm *topologyManager) fitter(a, b numaMask) bool {
	if a.count() != b.count() {
		return a.count() < b.count()
	}
	if tm.preferClosest && tm.policy != TopologySingleNUMANode {
		da, db := tm.meanDistance(a), tm.meanDistance(b)
		if da != db {
			return da < db
		}
	}
	return a < b
}

func (tm *topologyManager) meanDistance(m numaMask) float64 {
	nodes := m.nodes()
	sum := 0
	for _, a := range nodes {
		for _, b := range nodes {
			sum += tm.distance(a, b)
		}
	}
	return float64(sum) / float64(len(nodes)*len(nodes))
}

// cpuHints are the kubelet's CPU manager hints: every set of nodes whose free
// CPUs (plus the container's own, which it must include) can hold n CPUs;
// preferred are the sets as small as the smallest set of nodes whose CPUs
// could hold n on an empty machine.
func (tm *topologyManager) cpuHints(m *machine, free, own []int, n int) provider {
	// free and own count CPUs per entry of m.groups[levelNode].
	minSize := len(tm.nodes)
	var out []hint
	var ownMask numaMask
	for i, c := range own {
		if c > 0 {
			ownMask |= maskOf(m.groups[levelNode][i].id)
		}
	}
	tm.subsets(func(mask numaMask) {
		total, avail := 0, 0
		for i, g := range m.groups[levelNode] {
			if mask.has(g.id) {
				total += g.cpus.Size()
				avail += free[i] + own[i]
			}
		}
		if total >= n && mask.count() < minSize {
			minSize = mask.count()
		}
		if mask&ownMask == ownMask && avail >= n {
			out = append(out, hint{mask: mask})
		}
	})
	for i := range out {
		out[i].preferred = out[i].mask.count() == minSize || tm.socketAligned(out[i].mask, minSize)
	}
	return provider{resource: "cpu", hints: out}
}

// socketAligned is the kubelet's isHintSocketAligned: with align-by-socket,
// a hint is preferred when its nodes span as few sockets as the fewest nodes
// that could hold the request need.
func (tm *topologyManager) socketAligned(mask numaMask, minSize int) bool {
	if !tm.alignBySocket || tm.nodesPerSocket == 0 {
		return false
	}
	minSockets := (minSize + tm.nodesPerSocket - 1) / tm.nodesPerSocket
	return tm.socketsOf(mask) == minSockets
}

// deviceHints: the nodes of the container's devices must all be in the
// affinity; exactly those nodes are preferred.
func (tm *topologyManager) deviceHints(devices numaMask) provider {
	var out []hint
	tm.subsets(func(mask numaMask) {
		if mask&devices == devices {
			out = append(out, hint{mask: mask, preferred: mask == devices})
		}
	})
	return provider{resource: "devices", hints: out}
}

// explain says, for a refusal, which resource's hints disagreed: a
// resource that fits nowhere acceptable (on no single node, under
// single-numa-node) on its own, else the resources whose preferred NUMA
// nodes have none in common; then where each resource would fit.
func (tm *topologyManager) explain(providers []provider) string {
	singleNode := tm.policy == TopologySingleNUMANode
	acceptable := func(p provider) []hint {
		if singleNode {
			return singleNodeHints(p.hints)
		}
		return p.hints
	}
	var cause []string
	for _, p := range providers {
		switch {
		case len(p.hints) == 0:
			cause = append(cause, p.resource+" fits on no set of NUMA nodes"+p.why)
		case len(acceptable(p)) == 0 && singleNode:
			cause = append(cause, p.resource+" fits on no single NUMA node")
		}
	}
	if len(cause) == 0 {
		cause = append(cause, tm.disagreement(providers, acceptable))
	}
	return strings.Join(cause, "; ") + " (" + describe(providers, acceptable) + ")"
}

// disagreement names the resources whose preferred hints share no NUMA
// nodes: every pair that does not agree, else all of them together.
func (tm *topologyManager) disagreement(providers []provider, acceptable func(provider) []hint) string {
	preferred := func(p provider) (masks []numaMask, anyNode bool) {
		for _, h := range acceptable(p) {
			if h.preferred && h.mask == 0 {
				return nil, true
			}
			if h.preferred {
				masks = append(masks, h.mask)
			}
		}
		return masks, false
	}
	var pairs []string
	for i := range providers {
		for j := i + 1; j < len(providers); j++ {
			a, anyA := preferred(providers[i])
			b, anyB := preferred(providers[j])
			if anyA || anyB || slices.ContainsFunc(a, func(m numaMask) bool { return slices.Contains(b, m) }) {
				continue
			}
			pairs = append(pairs, fmt.Sprintf("the hints of %s and %s disagree: no NUMA nodes that both prefer", providers[i].resource, providers[j].resource))
		}
	}
	if len(pairs) > 0 {
		return strings.Join(pairs, "; ")
	}
	var names []string
	for _, p := range providers {
		names = append(names, p.resource)
	}
	return "the hints of " + strings.Join(names, ", ") + " disagree: no NUMA nodes that all prefer"
}

// describe says where each resource would fit, among its acceptable hints.
func describe(providers []provider, acceptable func(provider) []hint) string {
	var parts []string
	for _, p := range providers {
		var where []string
		for _, h := range acceptable(p) {
			if h.preferred && h.mask != 0 && len(where) < 4 {
				where = append(where, "{"+h.mask.String()+"}")
			}
		}
		switch {
		case len(p.hints) == 0:
			parts = append(parts, p.resource+" fits nowhere")
		case len(where) == 0:
			parts = append(parts, p.resource+" has no preferred NUMA nodes")
		default:
			parts = append(parts, p.resource+" prefers NUMA nodes "+strings.Join(where, " or "))
		}
	}
	return strings.Join(parts, "; ")
}
