package sysfs

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Option adjusts discovery.
type Option func(*reader)

// OnRead makes discovery call fn with the path, relative to the root and
// slash-separated, of every file it reads. The capture tool uses it to copy
// exactly the files discovery needs.
func OnRead(fn func(rel string)) Option {
	return func(r *reader) { r.onRead = fn }
}

// Discover reads the topology of the machine whose sysfs is at root.
func Discover(root string, opts ...Option) (*topology.Topology, error) {
	r := &reader{root: root}
	for _, opt := range opts {
		opt(r)
	}
	t, err := r.discover()
	if err != nil {
		return nil, fmt.Errorf("discover topology under %s: %w", root, err)
	}
	return t, nil
}

func (r *reader) discover() (*topology.Topology, error) {
	cpus, err := r.cpuSet(online)
	if err != nil {
		return nil, err
	}
	if cpus.IsEmpty() {
		return nil, r.invalid(online, "", "at least one online CPU")
	}
	isolatedCPUs := cpuset.CPUSet{}
	if content, found, err := r.readOptional(isolated); err != nil {
		return nil, err
	} else if found {
		if isolatedCPUs, err = r.parseCPUSet(isolated, content); err != nil {
			return nil, err
		}
	}
	nodes, nodeOf, err := r.nodes(cpus)
	if err != nil {
		return nil, err
	}
	records := make([]topology.CPU, 0, cpus.Size())
	var lists []sharingList
	for _, id := range cpus.List() {
		c, cpuLists, err := r.cpu(id, nodeOf[id])
		if err != nil {
			return nil, err
		}
		records = append(records, c)
		lists = append(lists, cpuLists...)
	}
	t, err := topology.New(records, nodes, isolatedCPUs.Intersection(cpus))
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		if want := l.modelled(t); !l.cpus.Intersection(cpus).Equal(want) {
			return nil, fmt.Errorf("parse %s: lists cpus %s, but the ids of the cpus make them %s", r.abs(l.rel), l.cpus, want)
		}
	}
	return t, nil
}

// sharingList is a file listing the CPUs that share a core or a cache with a
// CPU. The model derives these groups from the ids (core_id, cache id); the
// lists must agree with it, or the tree contradicts itself.
type sharingList struct {
	rel        string
	cpus       cpuset.CPUSet
	cpu        int
	cacheLevel int // 0 for the core's thread siblings
}

func (l sharingList) modelled(t *topology.Topology) cpuset.CPUSet {
	if l.cacheLevel == 0 {
		return t.Siblings(l.cpu)
	}
	c, _ := t.CPU(l.cpu)
	id := c.L2
	if l.cacheLevel == 3 {
		id = c.L3
	}
	return t.CPUsOfCache(l.cacheLevel, id)
}

// nodes reads every NUMA node and maps each online CPU to its node.
func (r *reader) nodes(cpus cpuset.CPUSet) ([]topology.Node, map[int]int, error) {
	dirs, _, err := r.numberedEntries(nodeDir, "node")
	if err != nil {
		return nil, nil, err
	}
	nodeOf := map[int]int{}
	if len(dirs) == 0 {
		for _, cpu := range cpus.List() {
			nodeOf[cpu] = 0
		}
		return []topology.Node{{ID: 0, Distances: map[int]int{0: 10}}}, nodeOf, nil
	}
	ids := slices.Sorted(maps.Keys(dirs))
	nodes := make([]topology.Node, 0, len(ids))
	for _, id := range ids {
		n, nodeCPUs, err := r.node(id, ids)
		if err != nil {
			return nil, nil, err
		}
		for _, cpu := range nodeCPUs.Intersection(cpus).List() {
			if other, dup := nodeOf[cpu]; dup {
				return nil, nil, fmt.Errorf("parse %s: cpu %d is also in node %d", r.abs(nodePath(id, "cpulist")), cpu, other)
			}
			nodeOf[cpu] = id
		}
		nodes = append(nodes, n)
	}
	for _, cpu := range cpus.List() {
		if _, ok := nodeOf[cpu]; !ok {
			return nil, nil, fmt.Errorf("online cpu %d is in no node's cpulist under %s", cpu, r.abs(nodeDir))
		}
	}
	return nodes, nodeOf, nil
}

// node reads one node; the columns of its distance file follow the node ids
// in ascending order, as the kernel prints them.
func (r *reader) node(id int, ids []int) (topology.Node, cpuset.CPUSet, error) {
	n := topology.Node{ID: id, Distances: map[int]int{}}
	cpus, err := r.cpuSet(nodePath(id, "cpulist"))
	if err != nil {
		return n, cpus, err
	}
	rel := nodePath(id, "distance")
	content, err := r.read(rel)
	if err != nil {
		return n, cpus, err
	}
	fields := strings.Fields(content)
	if len(fields) != len(ids) {
		return n, cpus, r.invalid(rel, content, fmt.Sprintf("%d distances, one per node", len(ids)))
	}
	for i, field := range fields {
		d, err := strconv.Atoi(field)
		if err != nil || d <= 0 {
			return n, cpus, r.invalid(rel, content, "positive integer distances")
		}
		n.Distances[ids[i]] = d
	}
	if n.MemTotal, n.MemFree, err = r.meminfo(nodePath(id, "meminfo")); err != nil {
		return n, cpus, err
	}
	n.HugePages, err = r.hugePages(nodePath(id, "hugepages"))
	return n, cpus, err
}

// meminfo reads MemTotal and MemFree, in bytes, from a node's meminfo, whose
// lines look like "Node 0 MemTotal:       3762380 kB".
func (r *reader) meminfo(rel string) (total, free uint64, err error) {
	content, err := r.read(rel)
	if err != nil {
		return 0, 0, err
	}
	values := map[string]uint64{}
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "Node" || f[4] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return 0, 0, r.invalid(rel, line, "a size in kB")
		}
		values[strings.TrimSuffix(f[2], ":")] = kb * 1024
	}
	for _, key := range []string{"MemTotal", "MemFree"} {
		if _, ok := values[key]; !ok {
			return 0, 0, fmt.Errorf("parse %s: no %q line, expected \"Node N %s: <size> kB\"", r.abs(rel), key, key)
		}
	}
	return values["MemTotal"], values["MemFree"], nil
}

// hugePages reads the pools under a node's hugepages directory, whose
// entries are named hugepages-<size>kB.
func (r *reader) hugePages(rel string) ([]topology.HugePages, error) {
	entries, err := os.ReadDir(r.abs(rel))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", r.abs(rel), err)
	}
	var pools []topology.HugePages
	for _, e := range entries {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(size, "kB"), 10, 64)
		if err != nil || !strings.HasSuffix(size, "kB") || kb == 0 {
			return nil, fmt.Errorf("parse %s: directory %q, expected hugepages-<size>kB", r.abs(rel), e.Name())
		}
		pool := topology.HugePages{Size: kb * 1024}
		dir := rel + "/" + e.Name()
		if pool.Total, err = r.uintFile(dir+"/nr_hugepages", "a page count"); err != nil {
			return nil, err
		}
		if pool.Free, err = r.uintFile(dir+"/free_hugepages", "a page count"); err != nil {
			return nil, err
		}
		pools = append(pools, pool)
	}
	return pools, nil
}

// cpu reads the topology ids and caches of one CPU, and the lists of CPUs
// sharing its core and caches.
func (r *reader) cpu(id, node int) (topology.CPU, []sharingList, error) {
	c := topology.CPU{ID: id, Node: node}
	var err error
	if c.Socket, err = r.packageID(cpuPath(id, "topology/physical_package_id"), true); err != nil {
		return c, nil, err
	}
	if c.Die, err = r.packageID(cpuPath(id, "topology/die_id"), false); err != nil {
		return c, nil, err
	}
	if c.Core, err = r.intFile(cpuPath(id, "topology/core_id"), "a core id"); err != nil {
		return c, nil, err
	}
	siblings := sharingList{rel: cpuPath(id, "topology/thread_siblings_list"), cpu: id}
	if siblings.cpus, err = r.cpuSet(siblings.rel); err != nil {
		return c, nil, err
	}
	lists := []sharingList{siblings}
	c.L2, c.L3, err = r.caches(id, &lists)
	return c, lists, err
}

// packageID reads a socket or die id. Kernels without that information
// report -1 (and old kernels have no die_id): both read as 0, one of them.
func (r *reader) packageID(rel string, mandatory bool) (int, error) {
	var content string
	var err error
	found := true
	if mandatory {
		content, err = r.read(rel)
	} else {
		content, found, err = r.readOptional(rel)
	}
	switch {
	case err != nil:
		return 0, err
	case !found || strings.TrimSpace(content) == "-1":
		return 0, nil
	}
	return r.id(rel, "an id", content)
}

// caches returns the ids of a CPU's L2 and L3 caches, or NoCache, and adds
// their shared_cpu_list to lists.
func (r *reader) caches(cpu int, lists *[]sharingList) (l2, l3 int, err error) {
	l2, l3 = topology.NoCache, topology.NoCache
	indexes, _, err := r.numberedEntries(cpuPath(cpu, "cache"), "index")
	if err != nil {
		return l2, l3, err
	}
	for _, k := range slices.Sorted(maps.Keys(indexes)) {
		dir := cpuPath(cpu, "cache/"+indexes[k])
		level, err := r.intFile(dir+"/level", "a cache level")
		if err != nil {
			return l2, l3, err
		}
		if level != 2 && level != 3 {
			continue
		}
		kind, err := r.read(dir + "/type")
		if err != nil {
			return l2, l3, err
		}
		if kind == "Instruction" {
			continue
		}
		if (level == 2 && l2 != topology.NoCache) || (level == 3 && l3 != topology.NoCache) {
			continue // a second cache at this level: the first one counts
		}
		shared := sharingList{rel: dir + "/shared_cpu_list", cpu: cpu, cacheLevel: level}
		if shared.cpus, err = r.cpuSet(shared.rel); err != nil {
			return l2, l3, err
		}
		id, err := r.cacheID(dir, shared.cpus)
		if err != nil {
			return l2, l3, err
		}
		*lists = append(*lists, shared)
		if level == 2 {
			l2 = id
		} else {
			l3 = id
		}
	}
	return l2, l3, nil
}

// cacheID reads a cache's id; kernels that do not report one get the lowest
// CPU sharing the cache, which is as unique as an id.
func (r *reader) cacheID(dir string, shared cpuset.CPUSet) (int, error) {
	content, found, err := r.readOptional(dir + "/id")
	if err != nil {
		return 0, err
	}
	if found {
		return r.id(dir+"/id", "a cache id", content)
	}
	if shared.IsEmpty() {
		return 0, r.invalid(dir+"/shared_cpu_list", "", "at least one CPU")
	}
	return shared.Min(), nil
}
