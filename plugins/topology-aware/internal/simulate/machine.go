package simulate

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// Machine is the node a workload runs on.
type Machine struct {
	Topology *topology.Topology
	// SysfsRoot is where device nodes are located, as the plugin's
	// --sysfs-root; empty when the machine has no sysfs tree (a description
	// without devices), so only numa-node devices can be given.
	SysfsRoot string
	// Source says where the machine came from, for the report.
	Source string
	// cleanup removes what loading created (a rendered sysfs tree).
	cleanup func() error
}

// MachineFromSysfs discovers the machine from a sysfs tree, as the plugin
// does from its --sysfs-root.
func MachineFromSysfs(root string) (*Machine, error) {
	t, err := sysfs.Discover(root)
	if err != nil {
		return nil, fmt.Errorf("--sysfs %s: %w", root, err)
	}
	return &Machine{Topology: t, SysfsRoot: root, Source: "sysfs " + root}, nil
}

// MachineFromDescription builds the machine from a topology description.
// When it describes devices, it is rendered as a sysfs tree in a temporary
// directory so that devices are located by major:minor exactly as on a real
// machine; Close removes it.
func MachineFromDescription(path string) (*Machine, error) {
	d, err := description.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	t, err := d.Topology()
	if err != nil {
		return nil, fmt.Errorf("--topology %s: %w", path, err)
	}
	m := &Machine{Topology: t, Source: "topology " + path}
	if len(d.Devices) == 0 {
		return m, nil
	}
	root, err := os.MkdirTemp("", "nri-topology-aware-simulate-sysfs-")
	if err != nil {
		return nil, fmt.Errorf("--topology %s: render devices: %w", path, err)
	}
	if err := d.WriteTree(root); err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("--topology %s: render devices: %w", path, err)
	}
	m.SysfsRoot = root
	m.cleanup = func() error { return os.RemoveAll(root) }
	return m, nil
}

// Close removes what loading the machine created.
func (m *Machine) Close() error {
	if m.cleanup == nil {
		return nil
	}
	if err := m.cleanup(); err != nil {
		return fmt.Errorf("remove rendered sysfs tree: %w", err)
	}
	return nil
}

// kubeletNode describes the machine as the kubelet sees it when it computes
// container resources: its memory (for OOM scores) and its hugepage sizes,
// in the order the kubelet lists /sys/kernel/mm/hugepages. It also returns
// the page sizes by the name the kubelet gives them ("2MB" -> bytes).
func (m *Machine) kubeletNode() (kubepod.Config, map[string]uint64, error) {
	var memory uint64
	sizes := map[uint64]bool{}
	for _, n := range m.Topology.NodeList() {
		memory += n.MemTotal
		for _, h := range n.HugePages {
			sizes[h.Size] = true
		}
	}
	cfg := kubepod.Config{HugePageSizes: []string{}}
	if memory > 0 && memory <= uint64(1<<63-1) {
		cfg.MemoryCapacity = int64(memory)
	}
	bySize := map[string]uint64{}
	dirs := map[string]string{}
	for size := range sizes {
		name, err := kubepod.HugePageUnitSize(int64(size))
		if err != nil {
			return cfg, nil, fmt.Errorf("machine %s: %w", m.Source, err)
		}
		bySize[name] = size
		// The kubelet reads the directories hugepages-<kB>kB in name order.
		dirs[fmt.Sprintf("hugepages-%dkB", size>>10)] = name
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		cfg.HugePageSizes = append(cfg.HugePageSizes, dirs[dir])
	}
	return cfg, bySize, nil
}
