package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Write renders t as a sysfs tree under root: the files Discover reads, with
// the kernel's formats, so that Discover(root) returns a model equal to t.
// Existing files are overwritten; nothing else under root is touched.
func Write(root string, t *topology.Topology) error {
	files := map[string]string{
		online:   t.CPUs().String(),
		isolated: t.Isolated().String(),
	}
	for _, c := range t.CPUList() {
		files[cpuPath(c.ID, "topology/physical_package_id")] = strconv.Itoa(c.Socket)
		files[cpuPath(c.ID, "topology/die_id")] = strconv.Itoa(c.Die)
		files[cpuPath(c.ID, "topology/core_id")] = strconv.Itoa(c.Core)
		files[cpuPath(c.ID, "topology/thread_siblings_list")] = t.Siblings(c.ID).String()
		// index0 and index1 are the L1 caches on real machines; the model has
		// none, so the L2 and L3 keep their usual index.
		addCache(files, c.ID, "index2", 2, c.L2, t.CPUsOfCache(2, c.L2))
		addCache(files, c.ID, "index3", 3, c.L3, t.CPUsOfCache(3, c.L3))
	}
	nodes := t.Nodes()
	for _, n := range t.NodeList() {
		distances := make([]string, len(nodes))
		for i, to := range nodes {
			distances[i] = strconv.Itoa(n.Distances[to])
		}
		files[nodePath(n.ID, "cpulist")] = t.CPUsOfNode(n.ID).String()
		files[nodePath(n.ID, "distance")] = strings.Join(distances, " ")
		files[nodePath(n.ID, "meminfo")] = meminfo(n)
		for _, pool := range n.HugePages {
			dir := nodePath(n.ID, fmt.Sprintf("hugepages/hugepages-%dkB", pool.Size/1024))
			files[dir+"/nr_hugepages"] = strconv.FormatUint(pool.Total, 10)
			files[dir+"/free_hugepages"] = strconv.FormatUint(pool.Free, 10)
		}
	}
	for rel, content := range files {
		if err := writeFile(root, rel, content+"\n"); err != nil {
			return fmt.Errorf("write topology under %s: %w", root, err)
		}
	}
	return nil
}

func addCache(files map[string]string, cpu int, index string, level, id int, shared cpuset.CPUSet) {
	if id == topology.NoCache {
		return
	}
	dir := cpuPath(cpu, "cache/"+index)
	files[dir+"/level"] = strconv.Itoa(level)
	files[dir+"/type"] = "Unified"
	files[dir+"/id"] = strconv.Itoa(id)
	files[dir+"/shared_cpu_list"] = shared.String()
}

// meminfo renders the lines of a node's meminfo that discovery reads, in the
// kernel's layout.
func meminfo(n topology.Node) string {
	line := func(key string, bytes uint64) string {
		return fmt.Sprintf("Node %d %-15s %8d kB", n.ID, key+":", bytes/1024)
	}
	return strings.Join([]string{
		line("MemTotal", n.MemTotal),
		line("MemFree", n.MemFree),
		line("MemUsed", n.MemTotal-min(n.MemFree, n.MemTotal)),
	}, "\n")
}

func writeFile(root, rel, content string) error {
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	return os.WriteFile(abs, []byte(content), 0o644)
}
