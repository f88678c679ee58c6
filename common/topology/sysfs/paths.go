// Package sysfs discovers a machine's topology.Topology from a sysfs tree, and
// renders a Topology back into such a tree.
//
// The tree is read under a configurable root (DefaultRoot on a live machine,
// a recorded or generated fixture in tests). Discovery reads only these files,
// relative to the root; Write produces exactly them:
//
//	devices/system/cpu/online                          mandatory
//	devices/system/cpu/isolated                        optional: none isolated
//	devices/system/cpu/cpuN/topology/physical_package_id  mandatory (-1 reads as 0)
//	devices/system/cpu/cpuN/topology/die_id            optional: 0 (-1 reads as 0)
//	devices/system/cpu/cpuN/topology/core_id           mandatory
//	devices/system/cpu/cpuN/topology/thread_siblings_list  mandatory, checked against core ids
//	devices/system/cpu/cpuN/cache/indexK/{level,type,shared_cpu_list}  optional: cache unknown
//	devices/system/cpu/cpuN/cache/indexK/id            optional: lowest CPU of shared_cpu_list
//	devices/system/node/nodeN/{cpulist,distance,meminfo}  mandatory for each node
//	devices/system/node/nodeN/hugepages/hugepages-<size>kB/{nr_hugepages,free_hugepages}  optional
//
// Only online CPUs are read. A kernel without NUMA support has no
// devices/system/node/nodeN directory; discovery then models one node 0 with
// every CPU, distance 10 and unknown (zero) memory. An unreadable or malformed
// file is an error naming the file, the value and what was expected.
package sysfs

import (
	"fmt"
	"path"
)

// DefaultRoot is where the kernel mounts sysfs.
const DefaultRoot = "/sys"

const (
	cpuDir   = "devices/system/cpu"
	nodeDir  = "devices/system/node"
	online   = cpuDir + "/online"
	isolated = cpuDir + "/isolated"
)

func cpuPath(cpu int, file string) string {
	return path.Join(cpuDir, fmt.Sprintf("cpu%d", cpu), file)
}

func nodePath(node int, file string) string {
	return path.Join(nodeDir, fmt.Sprintf("node%d", node), file)
}
