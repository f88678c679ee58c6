// Package classes gives each container a block I/O class and an RDT class
// (cache and memory bandwidth): by its pod's QoS class, overridden by its
// namespace, by the kubelet's own class annotations and, strongest, by the
// suite's annotations. The classes are defined in goresctrl's formats and
// applied on the node with github.com/intel/goresctrl; the container gets
// its classes through its NRI adjustment, which the runtime resolves:
// containerd and CRI-O turn a block I/O class into the OCI spec's
// linux.resources.blockIO with their own goresctrl configuration, and an RDT
// class into the spec's linux.intelRdt.closID, the resctrl group this
// package made (see Node).
package classes

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/intel/goresctrl/pkg/blockio"
	"github.com/intel/goresctrl/pkg/rdt"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Kind is a kind of class, also the plugin's configuration key and the
// metrics' kind label.
type Kind string

// The kinds of classes.
const (
	BlockIO Kind = "blockio"
	RDT     Kind = "rdt"
)

// Kinds are the kinds in the order a container's classes are chosen.
var Kinds = []Kind{BlockIO, RDT}

// RootRDTClass is goresctrl's name of the resctrl root group, the class
// every container is in without one: it is always defined, and a container
// given it gets no RDT adjustment.
const RootRDTClass = rdt.RootClassName

// Section is one kind's configuration as written under the plugin's key of
// the same name (blockio, rdt).
type Section struct {
	// Config defines the classes in goresctrl's format of the kind: for
	// blockio the document of a runtime's blockio_config_file (Classes:
	// name -> device parameters), for rdt goresctrl's RDT configuration
	// (options, and partitions with their classes).
	Config yaml.Node `yaml:"config"`
	// QOS names the class of each pod QoS class (Guaranteed, Burstable,
	// BestEffort); one not listed gets none.
	QOS map[string]string `yaml:"qos"`
	// Namespaces names the class of the pods of a namespace: it beats QOS.
	Namespaces map[string]string `yaml:"namespaces"`
}

// Config is the checked configuration of both kinds.
type Config struct {
	BlockIO Rules
	RDT     Rules
	// What goresctrl applies (Node.Apply); nil: no classes of the kind.
	blockio *blockio.Config
	rdt     *rdt.Config
}

// Rules choose one kind's class of a container.
type Rules struct {
	Kind Kind
	// Names are the classes defined, sorted.
	Names []string
	// QOS and Namespaces: see Section.
	QOS        map[k8s.QOSClass]string
	Namespaces map[string]string
	// noPodAnnotation are the RDT classes that goresctrl's
	// kubernetes.denyPodAnnotation keeps from being chosen by annotation.
	noPodAnnotation map[string]bool
}

// Rules returns the rules of kind.
func (c Config) Rules(kind Kind) Rules {
	if kind == BlockIO {
		return c.BlockIO
	}
	return c.RDT
}

// Defined reports whether name is a class of the kind.
func (r Rules) Defined(name string) bool {
	_, ok := slices.BinarySearch(r.Names, name)
	return ok
}

// Parse checks the configuration of both kinds without looking at the node
// (Node.Apply does): goresctrl's documents decoded strictly, class names
// usable in a resctrl group's name and in annotations, and every class the
// qos and namespaces keys name defined.
func Parse(blockIO, rdtSection Section) (Config, error) {
	cfg := Config{}
	var err error
	if cfg.BlockIO, err = blockIO.rules(BlockIO, func(data []byte) ([]string, map[string]bool, error) {
		if err := sigsyaml.UnmarshalStrict(data, &cfg.blockio); err != nil || cfg.blockio == nil {
			return nil, nil, err
		}
		return slices.Collect(maps.Keys(cfg.blockio.Classes)), nil, nil
	}); err != nil {
		return Config{}, err
	}
	if cfg.RDT, err = rdtSection.rules(RDT, func(data []byte) ([]string, map[string]bool, error) {
		if err := sigsyaml.UnmarshalStrict(data, &cfg.rdt); err != nil || cfg.rdt == nil {
			return []string{RootRDTClass}, nil, err
		}
		return rdtClassNames(cfg.rdt)
	}); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// rdtClassNames lists the classes of goresctrl's RDT configuration (the
// root class always), each in one partition only, and those that deny pod
// annotations.
func rdtClassNames(c *rdt.Config) ([]string, map[string]bool, error) {
	names := []string{RootRDTClass}
	partitionOf := map[string]string{}
	deny := map[string]bool{}
	for _, partition := range slices.Sorted(maps.Keys(c.Partitions)) {
		for name, class := range c.Partitions[partition].Classes {
			if other, twice := partitionOf[name]; twice {
				return nil, nil, fmt.Errorf("class %s is in partitions %s and %s: expected each class in one partition",
					quote.Value(name), quote.Value(other), quote.Value(partition))
			}
			partitionOf[name] = partition
			if name != RootRDTClass {
				names = append(names, name)
			}
			if class.Kubernetes.DenyPodAnnotation {
				deny[name] = true
			}
		}
	}
	return names, deny, nil
}

// rules checks the section of kind; decode decodes goresctrl's document and
// returns the classes it defines.
func (s Section) rules(kind Kind, decode func([]byte) ([]string, map[string]bool, error)) (Rules, error) {
	r := Rules{Kind: kind}
	var data []byte
	if s.Config.Kind != 0 {
		var err error
		if data, err = yaml.Marshal(&s.Config); err != nil {
			return r, fmt.Errorf("%s: config (line %d): %w", kind, s.Config.Line, err)
		}
	}
	names, deny, err := decode(data)
	if err != nil {
		// sigs.k8s.io/yaml's wrapping says nothing to whoever wrote the file.
		msg := strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: ")
		return r, fmt.Errorf("%s: config (line %d): expected goresctrl's %s configuration: %s", kind, s.Config.Line, kind, quote.Error(errors.New(msg)))
	}
	for _, name := range names {
		if err := checkClassName(kind, name); err != nil {
			return r, err
		}
	}
	slices.Sort(names)
	r.Names, r.noPodAnnotation = names, deny
	if len(s.QOS) > 0 {
		r.QOS = make(map[k8s.QOSClass]string, len(s.QOS))
	}
	for _, qos := range slices.Sorted(maps.Keys(s.QOS)) {
		switch k8s.QOSClass(qos) {
		case k8s.QOSGuaranteed, k8s.QOSBurstable, k8s.QOSBestEffort:
		default:
			return r, fmt.Errorf("%s: qos: %s: expected a pod QoS class: Guaranteed, Burstable or BestEffort", kind, quote.Value(qos))
		}
		if err := r.checkDefined(fmt.Sprintf("%s: qos: %s", kind, qos), s.QOS[qos]); err != nil {
			return r, err
		}
		r.QOS[k8s.QOSClass(qos)] = s.QOS[qos]
	}
	for _, ns := range slices.Sorted(maps.Keys(s.Namespaces)) {
		if err := k8s.CheckNamespace(string(kind)+": namespaces", ns); err != nil {
			return r, err
		}
		if err := r.checkDefined(fmt.Sprintf("%s: namespaces: %s", kind, ns), s.Namespaces[ns]); err != nil {
			return r, err
		}
	}
	r.Namespaces = s.Namespaces
	return r, nil
}

// checkDefined refuses a class the configuration does not define, naming
// where it was named.
func (r Rules) checkDefined(where, name string) error {
	if r.Defined(name) {
		return nil
	}
	return fmt.Errorf("%s: class %s is not defined: expected %s", where, quote.Value(name), r.describe())
}

// describe says which classes there are, for a message.
func (r Rules) describe() string {
	if len(r.Names) == 0 {
		return fmt.Sprintf("a class of the plugin's %s.config, which defines none", r.Kind)
	}
	quoted := make([]string, len(r.Names))
	for i, n := range r.Names {
		quoted[i] = quote.Value(n)
	}
	return fmt.Sprintf("one of %s (the classes of the plugin's %s.config)", strings.Join(quoted, ", "), r.Kind)
}

// maxClassName bounds a class name: a resctrl group's directory name, and
// a label value.
const maxClassName = 253

// checkClassName refuses a name that could not name a resctrl group (the RDT
// class is the group's directory) or that a metric label and a log line
// would mangle. goresctrl's root class is the one name with a slash.
func checkClassName(kind Kind, name string) error {
	if kind == RDT && name == RootRDTClass {
		return nil
	}
	ok := name != "" && len(name) <= maxClassName && name != "." && name != ".." &&
		!strings.ContainsFunc(name, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) })
	if !ok {
		return fmt.Errorf("%s: config: class name %s: expected 1 to %d printable characters without '/' or spaces", kind, quote.Value(name), maxClassName)
	}
	return nil
}
