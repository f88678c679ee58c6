// Package description reads and writes YAML descriptions of synthetic
// machines: every CPU with explicit core, die, socket, NUMA node and L2/L3
// cache ids; every NUMA node (CPU-less ones included) with its memory,
// hugepages and distances; the isolated CPUs; and PCI devices with their
// device nodes. A description gives the same topology.Topology that sysfs
// discovery gives on the machine it describes, and WriteTree renders it as
// such a sysfs tree.
//
// Decoding is strict (an unknown key is an error) and validated: the errors
// name the CPU, node or device at fault. Example:
//
//	cpus:
//	  - {id: 0, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
//	  - {id: 1, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
//	nodes:
//	  - id: 0
//	    mem-total-kb: 16777216
//	    mem-free-kb: 16000000
//	    hugepages: [{size-kb: 2048, total: 512, free: 512}]
//	    distances: {0: 10}
//	isolated: "1"
//	devices:
//	  - {pci: "0000:3b:00.0", numa-node: 0, char: ["195:0"]}
//
// die defaults to 0; a CPU without l2 or l3 has no known cache at that level.
package description

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Description is a synthetic machine.
type Description struct {
	CPUs     []CPU         `yaml:"cpus"`
	Nodes    []Node        `yaml:"nodes"`
	Isolated cpuset.CPUSet `yaml:"isolated,omitempty"`
	Devices  []Device      `yaml:"devices,omitempty"`
}

// CPU describes one logical CPU. Pointers tell a missing id from id 0.
type CPU struct {
	ID     *int `yaml:"id"`
	Core   *int `yaml:"core"`
	Die    int  `yaml:"die,omitempty"`
	Socket *int `yaml:"socket"`
	Node   *int `yaml:"node"`
	L2     *int `yaml:"l2,omitempty"`
	L3     *int `yaml:"l3,omitempty"`
}

// Node describes one NUMA node.
type Node struct {
	ID         *int        `yaml:"id"`
	MemTotalKB uint64      `yaml:"mem-total-kb"`
	MemFreeKB  uint64      `yaml:"mem-free-kb"`
	HugePages  []HugePages `yaml:"hugepages,omitempty"`
	// Distances to every node, this one included (10).
	Distances map[int]int `yaml:"distances"`
}

// HugePages describes a node's pool of huge pages of one size.
type HugePages struct {
	SizeKB uint64 `yaml:"size-kb"`
	Total  uint64 `yaml:"total"`
	Free   uint64 `yaml:"free"`
}

// Device describes a PCI function and its device nodes ("major:minor").
type Device struct {
	PCI      string   `yaml:"pci"`
	NUMANode int      `yaml:"numa-node"`
	Char     []string `yaml:"char,omitempty,flow"`
	Block    []string `yaml:"block,omitempty,flow"`
}

// Load reads and validates the description in a file.
func Load(path string) (*Description, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load topology description: %w", err)
	}
	d, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load topology description %s: %w", path, err)
	}
	return d, nil
}

// Parse decodes and validates a description.
func Parse(data []byte) (*Description, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	d := &Description{}
	if err := dec.Decode(d); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parse topology description: empty document")
		}
		return nil, fmt.Errorf("parse topology description: %w", err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse topology description: expected one YAML document, found more")
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("invalid topology description: %w", err)
	}
	return d, nil
}

// Marshal renders the description as YAML, one CPU per line.
func (d *Description) Marshal() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode topology description: %w", err)
	}
	flowItems(&doc, "cpus")
	flowItems(&doc, "hugepages")
	flowItems(&doc, "distances")
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode topology description: %w", err)
	}
	return buf.Bytes(), nil
}

// flowItems renders the values under every key named key in flow style, so
// that a 256-CPU machine reads as 256 lines.
func flowItems(n *yaml.Node, key string) {
	for i := 0; i+1 < len(n.Content); i++ {
		if n.Kind == yaml.MappingNode && i%2 == 0 && n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.SequenceNode {
				for _, item := range v.Content {
					item.Style = yaml.FlowStyle
				}
			} else {
				v.Style = yaml.FlowStyle
			}
		}
	}
	for _, c := range n.Content {
		flowItems(c, key)
	}
}
