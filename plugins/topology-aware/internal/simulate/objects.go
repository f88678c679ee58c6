package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/common/kubepod"
)

// Position is where something is written: a file, and a line and column
// in it (from 1).
type Position struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column) }

func positionOf(file string, node *yaml.Node) Position {
	return Position{File: file, Line: node.Line, Column: node.Column}
}

// ObjectKind is the kind of a Kubernetes object a workload creates.
type ObjectKind string

// The kinds a workload can create: pods, and the controllers that run pods
// on a node, which the simulation expands into their pods.
const (
	KindPod         ObjectKind = "Pod"
	KindDeployment  ObjectKind = "Deployment"
	KindStatefulSet ObjectKind = "StatefulSet"
	KindDaemonSet   ObjectKind = "DaemonSet"
	KindReplicaSet  ObjectKind = "ReplicaSet"
)

// objectKinds are the kinds above, with their API version.
var objectKinds = []struct {
	kind       ObjectKind
	apiVersion string
}{
	{KindPod, "v1"}, {KindDeployment, "apps/v1"}, {KindStatefulSet, "apps/v1"},
	{KindDaemonSet, "apps/v1"}, {KindReplicaSet, "apps/v1"},
}

// MaxReplicas bounds the replicas of one object: a simulation holds every
// pod, and a typo of a few digits should be an error, not an exhausted
// memory.
const MaxReplicas = 10000

// Object is a pod, or a controller of pods, as a manifest file or a List
// holds it.
type Object struct {
	Kind            ObjectKind
	Namespace, Name string
	Pos             Position
	// Template is the pod (a Pod's own manifest, a controller's pod
	// template), parsed and defaulted as kubepod.Parse does.
	Template *v1.Pod
	// Replicas is how many pods the object runs on this node: 1 for a Pod
	// and a DaemonSet.
	Replicas int
}

func (o Object) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Pods returns the object's pods. A controller's are named <name>-<n>, n
// from 0: as a StatefulSet names them; Deployments, ReplicaSets and
// DaemonSets add random suffixes, which a simulation replaces with the
// index so that later steps can name the pods.
func (o Object) Pods() []*v1.Pod {
	if o.Kind == KindPod {
		return []*v1.Pod{o.Template}
	}
	pods := make([]*v1.Pod, o.Replicas)
	for i := range pods {
		pods[i] = o.Template.DeepCopy()
		pods[i].Name = fmt.Sprintf("%s-%d", o.Name, i)
	}
	return pods
}

// ParseObjects reads the objects of a manifest file: one or more YAML (or
// JSON) documents, each a Pod, a Deployment, StatefulSet, DaemonSet or
// ReplicaSet (apps/v1), or a List (v1) of those. Every problem is
// reported, each with its position in file; the objects are returned only
// when there is none.
func ParseObjects(data []byte, file string) ([]Object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var objects []Object
	var errs []error
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The decoder cannot go on after a syntax error.
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
			break
		}
		if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
			continue // an empty document, as after a trailing ---
		}
		found, err := parseDocument(doc.Content[0], file)
		objects = append(objects, found...)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(objects) == 0 {
		return nil, fmt.Errorf("%s: no objects: expected a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet or a List of them", file)
	}
	return objects, nil
}

// typeMeta is what every object starts with.
type typeMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

// parseDocument reads one document: an object, or a List of them.
func parseDocument(node *yaml.Node, file string) ([]Object, error) {
	pos := positionOf(file, node)
	var head typeMeta
	if node.Kind != yaml.MappingNode || node.Decode(&head) != nil {
		return nil, fmt.Errorf("%s: expected a Kubernetes object (a mapping with apiVersion and kind)", pos)
	}
	if head.Kind != "List" {
		o, err := parseObject(node, head, pos)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pos, err)
		}
		return []Object{o}, nil
	}
	if head.APIVersion != "v1" {
		return nil, fmt.Errorf("%s: List: apiVersion %q: expected \"v1\"", pos, head.APIVersion)
	}
	var items *yaml.Node
	for i := 0; i+1 < len(node.Content); i += 2 {
		switch key := node.Content[i]; key.Value {
		case "items":
			items = node.Content[i+1]
		case "apiVersion", "kind", "metadata":
		default:
			return nil, fmt.Errorf("%s: List: unknown key %q: expected apiVersion, kind, metadata, items", positionOf(file, key), key.Value)
		}
	}
	if items == nil || items.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: List: items: expected a list of objects", pos)
	}
	var objects []Object
	var errs []error
	for _, item := range items.Content {
		itemPos := positionOf(file, item)
		var itemHead typeMeta
		switch {
		case item.Kind != yaml.MappingNode || item.Decode(&itemHead) != nil:
			errs = append(errs, fmt.Errorf("%s: List item: expected a Kubernetes object (a mapping with apiVersion and kind)", itemPos))
		case itemHead.Kind == "List":
			errs = append(errs, fmt.Errorf("%s: List item: a List in a List: expected %s", itemPos, kindNames()))
		default:
			o, err := parseObject(item, itemHead, itemPos)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", itemPos, err))
				continue
			}
			objects = append(objects, o)
		}
	}
	return objects, errors.Join(errs...)
}

func kindNames() string {
	names := make([]string, len(objectKinds))
	for i, k := range objectKinds {
		names[i] = fmt.Sprintf("%s (%s)", k.kind, k.apiVersion)
	}
	return strings.Join(names, ", ")
}

// parseObject decodes one object strictly, found at pos: an unknown field
// is an error naming it. Its errors leave the position to the caller.
func parseObject(node *yaml.Node, head typeMeta, pos Position) (Object, error) {
	kind := ObjectKind(head.Kind)
	apiVersion := ""
	for _, k := range objectKinds {
		if k.kind == kind {
			apiVersion = k.apiVersion
		}
	}
	if apiVersion == "" {
		return Object{}, fmt.Errorf("kind %q: expected %s, or a List of them", head.Kind, kindNames())
	}
	if head.APIVersion != apiVersion {
		return Object{}, fmt.Errorf("%s: apiVersion %q: expected %q", kind, head.APIVersion, apiVersion)
	}
	data, err := yaml.Marshal(node)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", kind, err)
	}
	o := Object{Kind: kind, Pos: pos, Replicas: 1}
	if kind == KindPod {
		if o.Template, err = kubepod.Parse(data); err != nil {
			return Object{}, err
		}
		o.Namespace, o.Name = o.Template.Namespace, o.Template.Name
		return o, nil
	}
	meta, template, replicas, err := decodeController(kind, data)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", kind, err)
	}
	o.Name, o.Namespace = meta.Name, meta.Namespace
	if o.Namespace == "" {
		o.Namespace = v1.NamespaceDefault
	}
	if o.Name == "" {
		return Object{}, fmt.Errorf("%s: metadata.name is empty: expected a name", kind)
	}
	if replicas != nil {
		if *replicas < 0 || *replicas > MaxReplicas {
			return Object{}, fmt.Errorf("%s: spec.replicas %d: expected 0 to %d", o, *replicas, MaxReplicas)
		}
		o.Replicas = int(*replicas)
	}
	if o.Template, err = templatePod(o, template); err != nil {
		return Object{}, fmt.Errorf("%s: spec.template: %w", o, err)
	}
	return o, nil
}

// decodeController decodes a controller strictly and returns its metadata,
// its pod template and its replicas (nil: the API's default, 1; a
// DaemonSet runs one pod on every node).
func decodeController(kind ObjectKind, data []byte) (metav1.ObjectMeta, v1.PodTemplateSpec, *int32, error) {
	switch kind {
	case KindDeployment:
		var d appsv1.Deployment
		err := sigsyaml.UnmarshalStrict(data, &d)
		return d.ObjectMeta, d.Spec.Template, d.Spec.Replicas, err
	case KindStatefulSet:
		var s appsv1.StatefulSet
		err := sigsyaml.UnmarshalStrict(data, &s)
		return s.ObjectMeta, s.Spec.Template, s.Spec.Replicas, err
	case KindReplicaSet:
		var r appsv1.ReplicaSet
		err := sigsyaml.UnmarshalStrict(data, &r)
		return r.ObjectMeta, r.Spec.Template, r.Spec.Replicas, err
	default: // KindDaemonSet
		var d appsv1.DaemonSet
		err := sigsyaml.UnmarshalStrict(data, &d)
		return d.ObjectMeta, d.Spec.Template, nil, err
	}
}

// templatePod is a controller's pod template as a pod named after the
// controller, parsed and defaulted as a Pod manifest is.
func templatePod(o Object, template v1.PodTemplateSpec) (*v1.Pod, error) {
	pod := v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: o.Namespace,
			Labels: template.Labels, Annotations: template.Annotations,
		},
		Spec: template.Spec,
	}
	data, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	return kubepod.Parse(data)
}
