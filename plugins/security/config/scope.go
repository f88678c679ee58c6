package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Scope is what a setting can be scoped by: a pod's namespace and name, and
// the runtime handler of its RuntimeClass (what NRI carries, not the
// RuntimeClass's name; "" for the runtime's default handler).
type Scope struct {
	Namespace      string
	Pod            string
	RuntimeHandler string
}

// Scoped is a setting that may differ per namespace and per runtime
// handler. The precedence, for a pod: its runtime handler's value, then its
// namespace's, then the default. A handler describes how a pod is isolated
// (a VM for Kata, a user-space kernel for gVisor), which holds whatever the
// namespace, so it is the more specific of the two.
type Scoped[T comparable] struct {
	Default         T
	Namespaces      map[string]T
	RuntimeHandlers map[string]T
}

// For is the value for a pod in s's precedence.
func (s Scoped[T]) For(scope Scope) T {
	if v, ok := s.Explicit(scope); ok {
		return v
	}
	return s.Default
}

// Explicit is the value a pod's runtime handler or namespace sets for it;
// ok is false when only the default applies.
func (s Scoped[T]) Explicit(scope Scope) (value T, ok bool) {
	if v, ok := s.RuntimeHandlers[scope.RuntimeHandler]; ok && scope.RuntimeHandler != "" {
		return v, true
	}
	v, ok := s.Namespaces[scope.Namespace]
	return v, ok
}

// ScopedFile is a scoped setting as YAML: the default under mode, and
// overrides per namespace and per runtime handler; a plain value is the
// default alone ("privileged: refuse").
type ScopedFile struct {
	Mode            string            `yaml:"mode"`
	Namespaces      map[string]string `yaml:"namespaces"`
	RuntimeHandlers map[string]string `yaml:"runtime-handlers"`
}

var scopedKeys = []string{"mode", "namespaces", "runtime-handlers"}

// UnmarshalYAML takes a plain value as the mode, and otherwise decodes the
// mapping as strictly as plugin.DecodeConfig does (a node's Decode alone
// would let unknown keys through).
func (f *ScopedFile) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&f.Mode)
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if key := n.Content[i].Value; !slices.Contains(scopedKeys, key) {
			return fmt.Errorf("line %d: unknown key %s: expected one of %s", n.Content[i].Line, quote.Value(key), strings.Join(scopedKeys, ", "))
		}
	}
	type plain ScopedFile
	return n.Decode((*plain)(f))
}

// vocabulary is the closed set of values of a scoped setting, and the
// value an empty one means.
type vocabulary[T ~string] struct {
	def     T
	allowed []T
}

func (v vocabulary[T]) parse(key, value string) (T, error) {
	return plugin.OneOf(key, value, v.def, v.allowed...)
}

func (v vocabulary[T]) String() string {
	names := make([]string, len(v.allowed))
	for i, a := range v.allowed {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// parseScoped checks f, found under key, against the values of v; handlers
// are the runtime handlers the file declares.
func parseScoped[T ~string](f ScopedFile, key string, handlers []string, v vocabulary[T]) (Scoped[T], error) {
	out := Scoped[T]{Namespaces: map[string]T{}, RuntimeHandlers: map[string]T{}}
	var err error
	if out.Default, err = v.parse(key+".mode", f.Mode); err != nil {
		return out, err
	}
	overrides := []struct {
		key   string
		from  map[string]string
		into  map[string]T
		check func(key, name string) error
	}{
		{key + ".namespaces", f.Namespaces, out.Namespaces, k8s.CheckNamespace},
		{key + ".runtime-handlers", f.RuntimeHandlers, out.RuntimeHandlers, declaredHandler(handlers)},
	}
	for _, o := range overrides {
		for _, name := range slices.Sorted(maps.Keys(o.from)) {
			if err := o.check(o.key, name); err != nil {
				return out, err
			}
			if o.from[name] == "" {
				return out, fmt.Errorf("%s.%s: empty value: expected one of %s", o.key, name, v)
			}
			if o.into[name], err = v.parse(o.key+"."+name, o.from[name]); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// Selector picks pods by namespace, by namespace/name, or by runtime handler.
type Selector struct {
	Namespaces      []string `yaml:"namespaces"`
	Pods            []string `yaml:"pods"`
	RuntimeHandlers []string `yaml:"runtime-handlers"`
}

func (s Selector) check(key string, handlers []string) error {
	for _, ns := range s.Namespaces {
		if err := k8s.CheckNamespace(key+".namespaces", ns); err != nil {
			return err
		}
	}
	for _, p := range s.Pods {
		ns, name, ok := strings.Cut(p, "/")
		if !ok || !k8s.IsDNSLabel(ns) || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("%s.pods: %s: expected namespace/name", key, quote.Value(p))
		}
	}
	for _, h := range s.RuntimeHandlers {
		if err := declaredHandler(handlers)(key+".runtime-handlers", h); err != nil {
			return err
		}
	}
	return nil
}

// Matches reports whether s selects the pod.
func (s Selector) Matches(scope Scope) bool {
	return slices.Contains(s.Namespaces, scope.Namespace) || slices.Contains(s.Pods, scope.Namespace+"/"+scope.Pod) ||
		scope.RuntimeHandler != "" && slices.Contains(s.RuntimeHandlers, scope.RuntimeHandler)
}
