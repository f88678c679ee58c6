package description

import (
	"fmt"
	"maps"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// Topology validates the description and builds the model of the machine.
func (d *Description) Topology() (*topology.Topology, error) {
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("invalid topology description: %w", err)
	}
	cpus := make([]topology.CPU, len(d.CPUs))
	for i, c := range d.CPUs {
		cpus[i] = topology.CPU{
			ID: deref(c.ID), Core: deref(c.Core), Die: c.Die, Socket: deref(c.Socket), Node: deref(c.Node),
			L2: cacheID(c.L2), L3: cacheID(c.L3),
		}
	}
	nodes := make([]topology.Node, len(d.Nodes))
	for i, n := range d.Nodes {
		nodes[i] = topology.Node{
			ID: deref(n.ID), Distances: maps.Clone(n.Distances),
			MemTotal: n.MemTotalKB * 1024, MemFree: n.MemFreeKB * 1024,
		}
		for _, h := range n.HugePages {
			nodes[i].HugePages = append(nodes[i].HugePages, topology.HugePages{Size: h.SizeKB * 1024, Total: h.Total, Free: h.Free})
		}
	}
	t, err := topology.New(cpus, nodes, d.Isolated)
	if err != nil {
		return nil, fmt.Errorf("build topology from description: %w", err)
	}
	return t, nil
}

// LocalityDevices returns the described devices of the machine t with the
// local CPUs the kernel would report: their node's CPUs, or every CPU when
// the node is unknown.
func (d *Description) LocalityDevices(t *topology.Topology) []locality.Device {
	devices := make([]locality.Device, 0, len(d.Devices))
	for _, dev := range d.Devices {
		ld := locality.Device{PCIAddress: dev.PCI, NUMANode: dev.NUMANode, LocalCPUs: t.CPUsOfNode(dev.NUMANode)}
		if dev.NUMANode == locality.UnknownNode {
			ld.LocalCPUs = t.CPUs()
		}
		for _, n := range dev.deviceNodes() {
			ld.Nodes = append(ld.Nodes, n.DeviceNode)
		}
		devices = append(devices, ld)
	}
	return devices
}

// WriteTree renders the described machine and its devices as a sysfs tree
// under root.
func (d *Description) WriteTree(root string) error {
	t, err := d.Topology()
	if err != nil {
		return err
	}
	if err := sysfs.Write(root, t); err != nil {
		return err
	}
	for _, dev := range d.LocalityDevices(t) {
		if err := locality.WriteDevice(root, dev); err != nil {
			return err
		}
	}
	return nil
}

// FromTopology describes a model, e.g. a discovered machine, without devices.
func FromTopology(t *topology.Topology) *Description {
	d := &Description{Isolated: t.Isolated()}
	for _, c := range t.CPUList() {
		d.CPUs = append(d.CPUs, CPU{
			ID: ptr(c.ID), Core: ptr(c.Core), Die: c.Die, Socket: ptr(c.Socket), Node: ptr(c.Node),
			L2: cachePtr(c.L2), L3: cachePtr(c.L3),
		})
	}
	for _, n := range t.NodeList() {
		node := Node{ID: ptr(n.ID), MemTotalKB: n.MemTotal / 1024, MemFreeKB: n.MemFree / 1024, Distances: n.Distances}
		for _, h := range n.HugePages {
			node.HugePages = append(node.HugePages, HugePages{SizeKB: h.Size / 1024, Total: h.Total, Free: h.Free})
		}
		d.Nodes = append(d.Nodes, node)
	}
	return d
}

// deref reads a required id, which validate has checked.
func deref(p *int) int { return *p }

func ptr(v int) *int { return &v }

func cacheID(p *int) int {
	if p == nil {
		return topology.NoCache
	}
	return *p
}

func cachePtr(id int) *int {
	if id == topology.NoCache {
		return nil
	}
	return &id
}
