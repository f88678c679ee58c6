package sysfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// twoNodes is a 2-node, 2-core, 4-CPU machine; the tests render it and then
// break the rendered tree.
const twoNodes = `
cpus:
  - {id: 0, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 1, core: 1, socket: 1, node: 1, l2: 1, l3: 1}
  - {id: 2, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 3, core: 1, socket: 1, node: 1, l2: 1, l3: 1}
nodes:
  - {id: 0, mem-total-kb: 1048576, mem-free-kb: 524288, distances: {0: 10, 1: 20},
     hugepages: [{size-kb: 2048, total: 8, free: 4}]}
  - {id: 1, mem-total-kb: 2097152, mem-free-kb: 1048576, distances: {0: 20, 1: 10}}
isolated: "3"
`

func render(t *testing.T, yaml string) (string, *topology.Topology) {
	t.Helper()
	d, err := description.Parse([]byte(yaml))
	require.NoError(t, err)
	want, err := d.Topology()
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, sysfs.Write(root, want))
	return root, want
}

func put(t *testing.T, root, rel, content string) {
	t.Helper()
	path := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestDiscoverRoundTrip(t *testing.T) {
	root, want := render(t, twoNodes)
	var read []string
	got, err := sysfs.Discover(root, sysfs.OnRead(func(rel string) { read = append(read, rel) }))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, "3", got.Isolated().String())
	n0, _ := got.Node(0)
	assert.Equal(t, uint64(1<<30), n0.MemTotal)
	assert.Equal(t, uint64(1<<29), n0.MemFree)
	assert.Equal(t, []topology.HugePages{{Size: 2 << 20, Total: 8, Free: 4}}, n0.HugePages)
	assert.Contains(t, read, "devices/system/cpu/online")
	assert.Contains(t, read, "devices/system/cpu/cpu3/cache/index3/shared_cpu_list")
	assert.Contains(t, read, "devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages")
}

// TestDiscoverDefaults removes the optional files and checks the documented
// defaults.
func TestDiscoverDefaults(t *testing.T) {
	tests := []struct {
		name   string
		remove []string
		put    map[string]string
		check  func(t *testing.T, topo *topology.Topology)
	}{{
		name:   "no isolated file",
		remove: []string{"devices/system/cpu/isolated"},
		check:  func(t *testing.T, topo *topology.Topology) { assert.True(t, topo.Isolated().IsEmpty()) },
	}, {
		name:   "no die_id",
		remove: []string{"devices/system/cpu/cpu1/topology/die_id"},
		check: func(t *testing.T, topo *topology.Topology) {
			c, _ := topo.CPU(1)
			assert.Equal(t, 0, c.Die)
		},
	}, {
		name: "package and die -1",
		put: map[string]string{
			"devices/system/cpu/cpu0/topology/physical_package_id": "-1\n",
			"devices/system/cpu/cpu2/topology/physical_package_id": "-1\n",
			"devices/system/cpu/cpu0/topology/die_id":              "-1\n",
		},
		check: func(t *testing.T, topo *topology.Topology) {
			c, _ := topo.CPU(0)
			assert.Equal(t, 0, c.Socket)
			assert.Equal(t, 0, c.Die)
		},
	}, {
		name:   "no cache directories",
		remove: []string{"devices/system/cpu/cpu0/cache", "devices/system/cpu/cpu2/cache"},
		check: func(t *testing.T, topo *topology.Topology) {
			c, _ := topo.CPU(0)
			assert.Equal(t, topology.NoCache, c.L2)
			assert.Equal(t, topology.NoCache, c.L3)
			require.Len(t, topo.L3Groups(), 1)
			assert.Equal(t, "1,3", topo.L3Groups()[0].CPUs.String())
		},
	}, {
		name: "no cache ids: the lowest sharing CPU",
		remove: []string{
			"devices/system/cpu/cpu1/cache/index3/id", "devices/system/cpu/cpu3/cache/index3/id",
		},
		check: func(t *testing.T, topo *topology.Topology) {
			c, _ := topo.CPU(3)
			assert.Equal(t, 1, c.L3)
			assert.Equal(t, "1,3", topo.CPUsOfCache(3, 1).String())
		},
	}, {
		name: "L1 and instruction caches are skipped",
		put: map[string]string{
			"devices/system/cpu/cpu0/cache/index0/level": "1\n",
			"devices/system/cpu/cpu0/cache/index0/type":  "Data\n",
			"devices/system/cpu/cpu0/cache/index1/level": "2\n",
			"devices/system/cpu/cpu0/cache/index1/type":  "Instruction\n",
		},
		check: func(t *testing.T, topo *topology.Topology) {
			c, _ := topo.CPU(0)
			assert.Equal(t, 0, c.L2)
		},
	}, {
		name:   "no hugepages directory",
		remove: []string{"devices/system/node/node0/hugepages"},
		check: func(t *testing.T, topo *topology.Topology) {
			n, _ := topo.Node(0)
			assert.Empty(t, n.HugePages)
		},
	}, {
		name:   "no NUMA: one node with every CPU",
		remove: []string{"devices/system/node"},
		check: func(t *testing.T, topo *topology.Topology) {
			assert.Equal(t, []int{0}, topo.Nodes())
			assert.Equal(t, "0-3", topo.CPUsOfNode(0).String())
			d, ok := topo.Distance(0, 0)
			assert.True(t, ok)
			assert.Equal(t, 10, d)
		},
	}, {
		name: "offline CPU is left out",
		put:  map[string]string{"devices/system/cpu/online": "0-2\n"},
		remove: []string{
			"devices/system/cpu/cpu3", // the kernel hides an offline CPU's topology
		},
		check: func(t *testing.T, topo *topology.Topology) {
			assert.Equal(t, "0-2", topo.CPUs().String())
			assert.Equal(t, "1", topo.CPUsOfNode(1).String())
			assert.True(t, topo.Isolated().IsEmpty(), "isolated offline cpu 3 is not a cpu of the model")
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _ := render(t, twoNodes)
			for _, rel := range tt.remove {
				require.NoError(t, os.RemoveAll(filepath.Join(root, rel)))
			}
			for rel, content := range tt.put {
				put(t, root, rel, content)
			}
			topo, err := sysfs.Discover(root)
			require.NoError(t, err)
			tt.check(t, topo)
		})
	}
}

// TestDiscoverBadInput breaks one file at a time: each gives an error naming
// the file and what was expected, and nothing panics.
func TestDiscoverBadInput(t *testing.T) {
	tests := []struct {
		name    string
		remove  string
		put     map[string]string
		asDir   string // replaced by a directory: unreadable as a file, even for root
		wantErr []string
	}{
		{name: "missing online", remove: "devices/system/cpu/online",
			wantErr: []string{"devices/system/cpu/online", "no such file"}},
		{name: "online unreadable", asDir: "devices/system/cpu/online",
			wantErr: []string{"read ", "devices/system/cpu/online", "is a directory"}},
		{name: "malformed online", put: map[string]string{"devices/system/cpu/online": "0-x\n"},
			wantErr: []string{"devices/system/cpu/online", "expected a cpu list", `bad token "0-x"`}},
		{name: "no online cpu", put: map[string]string{"devices/system/cpu/online": "\n"},
			wantErr: []string{"devices/system/cpu/online", "expected at least one online CPU"}},
		{name: "malformed isolated", put: map[string]string{"devices/system/cpu/isolated": "3-1\n"},
			wantErr: []string{"devices/system/cpu/isolated", "range end 1 is below its start 3"}},
		{name: "isolated unreadable", asDir: "devices/system/cpu/isolated",
			wantErr: []string{"devices/system/cpu/isolated", "is a directory"}},
		{name: "missing core_id", remove: "devices/system/cpu/cpu2/topology/core_id",
			wantErr: []string{"cpu2/topology/core_id", "no such file"}},
		{name: "malformed core_id", put: map[string]string{"devices/system/cpu/cpu2/topology/core_id": "abc\n"},
			wantErr: []string{"cpu2/topology/core_id", `got "abc"`, "expected a core id"}},
		{name: "negative core_id", put: map[string]string{"devices/system/cpu/cpu2/topology/core_id": "-1\n"},
			wantErr: []string{"cpu2/topology/core_id", `got "-1"`}},
		{name: "missing package id", remove: "devices/system/cpu/cpu1/topology/physical_package_id",
			wantErr: []string{"cpu1/topology/physical_package_id", "no such file"}},
		{name: "malformed die id", put: map[string]string{"devices/system/cpu/cpu1/topology/die_id": "1.5\n"},
			wantErr: []string{"cpu1/topology/die_id", `got "1.5"`, "expected an id"}},
		{name: "missing siblings", remove: "devices/system/cpu/cpu0/topology/thread_siblings_list",
			wantErr: []string{"cpu0/topology/thread_siblings_list", "no such file"}},
		{name: "siblings contradict core ids", put: map[string]string{"devices/system/cpu/cpu0/topology/thread_siblings_list": "0-1\n"},
			wantErr: []string{"cpu0/topology/thread_siblings_list", "lists cpus 0-1", "make them 0,2"}},
		{name: "cache list contradicts ids", put: map[string]string{"devices/system/cpu/cpu1/cache/index3/shared_cpu_list": "1\n"},
			wantErr: []string{"cpu1/cache/index3/shared_cpu_list", "lists cpus 1", "make them 1,3"}},
		{name: "malformed cache level", put: map[string]string{"devices/system/cpu/cpu1/cache/index2/level": "two\n"},
			wantErr: []string{"cpu1/cache/index2/level", `got "two"`, "expected a cache level"}},
		{name: "cache without type", remove: "devices/system/cpu/cpu1/cache/index2/type",
			wantErr: []string{"cpu1/cache/index2/type", "no such file"}},
		{name: "malformed cache id", put: map[string]string{"devices/system/cpu/cpu1/cache/index2/id": "x\n"},
			wantErr: []string{"cpu1/cache/index2/id", `got "x"`}},
		{name: "missing node cpulist", remove: "devices/system/node/node1/cpulist",
			wantErr: []string{"node1/cpulist", "no such file"}},
		{name: "cpu in no node", put: map[string]string{"devices/system/node/node1/cpulist": "1\n"},
			wantErr: []string{"online cpu 3 is in no node's cpulist"}},
		{name: "cpu in two nodes", put: map[string]string{"devices/system/node/node1/cpulist": "0-3\n"},
			wantErr: []string{"node1/cpulist", "cpu 0 is also in node 0"}},
		{name: "short distance row", put: map[string]string{"devices/system/node/node0/distance": "10\n"},
			wantErr: []string{"node0/distance", `got "10"`, "expected 2 distances"}},
		{name: "malformed distance", put: map[string]string{"devices/system/node/node0/distance": "10 far\n"},
			wantErr: []string{"node0/distance", "positive integer distances"}},
		{name: "missing meminfo", remove: "devices/system/node/node1/meminfo",
			wantErr: []string{"node1/meminfo", "no such file"}},
		{name: "meminfo without MemFree", put: map[string]string{"devices/system/node/node1/meminfo": "Node 1 MemTotal: 100 kB\n"},
			wantErr: []string{"node1/meminfo", `no "MemFree" line`}},
		{name: "malformed meminfo size", put: map[string]string{"devices/system/node/node1/meminfo": "Node 1 MemTotal: lots kB\n"},
			wantErr: []string{"node1/meminfo", "expected a size in kB"}},
		{name: "malformed hugepages dir", put: map[string]string{"devices/system/node/node0/hugepages/hugepages-2MB/nr_hugepages": "1\n"},
			wantErr: []string{"node0/hugepages", `"hugepages-2MB"`, "expected hugepages-<size>kB"}},
		{name: "malformed hugepage count", put: map[string]string{"devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "-3\n"},
			wantErr: []string{"hugepages-2048kB/nr_hugepages", `got "-3"`, "expected a page count"}},
		{name: "missing free hugepages", remove: "devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages",
			wantErr: []string{"hugepages-2048kB/free_hugepages", "no such file"}},
		{name: "hugepages unreadable", asDir: "devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
			wantErr: []string{"hugepages-2048kB/nr_hugepages", "is a directory"}},
		{name: "missing cpu directory", remove: "devices/system/cpu/cpu2",
			wantErr: []string{"cpu2/topology/physical_package_id", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _ := render(t, twoNodes)
			if tt.remove != "" {
				require.NoError(t, os.RemoveAll(filepath.Join(root, tt.remove)))
			}
			for rel, content := range tt.put {
				put(t, root, rel, content)
			}
			if tt.asDir != "" {
				require.NoError(t, os.RemoveAll(filepath.Join(root, tt.asDir)))
				require.NoError(t, os.MkdirAll(filepath.Join(root, tt.asDir), 0o755))
			}
			topo, err := sysfs.Discover(root)
			require.Error(t, err)
			assert.Nil(t, topo)
			assert.True(t, strings.HasPrefix(err.Error(), "discover topology under "+root), err.Error())
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestDiscoverEmptyRoot(t *testing.T) {
	_, err := sysfs.Discover(t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "devices/system/cpu/online")
}

// TestWriteMemoryOnlyNode renders a CPU-less node and reads it back.
func TestWriteMemoryOnlyNode(t *testing.T) {
	root, want := render(t, `
cpus: [{id: 0, core: 0, socket: 0, node: 0}]
nodes:
  - {id: 0, mem-total-kb: 1024, mem-free-kb: 1024, distances: {0: 10, 1: 17}}
  - {id: 1, mem-total-kb: 4096, mem-free-kb: 2048, distances: {0: 17, 1: 10}}
`)
	cpulist, err := os.ReadFile(filepath.Join(root, "devices/system/node/node1/cpulist"))
	require.NoError(t, err)
	assert.Equal(t, "\n", string(cpulist))
	got, err := sysfs.Discover(root)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, []int{1}, got.CPULessNodes())
	assert.Equal(t, cpuset.CPUSet{}, got.CPUsOfNode(1))
}
