package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

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
	// Number is the step's position in the list, from 1; Pos is where it
	// is written. Both appear in every error about the step.
	Number int
	Pos    Position
	Kind   StepKind
	Create *Create
	Resize *Resize
	Delete *Delete
}

func (s *Step) String() string { return fmt.Sprintf("step %d (%s)", s.Number, s.Kind) }

// Create creates objects: pods, and controllers whose pods the kubelet of
// this node would run. Each pod's containers start in the order the
// kubelet starts them (init containers run to completion first).
type Create struct {
	// File is the manifest file as written, relative to the workload file;
	// empty for an inline pod.
	File string
	// Objects are the file's (read by Load) or the inline pod.
	Objects []Object
	// Devices are what a lower-index plugin or the runtime gives each
	// container, by container name, in every pod of the step.
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

// Delete deletes an object: a pod, or a controller with every pod of it
// that runs.
type Delete struct {
	Kind ObjectKind
	PodRef
}

func (d Delete) String() string { return fmt.Sprintf("%s %s", d.Kind, d.PodRef) }

// Load reads the workload file at path and the manifest files it names,
// relative to its directory. Every problem is reported, each with its file
// and position.
func Load(path string) (*Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	w, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range w.Steps {
		s := &w.Steps[i]
		if s.Create == nil || s.Create.File == "" {
			continue
		}
		file := filepath.Join(filepath.Dir(path), s.Create.File)
		data, err := os.ReadFile(file)
		if err == nil {
			s.Create.Objects, err = ParseObjects(data, file)
		}
		if err == nil {
			err = checkDeviceOwners(s.Create)
		}
		for _, e := range flatten(err) {
			errs = append(errs, fmt.Errorf("%s: %s: create.file: %w", s.Pos, s, e))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// flatten lists the errors that errors.Join joined, or err alone.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Parse decodes the workload file (named file in errors) strictly: an
// unknown key, a missing field or a value of the wrong kind is an error
// naming its position, the step, the field and what was expected. Every
// step is decoded, and every problem reported. Inline pod manifests are
// parsed as kubepod.Parse does; manifest files are left for Load.
func Parse(data []byte, file string) (*Workload, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty document: expected a mapping with a steps list", file)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: expected one YAML document, found more", file)
	}
	root := doc.Content[0]
	d := &decoder{file: file, what: "workload"}
	fields, err := d.mapping(root, "top level", "steps")
	if err != nil {
		return nil, err
	}
	steps := fields["steps"]
	if steps == nil || steps.Kind != yaml.SequenceNode || len(steps.Content) == 0 {
		return nil, d.errorf(root, "steps: expected a non-empty list of steps")
	}
	w := &Workload{}
	var errs []error
	for i, node := range steps.Content {
		s := Step{Number: i + 1, Pos: positionOf(file, node)}
		if err := s.decode(node, file); err != nil {
			errs = append(errs, err)
		}
		w.Steps = append(w.Steps, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// decoder makes the errors of one part of the workload file: each starts
// with the position of the node at fault and says what it belongs to.
type decoder struct {
	file string
	what string // "step 3 (create)"
}

func (d *decoder) errorf(node *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", positionOf(d.file, node), d.what, fmt.Sprintf(format, args...))
}

// decode reads one step: a mapping with exactly one key, the step's kind.
func (s *Step) decode(node *yaml.Node, file string) error {
	d := &decoder{file: file, what: fmt.Sprintf("step %d", s.Number)}
	if node.Kind != yaml.MappingNode || len(node.Content) != 2 {
		return d.errorf(node, "expected a mapping with exactly one key, the step kind (%s)", kindList())
	}
	key, value := node.Content[0], node.Content[1]
	s.Kind = StepKind(key.Value)
	if !slices.Contains(stepKinds, s.Kind) {
		return d.errorf(key, "unknown step kind %q: expected one of %s", key.Value, kindList())
	}
	d.what = s.String()
	switch s.Kind {
	case StepCreate:
		return s.decodeCreate(d, value)
	case StepResize:
		return s.decodeResize(d, value)
	case StepDelete:
		return s.decodeDelete(d, value)
	}
	return decodeRestart(d, value)
}

func kindList() string {
	names := make([]string, len(stepKinds))
	for i, k := range stepKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (s *Step) decodeCreate(d *decoder, node *yaml.Node) error {
	fields, err := d.mapping(node, "create", "file", "pod", "devices")
	if err != nil {
		return err
	}
	c := &Create{}
	s.Create = c
	file, pod := fields["file"], fields["pod"]
	switch {
	case (file == nil) == (pod == nil):
		return d.errorf(node, "create: expected exactly one of file (a manifest file's path, relative to the workload file) or pod (an inline v1.Pod manifest)")
	case file != nil:
		if c.File, err = d.scalar(file, "create.file"); err != nil {
			return err
		}
		if c.File == "" {
			return d.errorf(file, "create.file: expected a manifest file's path, found an empty string")
		}
	default:
		if pod.Kind != yaml.MappingNode {
			return d.errorf(pod, "create.pod: expected an inline v1.Pod manifest (a mapping)")
		}
		o, err := parseObject(pod, typeMeta{APIVersion: "v1", Kind: string(KindPod)}, positionOf(d.file, pod))
		if err != nil {
			return d.errorf(pod, "create.pod: %v", err)
		}
		c.Objects = []Object{o}
	}
	if devices := fields["devices"]; devices != nil {
		if c.Devices, err = d.devices(devices); err != nil {
			return err
		}
	}
	if c.Objects != nil {
		if err := checkDeviceOwners(c); err != nil {
			return d.errorf(fields["devices"], "%v", err)
		}
	}
	return nil
}

// devices reads container name -> list of devices.
func (d *decoder) devices(node *yaml.Node) (map[string][]DeviceSpec, error) {
	if node.Kind != yaml.MappingNode {
		return nil, d.errorf(node, "create.devices: expected a mapping of container name to a list of devices")
	}
	out := map[string][]DeviceSpec{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, list := node.Content[i], node.Content[i+1]
		name, err := d.scalar(key, "create.devices key")
		if err != nil {
			return nil, err
		}
		field := "create.devices." + name
		if _, dup := out[name]; dup {
			return nil, d.errorf(key, "%s: container named twice: expected each container once", field)
		}
		if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
			return nil, d.errorf(list, "%s: expected a non-empty list of devices", field)
		}
		for j, dev := range list.Content {
			spec, err := d.device(dev, fmt.Sprintf("%s[%d]", field, j))
			if err != nil {
				return nil, err
			}
			out[name] = append(out[name], spec)
		}
	}
	return out, nil
}

// device reads {numa-node: N}, {char: "M:m"} or {block: "M:m"}.
func (d *decoder) device(node *yaml.Node, field string) (DeviceSpec, error) {
	const expected = `exactly one of numa-node (a NUMA node id), char or block (a device node's "major:minor" in the sysfs tree)`
	fields, err := d.mapping(node, field, "numa-node", string(locality.Char), string(locality.Block))
	if err != nil {
		return DeviceSpec{}, err
	}
	if len(fields) != 1 {
		return DeviceSpec{}, d.errorf(node, "%s: expected %s", field, expected)
	}
	var spec DeviceSpec
	if n := fields["numa-node"]; n != nil {
		id, err := d.scalar(n, field+".numa-node")
		if err != nil {
			return spec, err
		}
		v, err := strconv.Atoi(id)
		if err != nil || v < 0 {
			return spec, d.errorf(n, "%s.numa-node: %q: expected a NUMA node id (a non-negative integer)", field, id)
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
		text, err := d.scalar(n, f)
		if err != nil {
			return spec, err
		}
		major, minor, ok := strings.Cut(text, ":")
		spec.Kind = kind
		var errMajor, errMinor error
		spec.Major, errMajor = strconv.ParseInt(major, 10, 64)
		spec.Minor, errMinor = strconv.ParseInt(minor, 10, 64)
		if !ok || errMajor != nil || errMinor != nil || spec.Major < 0 || spec.Minor < 0 {
			return spec, d.errorf(n, `%s: %q: expected a device node's "major:minor", such as "195:0"`, f, text)
		}
	}
	return spec, nil
}

// checkDeviceOwners makes sure every container given devices is a
// container of one of the step's pods.
func checkDeviceOwners(c *Create) error {
	var names []string
	for _, o := range c.Objects {
		for _, list := range [][]v1.Container{o.Template.Spec.InitContainers, o.Template.Spec.Containers} {
			for _, ctr := range list {
				if !slices.Contains(names, ctr.Name) {
					names = append(names, ctr.Name)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Devices)) {
		if !slices.Contains(names, name) {
			return fmt.Errorf("create.devices.%s: no pod of the step has a container %q: expected one of %s",
				name, name, strings.Join(names, ", "))
		}
	}
	return nil
}

func (s *Step) decodeResize(d *decoder, node *yaml.Node) error {
	fields, err := d.mapping(node, "resize", "pod", "namespace", "container", "resources")
	if err != nil {
		return err
	}
	ref, err := d.podRef(node, fields, "resize", "pod")
	s.Resize = &Resize{PodRef: ref}
	if err != nil {
		return err
	}
	c := fields["container"]
	if c == nil {
		return d.errorf(node, "resize.container: missing: expected the name of the container to resize")
	}
	if s.Resize.Container, err = d.scalar(c, "resize.container"); err != nil {
		return err
	}
	res := fields["resources"]
	if res == nil || res.Kind != yaml.MappingNode {
		at := node
		if res != nil {
			at = res
		}
		return d.errorf(at, "resize.resources: expected the container's new resources, with requests and/or limits as in a Pod manifest")
	}
	data, err := yaml.Marshal(res)
	if err != nil {
		return d.errorf(res, "resize.resources: %v", err)
	}
	if err := sigsyaml.UnmarshalStrict(data, &s.Resize.Resources); err != nil {
		return d.errorf(res, "resize.resources: expected requests and/or limits as in a Pod manifest: %v", err)
	}
	return nil
}

// deleteKeys are the keys of a delete step that name what it deletes, by
// kind.
var deleteKeys = []struct {
	key  string
	kind ObjectKind
}{
	{"pod", KindPod}, {"deployment", KindDeployment}, {"statefulset", KindStatefulSet},
	{"daemonset", KindDaemonSet}, {"replicaset", KindReplicaSet},
}

func (s *Step) decodeDelete(d *decoder, node *yaml.Node) error {
	allowed := []string{"namespace"}
	for _, k := range deleteKeys {
		allowed = append(allowed, k.key)
	}
	fields, err := d.mapping(node, "delete", allowed...)
	if err != nil {
		return err
	}
	s.Delete = &Delete{}
	found := 0
	for _, k := range deleteKeys {
		if fields[k.key] != nil {
			found++
			s.Delete.Kind = k.kind
			if s.Delete.PodRef, err = d.podRef(node, fields, "delete", k.key); err != nil {
				return err
			}
		}
	}
	if found != 1 {
		return d.errorf(node, "delete: expected exactly one of %s (the name of what to delete)", keyList(allowed[1:]))
	}
	return nil
}

// podRef reads an object's name (the field key) and namespace (default
// "default") from the fields of a step's mapping node.
func (d *decoder) podRef(node *yaml.Node, fields map[string]*yaml.Node, kind, key string) (PodRef, error) {
	ref := PodRef{Namespace: v1.NamespaceDefault}
	name := fields[key]
	var err error
	if name == nil {
		return ref, d.errorf(node, "%s.%s: missing: expected the %s's name", kind, key, key)
	}
	if ref.Name, err = d.scalar(name, kind+"."+key); err != nil {
		return ref, err
	}
	if ref.Name == "" {
		return ref, d.errorf(name, "%s.%s: expected the %s's name, found an empty string", kind, key, key)
	}
	if ns := fields["namespace"]; ns != nil {
		if ref.Namespace, err = d.scalar(ns, kind+".namespace"); err != nil {
			return ref, err
		}
		if ref.Namespace == "" {
			return ref, d.errorf(ns, "%s.namespace: expected a namespace, found an empty string", kind)
		}
	}
	return ref, nil
}

// decodeRestart accepts "restart:" and "restart: {}": a restart has no
// parameters.
func decodeRestart(d *decoder, node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	_, err := d.mapping(node, "restart")
	return err
}

// mapping checks that node is a mapping whose keys are among allowed, each
// once, and returns key -> value.
func (d *decoder) mapping(node *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, error) {
	if node.Kind != yaml.MappingNode {
		return nil, d.errorf(node, "%s: expected a mapping with keys %s", field, keyList(allowed))
	}
	out := make(map[string]*yaml.Node, len(node.Content)/2)
	for i := 0; i+1 < len(node.Content); i += 2 {
		key := node.Content[i]
		if !slices.Contains(allowed, key.Value) {
			return nil, d.errorf(key, "%s: unknown key %q: expected %s", field, key.Value, keyList(allowed))
		}
		if _, dup := out[key.Value]; dup {
			return nil, d.errorf(key, "%s: key %q given twice: expected it once", field, key.Value)
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
func (d *decoder) scalar(node *yaml.Node, field string) (string, error) {
	if node.Kind != yaml.ScalarNode || node.Tag == "!!null" {
		return "", d.errorf(node, "%s: expected a single value", field)
	}
	return node.Value, nil
}
