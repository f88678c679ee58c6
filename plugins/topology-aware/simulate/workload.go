package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	v1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

// StepKind names what a step does.
type StepKind string

// The step kinds, spelled as the workload file's keys.
const (
	StepCreate  StepKind = "create"
	StepResize  StepKind = "resize"
	StepDelete  StepKind = "delete"
	StepRestart StepKind = "restart"
)

var stepKinds = []StepKind{StepCreate, StepResize, StepDelete, StepRestart}

// Workload is an ordered list of steps.
type Workload struct {
	Steps []Step
}

// Step is one event of the workload; exactly one of Create, Resize and
// Delete is set, or none for a restart.
type Step struct {
	// Number is the step's position, from 1; Line is where it starts in the
	// workload file. Both appear in every error about the step.
	Number int
	Line   int
	Kind   StepKind
	Create *Create
	Resize *Resize
	Delete *PodRef
}

// Create creates a pod: its containers in the order the kubelet starts
// them (init containers run to completion first).
type Create struct {
	// File is the manifest's path as written, relative to the workload
	// file; empty for an inline manifest.
	File string
	// Manifest is the parsed pod (inline, or read from File by Load).
	Manifest *v1.Pod
	// Devices are what a lower-index plugin or the runtime gives each
	// container, by container name.
	Devices map[string][]DeviceSpec
}

// DeviceSpec is a device a container gets: either a device node of the
// machine's sysfs tree, located by major:minor as the plugin locates the
// devices it sees, or a device that is only known to sit on a NUMA node (as
// device-injector reports the CDI devices it injects).
type DeviceSpec struct {
	// NUMANode, when set, is the node of a device NRI does not show.
	NUMANode *int
	// Kind, Major and Minor name a device node otherwise.
	Kind         locality.Kind
	Major, Minor int64
}

func (d DeviceSpec) String() string {
	if d.NUMANode != nil {
		return fmt.Sprintf("numa-node %d", *d.NUMANode)
	}
	return fmt.Sprintf("%s %d:%d", d.Kind, d.Major, d.Minor)
}

// Resize resizes a container in place to new requests and limits, as a
// Kubernetes in-place resize (the resize subresource) does.
type Resize struct {
	PodRef
	Container string
	Resources v1.ResourceRequirements
}

// PodRef names a pod.
type PodRef struct {
	Namespace string
	Name      string
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// Load reads the workload file at path, parses it and reads the pod
// manifests it names, relative to its directory.
func Load(path string) (*Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	w, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range w.Steps {
		s := &w.Steps[i]
		if s.Create == nil || s.Create.Manifest != nil {
			continue
		}
		pod, err := kubepod.LoadFile(filepath.Join(dir, s.Create.File))
		if err != nil {
			return nil, fmt.Errorf("workload %s: %s: create.file: %w", path, s, err)
		}
		s.Create.Manifest = pod
		if err := checkDeviceOwners(s.Create); err != nil {
			return nil, fmt.Errorf("workload %s: %s: %w", path, s, err)
		}
	}
	return w, nil
}

func (s *Step) String() string {
	return fmt.Sprintf("step %d (line %d)", s.Number, s.Line)
}

// Parse decodes a workload strictly: an unknown key, a missing field or a
// value of the wrong kind is an error naming the step, the field and what
// was expected. Inline pod manifests are parsed as kubepod.Parse does;
// manifests named by file are left for Load.
func Parse(data []byte) (*Workload, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parse workload: empty document: expected a mapping with a steps list")
		}
		return nil, fmt.Errorf("parse workload: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse workload: expected one YAML document, found more")
	}
	root := doc.Content[0]
	fields, err := mapping(root, "the workload", "steps")
	if err != nil {
		return nil, fmt.Errorf("parse workload: %w", err)
	}
	steps := fields["steps"]
	if steps == nil || steps.Kind != yaml.SequenceNode || len(steps.Content) == 0 {
		return nil, fmt.Errorf("parse workload: line %d: steps: expected a non-empty list of steps", root.Line)
	}
	w := &Workload{}
	for i, node := range steps.Content {
		s := Step{Number: i + 1, Line: node.Line}
		if err := s.decode(node); err != nil {
			return nil, fmt.Errorf("parse workload: %s: %w", &s, err)
		}
		w.Steps = append(w.Steps, s)
	}
	return w, nil
}

// decode reads one step: a mapping with exactly one key, the step's kind.
func (s *Step) decode(node *yaml.Node) error {
	if node.Kind != yaml.MappingNode || len(node.Content) != 2 {
		return fmt.Errorf("expected a mapping with exactly one key, the step kind (%s)", kindList())
	}
	key, value := node.Content[0], node.Content[1]
	s.Kind = StepKind(key.Value)
	switch s.Kind {
	case StepCreate:
		return s.decodeCreate(value)
	case StepResize:
		return s.decodeResize(value)
	case StepDelete:
		fields, err := mapping(value, "delete", "pod", "namespace")
		if err != nil {
			return err
		}
		ref, err := podRef(value, fields, "delete")
		s.Delete = &ref
		return err
	case StepRestart:
		return decodeRestart(value)
	}
	return fmt.Errorf("unknown step kind %q: expected one of %s", key.Value, kindList())
}

func kindList() string {
	names := make([]string, len(stepKinds))
	for i, k := range stepKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (s *Step) decodeCreate(node *yaml.Node) error {
	fields, err := mapping(node, "create", "file", "pod", "devices")
	if err != nil {
		return err
	}
	c := &Create{}
	s.Create = c
	file, pod := fields["file"], fields["pod"]
	switch {
	case (file == nil) == (pod == nil):
		return fmt.Errorf("line %d: create: expected exactly one of file (a pod manifest's path, relative to the workload file) or pod (an inline v1.Pod manifest)", node.Line)
	case file != nil:
		if c.File, err = scalar(file, "create.file"); err != nil {
			return err
		}
		if c.File == "" {
			return fmt.Errorf("line %d: create.file: expected a pod manifest's path, found an empty string", file.Line)
		}
	default:
		if c.Manifest, err = decodeManifest(pod); err != nil {
			return err
		}
	}
	if devices := fields["devices"]; devices != nil {
		if c.Devices, err = decodeDevices(devices); err != nil {
			return err
		}
	}
	if c.Manifest != nil {
		return checkDeviceOwners(c)
	}
	return nil
}

// decodeManifest parses an inline manifest with the pod decoder of the
// harness and the real-node tests (kubepod.Parse).
func decodeManifest(node *yaml.Node) (*v1.Pod, error) {
	if node.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: create.pod: expected an inline v1.Pod manifest (a mapping)", node.Line)
	}
	data, err := yaml.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("line %d: create.pod: %w", node.Line, err)
	}
	pod, err := kubepod.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("line %d: create.pod: %w", node.Line, err)
	}
	return pod, nil
}

// decodeDevices reads container name -> list of devices.
func decodeDevices(node *yaml.Node) (map[string][]DeviceSpec, error) {
	if node.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: create.devices: expected a mapping of container name to a list of devices", node.Line)
	}
	out := map[string][]DeviceSpec{}
	for i := 0; i < len(node.Content); i += 2 {
		key, list := node.Content[i], node.Content[i+1]
		name, err := scalar(key, "create.devices key")
		if err != nil {
			return nil, err
		}
		field := "create.devices." + name
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("line %d: %s: container named twice: expected each container once", key.Line, field)
		}
		if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
			return nil, fmt.Errorf("line %d: %s: expected a non-empty list of devices", list.Line, field)
		}
		for j, d := range list.Content {
			spec, err := decodeDevice(d, fmt.Sprintf("%s[%d]", field, j))
			if err != nil {
				return nil, err
			}
			out[name] = append(out[name], spec)
		}
	}
	return out, nil
}

// decodeDevice reads {numa-node: N}, {char: "M:m"} or {block: "M:m"}.
func decodeDevice(node *yaml.Node, field string) (DeviceSpec, error) {
	const expected = `exactly one of numa-node (a NUMA node id), char or block (a device node's "major:minor" in the sysfs tree)`
	fields, err := mapping(node, field, "numa-node", string(locality.Char), string(locality.Block))
	if err != nil {
		return DeviceSpec{}, err
	}
	if len(fields) != 1 {
		return DeviceSpec{}, fmt.Errorf("line %d: %s: expected %s", node.Line, field, expected)
	}
	var spec DeviceSpec
	if n := fields["numa-node"]; n != nil {
		id, err := scalar(n, field+".numa-node")
		if err != nil {
			return spec, err
		}
		v, err := strconv.Atoi(id)
		if err != nil || v < 0 {
			return spec, fmt.Errorf("line %d: %s.numa-node: %q: expected a NUMA node id (a non-negative integer)", n.Line, field, id)
		}
		spec.NUMANode = &v
		return spec, nil
	}
	for _, kind := range []locality.Kind{locality.Char, locality.Block} {
		n := fields[string(kind)]
		if n == nil {
			continue
		}
		f := field + "." + string(kind)
		text, err := scalar(n, f)
		if err != nil {
			return spec, err
		}
		major, minor, ok := strings.Cut(text, ":")
		spec.Kind = kind
		var errMajor, errMinor error
		spec.Major, errMajor = strconv.ParseInt(major, 10, 64)
		spec.Minor, errMinor = strconv.ParseInt(minor, 10, 64)
		if !ok || errMajor != nil || errMinor != nil || spec.Major < 0 || spec.Minor < 0 {
			return spec, fmt.Errorf(`line %d: %s: %q: expected a device node's "major:minor", such as "195:0"`, n.Line, f, text)
		}
	}
	return spec, nil
}

// checkDeviceOwners makes sure every container given devices is one of the
// pod's.
func checkDeviceOwners(c *Create) error {
	var names []string
	for _, list := range [][]v1.Container{c.Manifest.Spec.InitContainers, c.Manifest.Spec.Containers} {
		for _, ctr := range list {
			names = append(names, ctr.Name)
		}
	}
	for name := range c.Devices {
		if !slices.Contains(names, name) {
			return fmt.Errorf("create.devices.%s: pod %s has no container %q: expected one of %s",
				name, c.Manifest.Name, name, strings.Join(names, ", "))
		}
	}
	return nil
}

func (s *Step) decodeResize(node *yaml.Node) error {
	fields, err := mapping(node, "resize", "pod", "namespace", "container", "resources")
	if err != nil {
		return err
	}
	ref, err := podRef(node, fields, "resize")
	s.Resize = &Resize{PodRef: ref}
	if err != nil {
		return err
	}
	c := fields["container"]
	if c == nil {
		return fmt.Errorf("line %d: resize.container: missing: expected the name of the container to resize", node.Line)
	}
	if s.Resize.Container, err = scalar(c, "resize.container"); err != nil {
		return err
	}
	res := fields["resources"]
	if res == nil || res.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: resize.resources: expected the container's new resources, with requests and/or limits as in a Pod manifest", node.Line)
	}
	data, err := yaml.Marshal(res)
	if err != nil {
		return fmt.Errorf("line %d: resize.resources: %w", res.Line, err)
	}
	if err := sigsyaml.UnmarshalStrict(data, &s.Resize.Resources); err != nil {
		return fmt.Errorf("line %d: resize.resources: expected requests and/or limits as in a Pod manifest: %w", res.Line, err)
	}
	return nil
}

// podRef reads the pod's name and namespace (default "default") from the
// fields of a step's mapping node.
func podRef(node *yaml.Node, fields map[string]*yaml.Node, kind string) (PodRef, error) {
	ref := PodRef{Namespace: v1.NamespaceDefault}
	pod := fields["pod"]
	var err error
	if pod == nil {
		return ref, fmt.Errorf("line %d: %s.pod: missing: expected the pod's name", node.Line, kind)
	}
	if ref.Name, err = scalar(pod, kind+".pod"); err != nil {
		return ref, err
	}
	if ref.Name == "" {
		return ref, fmt.Errorf("line %d: %s.pod: expected the pod's name, found an empty string", pod.Line, kind)
	}
	if ns := fields["namespace"]; ns != nil {
		if ref.Namespace, err = scalar(ns, kind+".namespace"); err != nil {
			return ref, err
		}
		if ref.Namespace == "" {
			return ref, fmt.Errorf("line %d: %s.namespace: expected a namespace, found an empty string", ns.Line, kind)
		}
	}
	return ref, nil
}

// decodeRestart accepts "restart:" and "restart: {}": a restart has no
// parameters.
func decodeRestart(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	if _, err := mapping(node, "restart"); err != nil {
		return err
	}
	return nil
}

// mapping checks that node is a mapping whose keys are among allowed, each
// once, and returns key -> value.
func mapping(node *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, error) {
	if node.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: %s: expected a mapping with keys %s", node.Line, field, keyList(allowed))
	}
	out := make(map[string]*yaml.Node, len(node.Content)/2)
	for i := 0; i < len(node.Content); i += 2 {
		key := node.Content[i]
		if !slices.Contains(allowed, key.Value) {
			return nil, fmt.Errorf("line %d: %s: unknown key %q: expected %s", key.Line, field, key.Value, keyList(allowed))
		}
		if _, dup := out[key.Value]; dup {
			return nil, fmt.Errorf("line %d: %s: key %q given twice: expected it once", key.Line, field, key.Value)
		}
		out[key.Value] = node.Content[i+1]
	}
	return out, nil
}

func keyList(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// scalar returns the text of a scalar node.
func scalar(node *yaml.Node, field string) (string, error) {
	if node.Kind != yaml.ScalarNode || node.Tag == "!!null" {
		return "", fmt.Errorf("line %d: %s: expected a single value", node.Line, field)
	}
	return node.Value, nil
}
