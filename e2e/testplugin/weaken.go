package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/containerd/nri/pkg/api"
)

// weaken is what the plugin does to weaken the containers of chosen pods, so
// that validators (the security plugin) can be tested against a real plugin
// of their runtime.
type weaken struct {
	// Pods restricts the changes to pods of these names; empty: every pod.
	Pods []string `yaml:"pods"`
	// Hooks are executables added as createRuntime OCI hooks.
	Hooks []string `yaml:"hooks"`
	// SeccompUnconfined sets a seccomp policy that allows every call.
	SeccompUnconfined bool `yaml:"seccompUnconfined"`
	// Namespaces are joined (path set) or removed (remove: true).
	Namespaces []namespace `yaml:"namespaces"`
	// Sysctls are set.
	Sysctls map[string]string `yaml:"sysctls"`
	// Devices are added as device nodes.
	Devices []device `yaml:"devices"`
}

type namespace struct {
	Type   string `yaml:"type"`
	Path   string `yaml:"path"`
	Remove bool   `yaml:"remove"`
}

type device struct {
	Path  string `yaml:"path"`
	Type  string `yaml:"type"`
	Major int64  `yaml:"major"`
	Minor int64  `yaml:"minor"`
}

// namespaceTypes are the OCI namespace types.
var namespaceTypes = []string{"cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts"}

// check names the first bad value; source is the config's source.
func (w weaken) check(source string) error {
	for _, h := range w.Hooks {
		if !filepath.IsAbs(h) {
			return fmt.Errorf("config %s: weaken.hooks: %q: expected an absolute path", source, h)
		}
	}
	for _, ns := range w.Namespaces {
		if !slices.Contains(namespaceTypes, ns.Type) {
			return fmt.Errorf("config %s: weaken.namespaces: type %q: expected one of %v", source, ns.Type, namespaceTypes)
		}
		if ns.Remove == (ns.Path != "") {
			return fmt.Errorf("config %s: weaken.namespaces: %s: expected either a path or remove: true", source, ns.Type)
		}
	}
	for _, d := range w.Devices {
		if !filepath.IsAbs(d.Path) || !slices.Contains([]string{"c", "b"}, d.Type) {
			return fmt.Errorf("config %s: weaken.devices: %q type %q: expected an absolute path and type c or b", source, d.Path, d.Type)
		}
	}
	return nil
}

// apply adds the configured changes to adjust if pod is chosen.
func (w weaken) apply(pod *api.PodSandbox, adjust *api.ContainerAdjustment) {
	if len(w.Pods) > 0 && !slices.Contains(w.Pods, pod.GetName()) {
		return
	}
	if len(w.Hooks) > 0 {
		hooks := &api.Hooks{}
		for _, h := range w.Hooks {
			hooks.CreateRuntime = append(hooks.CreateRuntime, &api.Hook{Path: h})
		}
		adjust.AddHooks(hooks)
	}
	if w.SeccompUnconfined {
		adjust.SetLinuxSeccompPolicy(&api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"})
	}
	for _, ns := range w.Namespaces {
		if ns.Remove {
			adjust.RemoveNamespace(&api.LinuxNamespace{Type: ns.Type})
		} else {
			adjust.AddOrReplaceNamespace(&api.LinuxNamespace{Type: ns.Type, Path: ns.Path})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(w.Sysctls)) {
		adjust.SetLinuxSysctl(key, w.Sysctls[key])
	}
	for _, d := range w.Devices {
		adjust.AddDevice(&api.LinuxDevice{Path: d.Path, Type: d.Type, Major: d.Major, Minor: d.Minor})
	}
}
