package topology_test

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

var update = flag.Bool("update", false, "regenerate the fixtures' sysfs trees from their descriptions")

// describedFixtures have a description.yaml from which their sysfs tree is
// generated; this-machine is a capture of a real machine's /sys.
var describedFixtures = []string{
	"smt-1s-8c",
	"smt-2s-12c-interleaved",
	"snc-2s-4n-80c",
	"nps4-2s-12n-256c-cpuless",
	"smt-8s-8n-512c",
}

func fixtureTree(name string) string { return filepath.Join("testdata", name, "sysfs") }

// TestFixtureTreesMatchDescriptions checks that each committed tree is what
// its description renders to (go test -run TestFixtureTrees -update
// regenerates them), and that discovery on the tree gives the description's
// model: description -> tree -> discover -> equal model.
func TestFixtureTreesMatchDescriptions(t *testing.T) {
	for _, name := range describedFixtures {
		t.Run(name, func(t *testing.T) {
			d, err := description.Load(filepath.Join("testdata", name, "description.yaml"))
			require.NoError(t, err)
			if *update {
				require.NoError(t, os.RemoveAll(fixtureTree(name)))
				require.NoError(t, d.WriteTree(fixtureTree(name)))
			}
			rendered := t.TempDir()
			require.NoError(t, d.WriteTree(rendered))
			assert.Equal(t, readTree(t, rendered), readTree(t, fixtureTree(name)), "tree differs from its description; regenerate with -update")

			want, err := d.Topology()
			require.NoError(t, err)
			got, err := sysfs.Discover(fixtureTree(name))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// readTree maps every file and symlink under root to its content or target.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(path)
			tree[rel] = "-> " + target
			return err
		}
		data, err := os.ReadFile(path)
		tree[rel] = string(data)
		return err
	})
	require.NoError(t, err)
	return tree
}

type device struct {
	kind         locality.Kind // "" for a PCI address
	major, minor int64
	pci          string
	node         int
	cpus         string
}

// fixture holds what a fixture's machine is known to have, written from its
// documented layout rather than computed.
type fixture struct {
	name           string
	cpus           string
	sockets        []int
	dies           []topology.Die
	nodes          []int
	cpuLess        []int
	cores          int
	threadsPerCore int
	l2Groups       int
	l3Groups       []string
	siblings       map[int]string
	nodeCPUs       map[int]string
	socketCPUs     map[int]string
	distances      map[[2]int]int
	byDistance     map[int][]int
	memTotal       map[int]uint64
	hugePages      map[int][]topology.HugePages
	isolated       string
	devices        []device
}

const (
	kiB = 1024
	giB = 1024 * 1024 * 1024
)

var fixtures = []fixture{{
	name:    "smt-1s-8c",
	cpus:    "0-7",
	sockets: []int{0}, dies: []topology.Die{{Socket: 0, ID: 0}},
	nodes: []int{0}, cores: 4, threadsPerCore: 2, l2Groups: 4,
	l3Groups:   []string{"0-7"},
	siblings:   map[int]string{0: "0,4", 5: "1,5", 3: "3,7"},
	nodeCPUs:   map[int]string{0: "0-7"},
	socketCPUs: map[int]string{0: "0-7"},
	distances:  map[[2]int]int{{0, 0}: 10},
	byDistance: map[int][]int{0: {0}},
	memTotal:   map[int]uint64{0: 16 * giB},
	hugePages:  map[int][]topology.HugePages{0: {{Size: 2048 * kiB, Total: 512, Free: 512}, {Size: giB, Total: 0, Free: 0}}},
	devices: []device{
		{kind: locality.Char, major: 240, minor: 0, node: -1, cpus: "0-7"},
		{kind: locality.Block, major: 259, minor: 0, node: -1, cpus: "0-7"},
		{pci: "0000:00:1f.6", node: -1, cpus: "0-7"},
	},
}, {
	name:    "smt-2s-12c-interleaved",
	cpus:    "0-11",
	sockets: []int{0, 1}, dies: []topology.Die{{Socket: 0, ID: 0}, {Socket: 1, ID: 0}},
	nodes: []int{0, 1}, cores: 6, threadsPerCore: 2, l2Groups: 6,
	l3Groups:   []string{"0,2,4,6,8,10", "1,3,5,7,9,11"},
	siblings:   map[int]string{0: "0,6", 6: "0,6", 1: "1,7", 4: "4,10", 11: "5,11"},
	nodeCPUs:   map[int]string{0: "0,2,4,6,8,10", 1: "1,3,5,7,9,11"},
	socketCPUs: map[int]string{0: "0,2,4,6,8,10", 1: "1,3,5,7,9,11"},
	distances:  map[[2]int]int{{0, 0}: 10, {0, 1}: 21, {1, 0}: 21, {1, 1}: 10},
	byDistance: map[int][]int{0: {0, 1}, 1: {1, 0}},
	memTotal:   map[int]uint64{0: 32 * giB, 1: 32 * giB},
	hugePages:  map[int][]topology.HugePages{1: {{Size: 2048 * kiB, Total: 1024, Free: 1000}, {Size: giB, Total: 2, Free: 2}}},
	isolated:   "5,11",
	devices: []device{
		{kind: locality.Block, major: 259, minor: 0, node: 0, cpus: "0,2,4,6,8,10"},
		{kind: locality.Char, major: 240, minor: 1, node: 1, cpus: "1,3,5,7,9,11"},
		{pci: "0000:81:00.0", node: 1, cpus: "1,3,5,7,9,11"},
	},
}, {
	name:    "snc-2s-4n-80c",
	cpus:    "0-79",
	sockets: []int{0, 1}, dies: []topology.Die{{Socket: 0, ID: 0}, {Socket: 1, ID: 0}},
	nodes: []int{0, 1, 2, 3}, cores: 40, threadsPerCore: 2, l2Groups: 40,
	l3Groups:   []string{"0-19,40-59", "20-39,60-79"},
	siblings:   map[int]string{0: "0,40", 19: "19,59", 79: "39,79"},
	nodeCPUs:   map[int]string{0: "0-9,40-49", 1: "10-19,50-59", 2: "20-29,60-69", 3: "30-39,70-79"},
	socketCPUs: map[int]string{0: "0-19,40-59", 1: "20-39,60-79"},
	distances:  map[[2]int]int{{0, 0}: 10, {0, 1}: 11, {0, 2}: 21, {3, 2}: 11, {3, 0}: 21},
	byDistance: map[int][]int{0: {0, 1, 2, 3}, 2: {2, 3, 0, 1}, 3: {3, 2, 0, 1}},
	memTotal:   map[int]uint64{0: 64 * giB, 3: 64 * giB},
	hugePages:  map[int][]topology.HugePages{2: {{Size: 2048 * kiB, Total: 2048, Free: 2048}, {Size: giB, Total: 8, Free: 8}}},
	devices: []device{
		{kind: locality.Char, major: 195, minor: 0, node: 1, cpus: "10-19,50-59"},
		{kind: locality.Char, major: 195, minor: 1, node: 3, cpus: "30-39,70-79"},
		{kind: locality.Block, major: 259, minor: 0, node: 2, cpus: "20-29,60-69"},
		{pci: "0000:17:00.0", node: 0, cpus: "0-9,40-49"},
	},
}, {
	name:    "nps4-2s-12n-256c-cpuless",
	cpus:    "0-255",
	sockets: []int{0, 1},
	dies: []topology.Die{{Socket: 0, ID: 0}, {Socket: 0, ID: 1}, {Socket: 0, ID: 2}, {Socket: 0, ID: 3},
		{Socket: 1, ID: 0}, {Socket: 1, ID: 1}, {Socket: 1, ID: 2}, {Socket: 1, ID: 3}},
	nodes:   []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	cpuLess: []int{8, 9, 10, 11},
	cores:   128, threadsPerCore: 2, l2Groups: 128,
	l3Groups: []string{
		"0-7,128-135", "8-15,136-143", "16-23,144-151", "24-31,152-159",
		"32-39,160-167", "40-47,168-175", "48-55,176-183", "56-63,184-191",
		"64-71,192-199", "72-79,200-207", "80-87,208-215", "88-95,216-223",
		"96-103,224-231", "104-111,232-239", "112-119,240-247", "120-127,248-255",
	},
	siblings:   map[int]string{0: "0,128", 127: "127,255", 200: "72,200"},
	nodeCPUs:   map[int]string{0: "0-15,128-143", 5: "80-95,208-223", 7: "112-127,240-255", 8: "", 11: ""},
	socketCPUs: map[int]string{0: "0-63,128-191", 1: "64-127,192-255"},
	distances: map[[2]int]int{{0, 0}: 10, {0, 3}: 12, {0, 4}: 32, {0, 8}: 14, {0, 9}: 34,
		{0, 10}: 24, {0, 11}: 44, {8, 9}: 36, {10, 11}: 56, {8, 10}: 26, {11, 8}: 46},
	byDistance: map[int][]int{
		0:  {0, 1, 2, 3, 8, 10, 4, 5, 6, 7, 9, 11},
		6:  {6, 4, 5, 7, 9, 11, 0, 1, 2, 3, 8, 10},
		10: {10, 0, 1, 2, 3, 8, 4, 5, 6, 7, 9, 11},
	},
	memTotal: map[int]uint64{0: 64 * giB, 8: 16 * giB, 11: 256 * giB},
	hugePages: map[int][]topology.HugePages{
		0:  {{Size: 2048 * kiB, Total: 4096, Free: 4096}, {Size: giB, Total: 16, Free: 16}},
		9:  {{Size: 2048 * kiB, Total: 1024, Free: 1024}},
		10: nil,
	},
	devices: []device{
		{kind: locality.Char, major: 195, minor: 1, node: 2, cpus: "32-47,160-175"},
		{kind: locality.Block, major: 259, minor: 0, node: 6, cpus: "96-111,224-239"},
		{kind: locality.Char, major: 250, minor: 0, node: 10, cpus: ""},
		{kind: locality.Char, major: 10, minor: 200, node: -1, cpus: "0-255"},
		{pci: "0000:81:00.0", node: 4, cpus: "64-79,192-207"},
	},
}, {
	// More CPUs than cpu.shares can express (256).
	name:    "smt-8s-8n-512c",
	cpus:    "0-511",
	sockets: []int{0, 1, 2, 3, 4, 5, 6, 7},
	dies: []topology.Die{{Socket: 0, ID: 0}, {Socket: 1, ID: 0}, {Socket: 2, ID: 0}, {Socket: 3, ID: 0},
		{Socket: 4, ID: 0}, {Socket: 5, ID: 0}, {Socket: 6, ID: 0}, {Socket: 7, ID: 0}},
	nodes: []int{0, 1, 2, 3, 4, 5, 6, 7},
	cores: 256, threadsPerCore: 2, l2Groups: 256,
	l3Groups: []string{
		"0-31,256-287", "32-63,288-319", "64-95,320-351", "96-127,352-383",
		"128-159,384-415", "160-191,416-447", "192-223,448-479", "224-255,480-511",
	},
	siblings:   map[int]string{0: "0,256", 255: "255,511", 300: "44,300"},
	nodeCPUs:   map[int]string{0: "0-31,256-287", 7: "224-255,480-511"},
	socketCPUs: map[int]string{3: "96-127,352-383"},
	distances:  map[[2]int]int{{0, 0}: 10, {0, 3}: 21, {0, 4}: 31, {5, 6}: 21, {7, 2}: 31},
	byDistance: map[int][]int{0: {0, 1, 2, 3, 4, 5, 6, 7}, 6: {6, 4, 5, 7, 0, 1, 2, 3}},
	memTotal:   map[int]uint64{0: 128 * giB, 7: 128 * giB},
	hugePages: map[int][]topology.HugePages{
		3: {{Size: 2048 * kiB, Total: 4096, Free: 4096}, {Size: giB, Total: 16, Free: 16}},
	},
}, {
	// The peer's (containers/nri-plugins) recorded "server", captured with
	// tools/sysfs-capture: 2 sockets x 28 cores x 2 threads, CPU ids
	// round-robin over 4 DRAM nodes (0 and 2 on socket 0, 1 and 3 on
	// socket 1), 2 CPU-less PMEM nodes, CPUs 4-7,60-63 isolated.
	name:    "nri-plugins-server",
	cpus:    "0-111",
	sockets: []int{0, 1}, dies: []topology.Die{{Socket: 0, ID: 0}, {Socket: 1, ID: 0}},
	nodes: []int{0, 1, 2, 3, 4, 5}, cpuLess: []int{4, 5}, cores: 56, threadsPerCore: 2, l2Groups: 56,
	l3Groups: []string{
		"0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,46,48,50,52,54,56,58,60,62,64,66,68,70,72,74,76,78,80,82,84,86,88,90,92,94,96,98,100,102,104,106,108,110",
		"1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,49,51,53,55,57,59,61,63,65,67,69,71,73,75,77,79,81,83,85,87,89,91,93,95,97,99,101,103,105,107,109,111",
	},
	siblings:   map[int]string{0: "0,56", 4: "4,60", 111: "55,111"},
	nodeCPUs:   map[int]string{0: "0,4,8,12,16,20,24,28,32,36,40,44,48,52,56,60,64,68,72,76,80,84,88,92,96,100,104,108"},
	distances:  map[[2]int]int{{0, 2}: 11, {0, 1}: 21, {0, 4}: 17, {2, 5}: 17, {1, 4}: 28},
	byDistance: map[int][]int{0: {0, 2, 4, 1, 3, 5}, 1: {1, 3, 0, 2, 4, 5}},
	memTotal:   map[int]uint64{4: 133143986176},
	isolated:   "4-7,60-63",
}, {
	// This machine, captured with tools/sysfs-capture: a 2-CPU VM with one
	// node whose PCI devices report numa_node -1.
	name:    "this-machine",
	cpus:    "0-1",
	sockets: []int{0}, dies: []topology.Die{{Socket: 0, ID: 0}},
	nodes: []int{0}, cores: 2, threadsPerCore: 1, l2Groups: 2,
	l3Groups:   []string{"0-1"},
	siblings:   map[int]string{0: "0", 1: "1"},
	nodeCPUs:   map[int]string{0: "0-1"},
	socketCPUs: map[int]string{0: "0-1"},
	distances:  map[[2]int]int{{0, 0}: 10},
	byDistance: map[int][]int{0: {0}},
	hugePages:  map[int][]topology.HugePages{0: {{Size: 2048 * kiB}, {Size: giB}}},
	devices: []device{
		{kind: locality.Block, major: 254, minor: 0, node: -1, cpus: "0-1"},
		{kind: locality.Char, major: 10, minor: 200, node: -1, cpus: ""},
		{pci: "0000:00:02.0", node: -1, cpus: "0-1"},
	},
}}

func TestFixtures(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			root := fixtureTree(f.name)
			topo, err := sysfs.Discover(root)
			require.NoError(t, err)

			assert.Equal(t, f.cpus, topo.CPUs().String())
			assert.Equal(t, f.sockets, topo.Sockets())
			assert.Equal(t, f.dies, topo.Dies())
			assert.Equal(t, f.nodes, topo.Nodes())
			assert.Equal(t, f.cpuLess, topo.CPULessNodes())
			assert.Len(t, topo.Cores(), f.cores)
			assert.Equal(t, f.threadsPerCore, topo.ThreadsPerCore())
			assert.Len(t, topo.L2Groups(), f.l2Groups)
			var l3 []string
			for _, g := range topo.L3Groups() {
				l3 = append(l3, g.CPUs.String())
			}
			assert.Equal(t, f.l3Groups, l3)
			for cpu, want := range f.siblings {
				assert.Equal(t, want, topo.Siblings(cpu).String(), "siblings of cpu %d", cpu)
			}
			for node, want := range f.nodeCPUs {
				assert.Equal(t, want, topo.CPUsOfNode(node).String(), "cpus of node %d", node)
				for _, cpu := range topo.CPUsOfNode(node).List() {
					n, ok := topo.NodeOfCPU(cpu)
					assert.True(t, ok)
					assert.Equal(t, node, n, "node of cpu %d", cpu)
				}
			}
			for socket, want := range f.socketCPUs {
				assert.Equal(t, want, topo.CPUsOfSocket(socket).String(), "cpus of socket %d", socket)
			}
			for pair, want := range f.distances {
				got, ok := topo.Distance(pair[0], pair[1])
				assert.True(t, ok)
				assert.Equal(t, want, got, "distance %d -> %d", pair[0], pair[1])
			}
			for from, want := range f.byDistance {
				assert.Equal(t, want, topo.NodesByDistance(from), "nodes by distance from %d", from)
			}
			for id, want := range f.memTotal {
				n, ok := topo.Node(id)
				require.True(t, ok)
				assert.Equal(t, want, n.MemTotal, "memory of node %d", id)
				assert.LessOrEqual(t, n.MemFree, n.MemTotal)
			}
			for id, want := range f.hugePages {
				n, _ := topo.Node(id)
				if id == 0 && f.name == "this-machine" { // the pool sizes are the machine's, the counts its state
					for i := range n.HugePages {
						n.HugePages[i].Total, n.HugePages[i].Free = 0, 0
					}
				}
				assert.Equal(t, want, n.HugePages, "hugepages of node %d", id)
			}
			assert.Equal(t, f.isolated, topo.Isolated().String())
			assertCoresPartitionCPUs(t, topo)

			for _, d := range f.devices {
				var l locality.Locality
				if d.pci != "" {
					l, err = locality.OfPCI(root, d.pci)
				} else {
					l, err = locality.OfDevice(root, d.kind, d.major, d.minor)
				}
				require.NoError(t, err, "device %+v", d)
				assert.Equal(t, d.node, l.NUMANode, "node of device %+v", d)
				assert.Equal(t, d.cpus, l.CPUs.String(), "local cpus of device %+v", d)
			}
		})
	}
}

// assertCoresPartitionCPUs checks that the cores, and the L3 groups, split
// the machine's CPUs without overlap, and that each core sits in one node.
func assertCoresPartitionCPUs(t *testing.T, topo *topology.Topology) {
	t.Helper()
	var seen cpuset.CPUSet
	for _, c := range topo.Cores() {
		assert.True(t, seen.Intersection(c.CPUs).IsEmpty(), "core %+v overlaps another", c)
		seen = seen.Union(c.CPUs)
		assert.Len(t, topo.NodesOfCPUs(c.CPUs), 1, "core %+v spans nodes", c)
	}
	assert.True(t, seen.Equal(topo.CPUs()))
	seen = cpuset.CPUSet{}
	for _, g := range topo.L3Groups() {
		assert.True(t, seen.Intersection(g.CPUs).IsEmpty(), "L3 group %+v overlaps another", g)
		seen = seen.Union(g.CPUs)
	}
	assert.True(t, seen.Equal(topo.CPUs()))
}

func BenchmarkDiscover256(b *testing.B) {
	for b.Loop() {
		if _, err := sysfs.Discover(fixtureTree("nps4-2s-12n-256c-cpuless")); err != nil {
			b.Fatal(err)
		}
	}
}
