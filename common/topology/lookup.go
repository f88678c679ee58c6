package topology

import (
	"cmp"
	"maps"
	"slices"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// CPUs returns every (online) CPU of the machine.
func (t *Topology) CPUs() cpuset.CPUSet { return t.all }

// CPUList returns the CPU records by ascending id.
func (t *Topology) CPUList() []CPU { return slices.Clone(t.cpus) }

// CPU returns the record of one CPU.
func (t *Topology) CPU(id int) (CPU, bool) {
	i, ok := t.byID[id]
	if !ok {
		return CPU{}, false
	}
	return t.cpus[i], true
}

// Isolated returns the CPUs the kernel isolates from the scheduler (isolcpus).
func (t *Topology) Isolated() cpuset.CPUSet { return t.isolated }

// Sockets returns the socket ids, ascending.
func (t *Topology) Sockets() []int { return slices.Sorted(maps.Keys(t.sockets)) }

// CPUsOfSocket returns the CPUs of a socket; empty for an unknown socket.
func (t *Topology) CPUsOfSocket(socket int) cpuset.CPUSet { return t.sockets[socket] }

// Dies returns the dies, by socket then die id.
func (t *Topology) Dies() []Die {
	return slices.SortedFunc(maps.Keys(t.dies), func(a, b Die) int {
		return cmp.Or(cmp.Compare(a.Socket, b.Socket), cmp.Compare(a.ID, b.ID))
	})
}

// CPUsOfDie returns the CPUs of a die; empty for an unknown die.
func (t *Topology) CPUsOfDie(d Die) cpuset.CPUSet { return t.dies[d] }

// Cores returns the physical cores, by socket, die, then core id.
func (t *Topology) Cores() []Core { return slices.Clone(t.cores) }

// CoreOf returns the core a CPU belongs to.
func (t *Topology) CoreOf(cpu int) (Core, bool) {
	i, ok := t.coreOf[cpu]
	if !ok {
		return Core{}, false
	}
	return t.cores[i], true
}

// Siblings returns the CPUs sharing the core of cpu, cpu included; empty for
// an unknown CPU.
func (t *Topology) Siblings(cpu int) cpuset.CPUSet {
	core, _ := t.CoreOf(cpu)
	return core.CPUs
}

// ThreadsPerCore returns the largest number of threads of any core.
func (t *Topology) ThreadsPerCore() int {
	n := 0
	for _, core := range t.cores {
		n = max(n, core.CPUs.Size())
	}
	return n
}

// L2Groups returns the groups of CPUs sharing an L2 cache, by cache id. CPUs
// with an unknown L2 cache are in none.
func (t *Topology) L2Groups() []CacheGroup { return slices.Clone(t.l2) }

// L3Groups returns the groups of CPUs sharing an L3 (last level, "uncore")
// cache, by cache id. CPUs with an unknown L3 cache are in none.
func (t *Topology) L3Groups() []CacheGroup { return slices.Clone(t.l3) }

// CPUsOfCache returns the CPUs sharing the cache of the given level (2 or 3)
// and id; empty when there is no such cache.
func (t *Topology) CPUsOfCache(level, id int) cpuset.CPUSet {
	groups := t.l3
	if level == 2 {
		groups = t.l2
	} else if level != 3 {
		return cpuset.CPUSet{}
	}
	i, found := slices.BinarySearchFunc(groups, id, func(g CacheGroup, id int) int { return cmp.Compare(g.ID, id) })
	if !found {
		return cpuset.CPUSet{}
	}
	return groups[i].CPUs
}

// Nodes returns every NUMA node id, CPU-less ones included, ascending.
func (t *Topology) Nodes() []int {
	ids := make([]int, len(t.nodes))
	for i, n := range t.nodes {
		ids[i] = n.ID
	}
	return ids
}

// NodeList returns the node records by ascending id.
func (t *Topology) NodeList() []Node {
	nodes := slices.Clone(t.nodes)
	for i := range nodes {
		nodes[i].Distances = maps.Clone(nodes[i].Distances)
		nodes[i].HugePages = slices.Clone(nodes[i].HugePages)
	}
	return nodes
}

// Node returns the record of one NUMA node.
func (t *Topology) Node(id int) (Node, bool) {
	i, ok := t.nodeIdx[id]
	if !ok {
		return Node{}, false
	}
	n := t.nodes[i]
	n.Distances = maps.Clone(n.Distances)
	n.HugePages = slices.Clone(n.HugePages)
	return n, true
}

// CPULessNodes returns the ids of the nodes that have memory but no CPU
// (HBM, PMEM, CXL memory), ascending.
func (t *Topology) CPULessNodes() []int {
	var ids []int
	for _, n := range t.nodes {
		if t.nodeCPUs[n.ID].IsEmpty() {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// CPUsOfNode returns the CPUs of a node; empty for a CPU-less or unknown node.
func (t *Topology) CPUsOfNode(node int) cpuset.CPUSet { return t.nodeCPUs[node] }

// NodeOfCPU returns the node of a CPU.
func (t *Topology) NodeOfCPU(cpu int) (int, bool) {
	c, ok := t.CPU(cpu)
	return c.Node, ok
}

// NodesOfCPUs returns the nodes of the given CPUs, ascending; unknown CPUs
// are ignored.
func (t *Topology) NodesOfCPUs(cpus cpuset.CPUSet) []int {
	var ids []int
	for _, n := range t.nodes {
		if !t.nodeCPUs[n.ID].Intersection(cpus).IsEmpty() {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// NodesOfSocket returns the nodes having CPUs on a socket, ascending.
func (t *Topology) NodesOfSocket(socket int) []int {
	return t.NodesOfCPUs(t.sockets[socket])
}

// Distance returns the distance from node a to node b, and false when either
// node is unknown.
func (t *Topology) Distance(a, b int) (int, bool) {
	i, ok := t.nodeIdx[a]
	if !ok {
		return 0, false
	}
	d, ok := t.nodes[i].Distances[b]
	return d, ok
}

// NodesByDistance returns every node ordered by its distance from node from,
// nearest first, ties broken by node id; from itself comes first as it is
// the nearest on real machines. It returns nil for an unknown node.
func (t *Topology) NodesByDistance(from int) []int {
	i, ok := t.nodeIdx[from]
	if !ok {
		return nil
	}
	dist := t.nodes[i].Distances
	ids := t.Nodes()
	slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(dist[a], dist[b]) })
	return ids
}
