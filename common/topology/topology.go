// Package topology is the hardware model the placement policies work on:
// CPUs with their core, die, socket, NUMA node and L2/L3 cache, NUMA nodes with
// their memory, hugepages and distances (including CPU-less memory nodes such
// as HBM, PMEM or CXL), and the isolated CPUs.
//
// A Topology is built by New from plain CPU and Node records, which come from
// sysfs discovery (package sysfs) or from a YAML description of a synthetic
// machine (package description); both give the same model for the same
// machine. It is immutable once built, and every lookup returns its results
// in a deterministic order, so that policies built on it are deterministic.
package topology

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// NoCache is the cache id of a CPU whose cache at that level is unknown.
const NoCache = -1

// CPU is one logical CPU (a hardware thread).
type CPU struct {
	ID int
	// Core is the kernel's core_id, unique within a die of a socket.
	Core int
	// Die is the kernel's die_id, unique within a socket.
	Die int
	// Socket is the kernel's physical_package_id.
	Socket int
	// Node is the NUMA node the CPU belongs to.
	Node int
	// L2 and L3 are the ids of the CPU's caches at that level, or NoCache.
	L2, L3 int
}

// Node is a NUMA node. Its CPUs are those whose CPU.Node is its id; a node
// without CPUs is a memory-only node.
type Node struct {
	ID int
	// Distances holds the ACPI SLIT distance to every node, this one included.
	Distances map[int]int
	// MemTotal and MemFree are in bytes.
	MemTotal, MemFree uint64
	// HugePages lists the pools by ascending page size.
	HugePages []HugePages
}

// HugePages is a node's pool of huge pages of one size.
type HugePages struct {
	// Size of one page in bytes.
	Size uint64
	// Total and Free count pages.
	Total, Free uint64
}

// Core is a physical core: the CPUs (threads) sharing it.
type Core struct {
	Socket, Die, ID int
	CPUs            cpuset.CPUSet
}

// Die identifies a die within a socket.
type Die struct {
	Socket, ID int
}

// CacheGroup is the set of CPUs sharing one cache.
type CacheGroup struct {
	Level, ID int
	CPUs      cpuset.CPUSet
}

// ErrInvalid is wrapped by every error New returns for an inconsistent model.
var ErrInvalid = errors.New("invalid topology")

// Topology is an immutable model of a machine. Build it with New.
type Topology struct {
	cpus     []CPU // ascending id
	byID     map[int]int
	nodes    []Node // ascending id
	nodeIdx  map[int]int
	isolated cpuset.CPUSet

	all      cpuset.CPUSet
	nodeCPUs map[int]cpuset.CPUSet
	sockets  map[int]cpuset.CPUSet
	dies     map[Die]cpuset.CPUSet
	cores    []Core
	coreOf   map[int]int // cpu id -> index in cores
	l2, l3   []CacheGroup
}

// New builds a Topology from CPU and node records, in any order. It checks
// that CPU and node ids are unique and non-negative, that every CPU is on a
// known node, that every node has a distance to every node, and that the
// isolated CPUs exist. The errors name the offending item and wrap ErrInvalid.
func New(cpus []CPU, nodes []Node, isolated cpuset.CPUSet) (*Topology, error) {
	t := &Topology{
		cpus:     slices.Clone(cpus),
		byID:     make(map[int]int, len(cpus)),
		nodes:    make([]Node, len(nodes)),
		nodeIdx:  make(map[int]int, len(nodes)),
		isolated: isolated,
		nodeCPUs: map[int]cpuset.CPUSet{},
		sockets:  map[int]cpuset.CPUSet{},
		dies:     map[Die]cpuset.CPUSet{},
		coreOf:   make(map[int]int, len(cpus)),
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%w: no CPUs", ErrInvalid)
	}
	if err := t.addNodes(nodes); err != nil {
		return nil, err
	}
	if err := t.addCPUs(); err != nil {
		return nil, err
	}
	if extra := isolated.Difference(t.all); !extra.IsEmpty() {
		return nil, fmt.Errorf("%w: isolated CPUs %s are not CPUs of the machine", ErrInvalid, extra)
	}
	return t, nil
}

func (t *Topology) addNodes(nodes []Node) error {
	for i, n := range nodes {
		if n.ID < 0 {
			return fmt.Errorf("%w: node %d: negative id", ErrInvalid, n.ID)
		}
		if _, dup := t.nodeIdx[n.ID]; dup {
			return fmt.Errorf("%w: node %d: duplicate id", ErrInvalid, n.ID)
		}
		t.nodeIdx[n.ID] = i
		n.Distances = maps.Clone(n.Distances)
		n.HugePages = slices.Clone(n.HugePages)
		slices.SortFunc(n.HugePages, func(a, b HugePages) int { return cmp.Compare(a.Size, b.Size) })
		t.nodes[i] = n
	}
	if len(t.nodes) == 0 {
		return fmt.Errorf("%w: no NUMA nodes", ErrInvalid)
	}
	slices.SortFunc(t.nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	for i, n := range t.nodes {
		t.nodeIdx[n.ID] = i
	}
	for _, a := range t.nodes {
		for _, b := range t.nodes {
			if _, ok := a.Distances[b.ID]; !ok {
				return fmt.Errorf("%w: node %d: no distance to node %d", ErrInvalid, a.ID, b.ID)
			}
		}
		for to := range a.Distances {
			if _, ok := t.nodeIdx[to]; !ok {
				return fmt.Errorf("%w: node %d: distance to unknown node %d", ErrInvalid, a.ID, to)
			}
		}
	}
	return nil
}

func (t *Topology) addCPUs() error {
	slices.SortFunc(t.cpus, func(a, b CPU) int { return cmp.Compare(a.ID, b.ID) })
	l2 := map[int]cpuset.CPUSet{}
	l3 := map[int]cpuset.CPUSet{}
	type coreKey struct{ socket, die, id int }
	cores := map[coreKey]cpuset.CPUSet{}
	for i, c := range t.cpus {
		switch {
		case c.ID < 0 || c.ID > cpuset.MaxCPU:
			return fmt.Errorf("%w: cpu %d: id outside [0, %d]", ErrInvalid, c.ID, cpuset.MaxCPU)
		case i > 0 && t.cpus[i-1].ID == c.ID:
			return fmt.Errorf("%w: cpu %d: duplicate id", ErrInvalid, c.ID)
		case c.Core < 0 || c.Die < 0 || c.Socket < 0:
			return fmt.Errorf("%w: cpu %d: negative core, die or socket id", ErrInvalid, c.ID)
		case c.L2 < NoCache || c.L3 < NoCache:
			return fmt.Errorf("%w: cpu %d: cache id below %d", ErrInvalid, c.ID, NoCache)
		}
		if _, ok := t.nodeIdx[c.Node]; !ok {
			return fmt.Errorf("%w: cpu %d: unknown node %d", ErrInvalid, c.ID, c.Node)
		}
		t.byID[c.ID] = i
		one := cpuset.New(c.ID)
		t.all = t.all.Union(one)
		t.nodeCPUs[c.Node] = t.nodeCPUs[c.Node].Union(one)
		t.sockets[c.Socket] = t.sockets[c.Socket].Union(one)
		die := Die{Socket: c.Socket, ID: c.Die}
		t.dies[die] = t.dies[die].Union(one)
		key := coreKey{socket: c.Socket, die: c.Die, id: c.Core}
		cores[key] = cores[key].Union(one)
		if c.L2 != NoCache {
			l2[c.L2] = l2[c.L2].Union(one)
		}
		if c.L3 != NoCache {
			l3[c.L3] = l3[c.L3].Union(one)
		}
	}
	for key, cpus := range cores {
		t.cores = append(t.cores, Core{Socket: key.socket, Die: key.die, ID: key.id, CPUs: cpus})
	}
	slices.SortFunc(t.cores, compareCores)
	for i, core := range t.cores {
		for _, cpu := range core.CPUs.List() {
			t.coreOf[cpu] = i
		}
	}
	t.l2 = cacheGroups(2, l2)
	t.l3 = cacheGroups(3, l3)
	return nil
}

func compareCores(a, b Core) int {
	return cmp.Or(cmp.Compare(a.Socket, b.Socket), cmp.Compare(a.Die, b.Die), cmp.Compare(a.ID, b.ID))
}

func cacheGroups(level int, byID map[int]cpuset.CPUSet) []CacheGroup {
	groups := make([]CacheGroup, 0, len(byID))
	for id, cpus := range byID {
		groups = append(groups, CacheGroup{Level: level, ID: id, CPUs: cpus})
	}
	slices.SortFunc(groups, func(a, b CacheGroup) int { return cmp.Compare(a.ID, b.ID) })
	return groups
}
