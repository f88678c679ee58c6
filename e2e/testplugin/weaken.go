package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

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
	// Seccomp is set as the seccomp policy, as given: names may be empty,
	// unknown or another architecture's (fake denies).
	Seccomp *seccompPolicy `yaml:"seccomp"`
	// DeviceCgroups are added as device-cgroup rules.
	DeviceCgroups []deviceCgroup `yaml:"deviceCgroups"`
	// Mounts are added.
	Mounts []mount `yaml:"mounts"`
	// CgroupsPath, if set, replaces the container's cgroups path.
	CgroupsPath string `yaml:"cgroupsPath"`
	// OOMScoreAdj, if set, replaces the container's OOM score adjustment.
	OOMScoreAdj *int `yaml:"oomScoreAdj"`
	// Env is set, besides the plugin's env.
	Env map[string]string `yaml:"env"`
	// Rlimits are set.
	Rlimits []rlimit `yaml:"rlimits"`
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

type seccompPolicy struct {
	DefaultAction string        `yaml:"defaultAction"`
	Syscalls      []syscallRule `yaml:"syscalls"`
}

type syscallRule struct {
	Names  []string     `yaml:"names"`
	Action string       `yaml:"action"`
	Args   []syscallArg `yaml:"args"`
}

type syscallArg struct {
	Index    uint32 `yaml:"index"`
	Value    uint64 `yaml:"value"`
	ValueTwo uint64 `yaml:"valueTwo"`
	Op       string `yaml:"op"`
}

// deviceCgroup is a device-cgroup rule; no major or minor means any.
type deviceCgroup struct {
	Deny   bool   `yaml:"deny"`
	Type   string `yaml:"type"`
	Major  *int64 `yaml:"major"`
	Minor  *int64 `yaml:"minor"`
	Access string `yaml:"access"`
}

type mount struct {
	Source      string   `yaml:"source"`
	Destination string   `yaml:"destination"`
	Type        string   `yaml:"type"`
	Options     []string `yaml:"options"`
}

type rlimit struct {
	Type string `yaml:"type"`
	Soft uint64 `yaml:"soft"`
	Hard uint64 `yaml:"hard"`
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
	return w.checkRoutes(source)
}

// checkRoutes checks the keys that open routes to the host. What a validator
// must judge passes: fake seccomp denies, host paths, any cgroups path.
func (w weaken) checkRoutes(source string) error {
	if w.Seccomp != nil && (w.SeccompUnconfined || w.Seccomp.DefaultAction == "") {
		return fmt.Errorf("config %s: weaken.seccomp: expected a defaultAction, and not with seccompUnconfined", source)
	}
	for _, d := range w.DeviceCgroups {
		if !slices.Contains([]string{"", "a", "b", "c"}, d.Type) || strings.Trim(d.Access, "rwm") != "" {
			return fmt.Errorf("config %s: weaken.deviceCgroups: type %q access %q: expected type a, b or c and access of r, w, m", source, d.Type, d.Access)
		}
	}
	for _, m := range w.Mounts {
		if !filepath.IsAbs(m.Destination) {
			return fmt.Errorf("config %s: weaken.mounts: destination %q: expected an absolute path", source, m.Destination)
		}
	}
	if w.OOMScoreAdj != nil && (*w.OOMScoreAdj < -1000 || *w.OOMScoreAdj > 1000) {
		return fmt.Errorf("config %s: weaken.oomScoreAdj: %d: expected -1000 to 1000", source, *w.OOMScoreAdj)
	}
	for key := range w.Env {
		if err := checkEnvKey(key); err != nil {
			return fmt.Errorf("config %s: weaken.env: %w", source, err)
		}
	}
	for _, l := range w.Rlimits {
		if !strings.HasPrefix(l.Type, "RLIMIT_") {
			return fmt.Errorf("config %s: weaken.rlimits: type %q: expected RLIMIT_<name>", source, l.Type)
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
	w.applyRoutes(adjust)
}

func (w weaken) applyRoutes(adjust *api.ContainerAdjustment) {
	if w.Seccomp != nil {
		adjust.SetLinuxSeccompPolicy(w.Seccomp.toNRI())
	}
	if len(w.DeviceCgroups) > 0 {
		// NRI has no helper for these: a plugin sets the resources itself.
		if adjust.Linux == nil {
			adjust.Linux = &api.LinuxContainerAdjustment{}
		}
		if adjust.Linux.Resources == nil {
			adjust.Linux.Resources = &api.LinuxResources{}
		}
		for _, d := range w.DeviceCgroups {
			adjust.Linux.Resources.Devices = append(adjust.Linux.Resources.Devices, &api.LinuxDeviceCgroup{
				Allow: !d.Deny, Type: d.Type, Major: api.Int64(d.Major), Minor: api.Int64(d.Minor), Access: d.Access})
		}
	}
	for _, m := range w.Mounts {
		adjust.AddMount(&api.Mount{Source: m.Source, Destination: m.Destination, Type: m.Type, Options: m.Options})
	}
	if w.CgroupsPath != "" {
		adjust.SetLinuxCgroupsPath(w.CgroupsPath)
	}
	if w.OOMScoreAdj != nil {
		adjust.SetLinuxOomScoreAdj(w.OOMScoreAdj)
	}
	for _, key := range slices.Sorted(maps.Keys(w.Env)) {
		adjust.AddEnv(key, w.Env[key])
	}
	for _, l := range w.Rlimits {
		adjust.AddRlimit(l.Type, l.Hard, l.Soft)
	}
}

func (p *seccompPolicy) toNRI() *api.LinuxSeccomp {
	out := &api.LinuxSeccomp{DefaultAction: p.DefaultAction}
	for _, r := range p.Syscalls {
		rule := &api.LinuxSyscall{Names: r.Names, Action: r.Action}
		for _, a := range r.Args {
			rule.Args = append(rule.Args, &api.LinuxSeccompArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: a.Op})
		}
		out.Syscalls = append(out.Syscalls, rule)
	}
	return out
}
