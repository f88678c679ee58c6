package description

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

var pciAddress = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// validate checks what the topology model cannot check by itself, and names
// each item by its id, or by its index when the id is what is wrong.
func (d *Description) validate() error {
	nodes, err := d.validateNodes()
	if err != nil {
		return err
	}
	cpus, err := d.validateCPUs(nodes)
	if err != nil {
		return err
	}
	if extra := d.Isolated.Difference(cpus); !extra.IsEmpty() {
		return fmt.Errorf("isolated: cpus %s are not in cpus", extra)
	}
	return d.validateDevices(nodes)
}

func (d *Description) validateNodes() (map[int]Node, error) {
	if len(d.Nodes) == 0 {
		return nil, errors.New("nodes: expected at least one node")
	}
	nodes := map[int]Node{}
	for i, n := range d.Nodes {
		if n.ID == nil || *n.ID < 0 {
			return nil, fmt.Errorf("nodes[%d]: expected an id >= 0", i)
		}
		if _, dup := nodes[*n.ID]; dup {
			return nil, fmt.Errorf("node %d: duplicate id", *n.ID)
		}
		nodes[*n.ID] = n
		if n.MemFreeKB > n.MemTotalKB {
			return nil, fmt.Errorf("node %d: mem-free-kb %d exceeds mem-total-kb %d", *n.ID, n.MemFreeKB, n.MemTotalKB)
		}
		sizes := map[uint64]bool{}
		for _, h := range n.HugePages {
			switch {
			case h.SizeKB == 0:
				return nil, fmt.Errorf("node %d: hugepages: expected a size-kb > 0", *n.ID)
			case sizes[h.SizeKB]:
				return nil, fmt.Errorf("node %d: hugepages: duplicate size-kb %d", *n.ID, h.SizeKB)
			case h.Free > h.Total:
				return nil, fmt.Errorf("node %d: hugepages %dkB: free %d exceeds total %d", *n.ID, h.SizeKB, h.Free, h.Total)
			}
			sizes[h.SizeKB] = true
		}
	}
	// In the order of the document, so that the first error is always the same.
	for _, n := range d.Nodes {
		id := *n.ID
		for _, to := range slices.Sorted(maps.Keys(n.Distances)) {
			dist := n.Distances[to]
			back, known := nodes[to].Distances[id]
			switch {
			case nodes[to].ID == nil:
				return nil, fmt.Errorf("node %d: distance to node %d, which is not in nodes", id, to)
			case to == id && dist != 10:
				return nil, fmt.Errorf("node %d: distance to itself is %d, expected 10", id, dist)
			case to != id && dist <= 10:
				return nil, fmt.Errorf("node %d: distance to node %d is %d, expected more than the local 10", id, to, dist)
			case known && back != dist:
				return nil, fmt.Errorf("nodes %d and %d: asymmetric distances (%d to %d is %d, back is %d)", id, to, id, to, dist, back)
			}
		}
		for _, other := range d.Nodes {
			if _, ok := n.Distances[*other.ID]; !ok {
				return nil, fmt.Errorf("node %d: no distance to node %d", id, *other.ID)
			}
		}
	}
	return nodes, nil
}

func (d *Description) validateCPUs(nodes map[int]Node) (cpuset.CPUSet, error) {
	if len(d.CPUs) == 0 {
		return cpuset.CPUSet{}, errors.New("cpus: expected at least one cpu")
	}
	index := map[int]int{}
	for i, c := range d.CPUs {
		if c.ID == nil || *c.ID < 0 || *c.ID > cpuset.MaxCPU {
			return cpuset.CPUSet{}, fmt.Errorf("cpus[%d]: expected an id in [0, %d]", i, cpuset.MaxCPU)
		}
		id := *c.ID
		if first, dup := index[id]; dup {
			return cpuset.CPUSet{}, fmt.Errorf("cpu %d: duplicate id (cpus[%d] and cpus[%d])", id, first, i)
		}
		index[id] = i
		for _, f := range []struct {
			name  string
			value *int
		}{{"core", c.Core}, {"socket", c.Socket}, {"node", c.Node}} {
			if f.value == nil || *f.value < 0 {
				return cpuset.CPUSet{}, fmt.Errorf("cpu %d: expected a %s id >= 0", id, f.name)
			}
		}
		if c.Die < 0 || (c.L2 != nil && *c.L2 < 0) || (c.L3 != nil && *c.L3 < 0) {
			return cpuset.CPUSet{}, fmt.Errorf("cpu %d: die, l2 and l3 ids must be >= 0", id)
		}
		if _, ok := nodes[*c.Node]; !ok {
			return cpuset.CPUSet{}, fmt.Errorf("cpu %d: node %d is not in nodes", id, *c.Node)
		}
	}
	ids := make([]int, 0, len(index))
	for id := range index {
		ids = append(ids, id)
	}
	return cpuset.New(ids...), nil
}

func (d *Description) validateDevices(nodes map[int]Node) error {
	seen := map[string]string{}
	for i, dev := range d.Devices {
		if !pciAddress.MatchString(dev.PCI) {
			return fmt.Errorf("devices[%d]: pci %q, expected an address like 0000:3b:00.0", i, dev.PCI)
		}
		if other, dup := seen[dev.PCI]; dup {
			return fmt.Errorf("device %s: duplicate of %s", dev.PCI, other)
		}
		seen[dev.PCI] = dev.PCI
		if _, ok := nodes[dev.NUMANode]; !ok && dev.NUMANode != locality.UnknownNode {
			return fmt.Errorf("device %s: numa-node %d is not in nodes (-1 for unknown)", dev.PCI, dev.NUMANode)
		}
		for _, n := range dev.deviceNodes() {
			if n.err != nil {
				return fmt.Errorf("device %s: %w", dev.PCI, n.err)
			}
			key := string(n.Kind) + " " + n.String()
			if other, dup := seen[key]; dup {
				return fmt.Errorf("device %s: %s %s is also a node of device %s", dev.PCI, n.Kind, n, other)
			}
			seen[key] = dev.PCI
		}
	}
	return nil
}

type parsedNode struct {
	locality.DeviceNode
	err error
}

// deviceNodes parses the device's "major:minor" lists.
func (dev Device) deviceNodes() []parsedNode {
	var nodes []parsedNode
	for _, list := range []struct {
		kind  locality.Kind
		items []string
	}{{locality.Char, dev.Char}, {locality.Block, dev.Block}} {
		for _, item := range list.items {
			n := parsedNode{DeviceNode: locality.DeviceNode{Kind: list.kind}}
			major, minor, ok := strings.Cut(item, ":")
			var errMajor, errMinor error
			n.Major, errMajor = strconv.ParseInt(major, 10, 32)
			n.Minor, errMinor = strconv.ParseInt(minor, 10, 32)
			if !ok || errMajor != nil || errMinor != nil || n.Major < 0 || n.Minor < 0 {
				n.err = fmt.Errorf("%s %q, expected major:minor", list.kind, item)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}
