package config

import (
	"fmt"
	"maps"
	"path"
	"slices"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/security/internal/seccomp"
)

// Privileged is what the seccomp rule does to a privileged container.
type Privileged string

const (
	// PrivilegedUnconfined leaves it unconfined, as containerd, CRI-O and
	// the kubelet's seccompDefault do: privileged workloads (CNI and CSI
	// agents, storage, eBPF) mount and load what they need.
	PrivilegedUnconfined Privileged = "unconfined"
	// PrivilegedProfile gives it a profile like any other container.
	PrivilegedProfile Privileged = "profile"
	// PrivilegedRefuse refuses it.
	PrivilegedRefuse Privileged = "refuse"
)

var privilegedValues = vocabulary[Privileged]{def: PrivilegedUnconfined,
	allowed: []Privileged{PrivilegedUnconfined, PrivilegedProfile, PrivilegedRefuse}}

// SeccompFile is the seccomp key.
type SeccompFile struct {
	// ProfileDir holds the named profiles (<name>.json); empty: no named
	// profiles, only the runtime default.
	ProfileDir string `yaml:"profile-dir"`
	// Exempt pods keep running unconfined when they ask for it.
	Exempt Selector `yaml:"exempt"`
	// Complain pods get their profile with the log action instead of errors.
	Complain Selector `yaml:"complain"`
	// ExtraRules are merged into every profile the plugin applies; they are
	// checked when the seccomp store is built from them (Configure).
	ExtraRules []seccomp.Rule `yaml:"extra-rules"`
	// Privileged says what privileged containers get, per scope.
	Privileged ScopedFile `yaml:"privileged"`
	// NamespaceProfiles, when set, says which profiles (path.Match
	// patterns of names) the pods of a namespace may name by annotation;
	// the key "*" applies to every namespace. Unset: any namespace may name
	// any profile of the directory.
	NamespaceProfiles map[string][]string `yaml:"namespace-profiles"`
}

// Seccomp is the checked seccomp configuration.
type Seccomp struct {
	SeccompFile
	Privileged Scoped[Privileged]
}

func (s SeccompFile) check(handlers []string) (Seccomp, error) {
	out := Seccomp{SeccompFile: s}
	if s.ProfileDir != "" {
		if err := plugin.CheckPath("seccomp.profile-dir", s.ProfileDir); err != nil {
			return out, err
		}
	}
	if err := s.Exempt.check("seccomp.exempt", handlers); err != nil {
		return out, err
	}
	if err := s.Complain.check("seccomp.complain", handlers); err != nil {
		return out, err
	}
	var err error
	if out.Privileged, err = parseScoped(s.Privileged, "seccomp.privileged", handlers, privilegedValues); err != nil {
		return out, err
	}
	if len(s.NamespaceProfiles) > 0 && s.ProfileDir == "" {
		return out, fmt.Errorf("seccomp.namespace-profiles: set without seccomp.profile-dir: expected a profile directory to name profiles of")
	}
	for _, ns := range slices.Sorted(maps.Keys(s.NamespaceProfiles)) {
		key := "seccomp.namespace-profiles"
		if ns != "*" {
			if err := k8s.CheckNamespace(key, ns); err != nil {
				return out, err
			}
		}
		for _, p := range s.NamespaceProfiles[ns] {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return out, fmt.Errorf("%s.%s: %s: expected a path.Match pattern of profile names such as team-a/*", key, ns, quote.Value(p))
			}
		}
	}
	// ExtraRules are checked against the node's syscall table by the
	// seccomp store the plugin builds from them.
	return out, nil
}

// MayName reports whether pods of namespace may name profile by annotation.
func (s Seccomp) MayName(namespace, profile string) bool {
	if s.NamespaceProfiles == nil {
		return true
	}
	for _, p := range append(slices.Clone(s.NamespaceProfiles["*"]), s.NamespaceProfiles[namespace]...) {
		if ok, _ := path.Match(p, profile); ok {
			return true
		}
	}
	return false
}
