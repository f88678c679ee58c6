// Package config turns the topology-aware plugin's YAML configuration into a
// policy.Config: decoded strictly (an unknown key is an error naming it),
// every value checked on its own here, and the whole checked against the
// machine by policy.New (reserved CPUs outside the available ones, options
// that exclude each other, nodes that do not exist, ...).
//
// The keys, their defaults and examples are documented in the plugin's
// README.md; File below is the authoritative list.
package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// DefaultReservedNamespaces run on the reserved CPUs unless configured
// otherwise, as the kubelet's reserved-cpus serve system daemons.
var DefaultReservedNamespaces = []string{"kube-system"}

// The plugin's names of the options key, each switching on one
// policy.Config flag.
const (
	OptionFullPCPUsOnly        = "full-pcpus-only"
	OptionDistributeAcrossNUMA = "distribute-across-numa"
	OptionSpreadAcrossCores    = "spread-across-cores"
	OptionAlignByUncoreCache   = "align-by-uncore-cache"
	OptionAlignBySocket        = "align-by-socket"
	OptionStrictReservation    = "strict-reservation"
	OptionKubeletPacking       = "kubelet-packing"
	OptionPreferClosestNUMA    = "prefer-closest-numa-nodes"
	// OptionMaxAllowableNUMANodes takes a number, so only in the mapping
	// form of options (or as the key of the same name).
	OptionMaxAllowableNUMANodes = "max-allowable-numa-nodes"
)

// options maps every option name to the flag it sets.
var options = map[string]func(*policy.Config){
	OptionFullPCPUsOnly:        func(c *policy.Config) { c.FullPCPUsOnly = true },
	OptionDistributeAcrossNUMA: func(c *policy.Config) { c.DistributeAcrossNUMA = true },
	OptionSpreadAcrossCores:    func(c *policy.Config) { c.SpreadAcrossCores = true },
	OptionAlignByUncoreCache:   func(c *policy.Config) { c.AlignByUncoreCache = true },
	OptionAlignBySocket:        func(c *policy.Config) { c.AlignBySocket = true },
	OptionStrictReservation:    func(c *policy.Config) { c.StrictReservation = true },
	OptionKubeletPacking:       func(c *policy.Config) { c.KubeletPacking = true },
	OptionPreferClosestNUMA:    func(c *policy.Config) { c.PreferClosestNUMA = true },
}

// KubeletAliases are the kubelet's names (cpuManagerPolicyOptions,
// topologyManagerPolicyOptions) of the plugin's options, where they differ.
var KubeletAliases = map[string]string{
	"distribute-cpus-across-numa":      OptionDistributeAcrossNUMA,
	"distribute-cpus-across-cores":     OptionSpreadAcrossCores,
	"prefer-align-cpus-by-uncorecache": OptionAlignByUncoreCache,
	"strict-cpu-reservation":           OptionStrictReservation,
}

// Options lists the plugin's option names, sorted.
func Options() []string {
	names := append(slices.Collect(maps.Keys(options)), OptionMaxAllowableNUMANodes)
	slices.Sort(names)
	return names
}

// File is the YAML document, key by key.
type File struct {
	// AvailableCPUs limits the CPUs the plugin hands out (kernel list
	// syntax, "0-63"); empty: every online CPU.
	AvailableCPUs CPUList `yaml:"available-cpus"`
	// ReservedCPUs are the reserved CPUs by id ("0,32"). Exclusive with
	// ReservedCPUCount: a bare "2" would otherwise be ambiguous between
	// "CPU 2" and "two CPUs".
	ReservedCPUs CPUList `yaml:"reserved-cpus"`
	// ReservedCPUCount reserves this many CPUs, chosen topology-first from
	// the lowest ids, like the kubelet's --kube-reserved cpu.
	ReservedCPUCount int `yaml:"reserved-cpu-count"`
	// ReservedNamespaces are the namespaces whose pods run on the reserved
	// CPUs. Default: kube-system; an empty list means none.
	ReservedNamespaces []string `yaml:"reserved-namespaces"`
	// Options switch on allocation options by name (see Options and
	// KubeletAliases): a list, or a mapping of names to values as the
	// kubelet's policy options are written.
	Options OptionSet `yaml:"options"`
	// MaxAllowableNUMANodes is the Topology Manager's
	// max-allowable-numa-nodes: 0 means the kubelet's default, 8.
	MaxAllowableNUMANodes int `yaml:"max-allowable-numa-nodes"`
	// ReservedNamespacesGuaranteed says where a Guaranteed container with
	// an integer CPU request of a reserved namespace goes: exclusive
	// (default), reserved or reserved-allow-fewer.
	ReservedNamespacesGuaranteed string `yaml:"reserved-namespaces-guaranteed"`
	// TopologyPolicy is the Topology Manager policy: none (default),
	// best-effort, restricted or single-numa-node.
	TopologyPolicy string `yaml:"topology-policy"`
	// TopologyScope is container (default) or pod.
	TopologyScope string `yaml:"topology-scope"`
	// PreferClosestNUMANodes prefers, among equally narrow NUMA affinities,
	// the one whose nodes are closest by distance.
	PreferClosestNUMANodes bool `yaml:"prefer-closest-numa-nodes"`
	// ReservedMemory keeps memory back from the Memory Manager's accounting
	// per NUMA node: node id -> quantity ("1Gi").
	ReservedMemory map[string]string `yaml:"reserved-memory"`
	// StateDir is the checkpoint's directory; it wins over --state-dir,
	// which a pre-registered plugin cannot be given.
	StateDir string `yaml:"state-dir"`
	// BlockIO and RDT define the block I/O and RDT classes in goresctrl's
	// formats and choose each container's (package classes).
	BlockIO classes.Section `yaml:"blockio"`
	RDT     classes.Section `yaml:"rdt"`
}

// Config is the checked configuration: the policy's, where the plugin
// keeps its checkpoint (empty: where --state-dir says), and the classes.
type Config struct {
	policy.Config
	StateDir string
	Classes  classes.Config
}

// CPUList is a CPU list in kernel syntax. It must be written as a YAML
// string when it is a single id: `reserved-cpus: 2` is refused because
// people write it meaning "two CPUs" (that is reserved-cpu-count).
type CPUList struct {
	Set cpuset.CPUSet
	raw string
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *CPUList) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a CPU list such as \"0-3,8\", got a YAML %s", node.Line, kindName(node.Kind))
	}
	if node.Tag == "!!int" {
		return fmt.Errorf("line %d: %s is a YAML number: write it quoted (%s) for CPU %s, or use reserved-cpu-count for a number of CPUs",
			node.Line, quote.Bare(node.Value), quote.Value(node.Value), quote.Bare(node.Value))
	}
	set, err := cpuset.Parse(node.Value)
	if err != nil {
		return fmt.Errorf("line %d: expected a CPU list such as \"0-3,8\": %w", node.Line, err)
	}
	l.Set, l.raw = set, node.Value
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	default:
		return "document"
	}
}

// Defaults returns the File that an empty configuration means.
func Defaults() File {
	return File{ReservedNamespaces: slices.Clone(DefaultReservedNamespaces)}
}

// Parse decodes data (from source, for messages) strictly over the defaults
// and checks every value on its own. It does not know the machine: Load does.
func Parse(data []byte, source string) (Config, error) {
	f := Defaults()
	if err := plugin.DecodeConfig(data, source, &f); err != nil {
		return Config{}, err
	}
	cfg, err := f.policyConfig()
	if err == nil && f.StateDir != "" {
		err = plugin.CheckPath("state-dir", f.StateDir)
	}
	var cls classes.Config
	if err == nil {
		cls, err = classes.Parse(f.BlockIO, f.RDT)
	}
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", source, err)
	}
	return Config{Config: cfg, StateDir: f.StateDir, Classes: cls}, nil
}

// Load is Parse followed by the policy's own validation against t.
func Load(data []byte, source string, t *topology.Topology) (Config, error) {
	cfg, err := Parse(data, source)
	if err != nil {
		return Config{}, err
	}
	if _, err := policy.New(t, cfg.Config); err != nil {
		// The policy quotes CPU lists whole: a sparse list of every even
		// CPU runs to kilobytes.
		return Config{}, fmt.Errorf("config %s: %w", source, quote.Error(err))
	}
	return cfg, nil
}

// policyConfig checks each key and builds the policy's configuration.
func (f File) policyConfig() (policy.Config, error) {
	cfg := policy.Config{
		AvailableCPUs:      f.AvailableCPUs.Set,
		ReservedCPUs:       f.ReservedCPUs.Set,
		ReservedCPUCount:   f.ReservedCPUCount,
		PreferClosestNUMA:  f.PreferClosestNUMANodes,
		ReservedNamespaces: f.ReservedNamespaces,
	}
	if f.ReservedCPUCount < 0 {
		return cfg, fmt.Errorf("reserved-cpu-count: %d: expected a number of CPUs >= 0", f.ReservedCPUCount)
	}
	if f.ReservedCPUCount > 0 && !f.ReservedCPUs.Set.IsEmpty() {
		return cfg, fmt.Errorf("reserved-cpus %s and reserved-cpu-count %d are both set: expected one of them",
			quote.Value(f.ReservedCPUs.raw), f.ReservedCPUCount)
	}
	seen := map[string]bool{}
	for _, ns := range f.ReservedNamespaces {
		if err := k8s.CheckNamespace("reserved-namespaces", ns); err != nil {
			return cfg, err
		}
		if seen[ns] {
			return cfg, fmt.Errorf("reserved-namespaces: %s is listed twice", quote.Value(ns))
		}
		seen[ns] = true
	}
	if err := f.Options.apply(&cfg); err != nil {
		return cfg, err
	}
	if f.MaxAllowableNUMANodes != 0 {
		if cfg.MaxAllowableNUMANodes != 0 {
			return cfg, fmt.Errorf("max-allowable-numa-nodes is set both as a key (%d) and as an option (%d): expected one of them",
				f.MaxAllowableNUMANodes, cfg.MaxAllowableNUMANodes)
		}
		cfg.MaxAllowableNUMANodes = f.MaxAllowableNUMANodes
	}
	if cfg.MaxAllowableNUMANodes != 0 && cfg.MaxAllowableNUMANodes < policy.DefaultMaxAllowableNUMANodes {
		return cfg, fmt.Errorf("max-allowable-numa-nodes: %d: expected at least %d, as the kubelet",
			cfg.MaxAllowableNUMANodes, policy.DefaultMaxAllowableNUMANodes)
	}
	var err error
	if cfg.ReservedGuaranteed, err = plugin.OneOf("reserved-namespaces-guaranteed", f.ReservedNamespacesGuaranteed,
		policy.ReservedGuaranteedExclusive, policy.ReservedGuaranteedExclusive, policy.ReservedGuaranteedReserved,
		policy.ReservedGuaranteedAllowFewer); err != nil {
		return cfg, err
	}
	if cfg.TopologyPolicy, err = plugin.OneOf("topology-policy", f.TopologyPolicy, policy.TopologyNone,
		policy.TopologyNone, policy.TopologyBestEffort, policy.TopologyRestricted, policy.TopologySingleNUMANode); err != nil {
		return cfg, err
	}
	if cfg.TopologyScope, err = plugin.OneOf("topology-scope", f.TopologyScope, policy.ScopeContainer,
		policy.ScopeContainer, policy.ScopePod); err != nil {
		return cfg, err
	}
	if cfg.ReservedMemory, err = reservedMemory(f.ReservedMemory); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// OptionSet is the options key as written: a YAML list of names, or a
// mapping of names to values, the form of the kubelet's
// cpuManagerPolicyOptions and topologyManagerPolicyOptions ("true" or
// "false", a number for max-allowable-numa-nodes).
type OptionSet struct {
	entries []optionEntry
}

type optionEntry struct {
	name, value string
	mapped      bool // written in the mapping form, with a value
	line        int
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (o *OptionSet) UnmarshalYAML(node *yaml.Node) error {
	scalar := func(n *yaml.Node, what string) (string, error) {
		if n.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("line %d: options: expected %s, got a YAML %s", n.Line, what, kindName(n.Kind))
		}
		return n.Value, nil
	}
	o.entries = nil
	switch node.Kind {
	case yaml.SequenceNode:
		for _, item := range node.Content {
			name, err := scalar(item, "an option name")
			if err != nil {
				return err
			}
			o.entries = append(o.entries, optionEntry{name: name, line: item.Line})
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			name, err := scalar(node.Content[i], "an option name")
			if err != nil {
				return err
			}
			value, err := scalar(node.Content[i+1], "the option's value (\"true\", \"false\" or a number)")
			if err != nil {
				return err
			}
			o.entries = append(o.entries, optionEntry{name: name, value: value, mapped: true, line: node.Content[i].Line})
		}
	default:
		return fmt.Errorf("line %d: options: expected a list of option names or a mapping of names to values, got a YAML %s",
			node.Line, kindName(node.Kind))
	}
	return nil
}

// apply sets what the options say in cfg, each named once by either name.
func (o OptionSet) apply(cfg *policy.Config) error {
	seen := map[string]string{} // the plugin's name -> the name it was given as
	for _, e := range o.entries {
		name, alias := e.name, ""
		if own, ok := KubeletAliases[name]; ok {
			name, alias = own, name
		}
		set, known := options[name]
		if !known && name != OptionMaxAllowableNUMANodes {
			return fmt.Errorf("options: line %d: unknown option %s: expected any of %s, or the kubelet's %s",
				e.line, quote.Value(e.name), strings.Join(Options(), ", "), strings.Join(slices.Sorted(maps.Keys(KubeletAliases)), ", "))
		}
		if first, twice := seen[name]; twice {
			return fmt.Errorf("options: line %d: %s is listed twice (as %s and as %s)", e.line, quote.Value(name), quote.Value(first), quote.Value(e.name))
		}
		seen[name] = e.name
		if alias != "" {
			e.name = fmt.Sprintf("%s (the kubelet's name of %s)", alias, name)
		}
		if name == OptionMaxAllowableNUMANodes {
			n, err := strconv.Atoi(e.value)
			if err != nil || n <= 0 {
				return fmt.Errorf("options: line %d: %s: %s: expected a number of NUMA nodes, in the mapping form (%s: \"16\")",
					e.line, OptionMaxAllowableNUMANodes, quote.Value(e.value), OptionMaxAllowableNUMANodes)
			}
			cfg.MaxAllowableNUMANodes = n
			continue
		}
		on := true
		if e.mapped {
			var err error
			if on, err = strconv.ParseBool(e.value); err != nil {
				return fmt.Errorf("options: line %d: %s: %s: expected \"true\" or \"false\"", e.line, e.name, quote.Value(e.value))
			}
		}
		if on {
			set(cfg)
		}
	}
	return nil
}

// reservedMemory parses node id -> quantity.
func reservedMemory(in map[string]string) (map[int]uint64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[int]uint64, len(in))
	for key, value := range in {
		node, err := strconv.Atoi(key)
		if err != nil || node < 0 {
			return nil, fmt.Errorf("reserved-memory: key %s: expected a NUMA node id (0, 1, ...)", quote.Value(key))
		}
		q, err := k8s.ParseQuantity(value)
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("reserved-memory: node %d: %s: expected a non-negative quantity such as 512Mi or 2Gi", node, quote.Value(value))
		}
		bytes, ok := q.AsInt64()
		if !ok {
			return nil, fmt.Errorf("reserved-memory: node %d: %s: expected a whole number of bytes below 8Ei", node, quote.Value(value))
		}
		out[node] = uint64(bytes)
	}
	return out, nil
}
