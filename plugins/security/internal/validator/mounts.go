package validator

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// kernelFileSystems reach the host whatever their source, so no policy
// allows them: a new instance shows the host's devices (devtmpfs), kernel
// state and knobs without the masks the runtime puts on its own /proc and
// /sys (proc, sysfs), the host's cgroups, tracing and debugging, security
// modules, BPF objects, firmware variables and crash records, the kernel
// NFS server, or interpreters for every binary of the host (binfmt_misc).
var kernelFileSystems = []string{"binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs", "devtmpfs",
	"efivarfs", "fusectl", "nfsd", "proc", "pstore", "rpc_pipefs", "securityfs", "selinuxfs", "smackfs", "sysfs",
	"tracefs", "xenfs"}

// sourceless file systems ignore the source: each mount is a new instance
// of the container's own.
var sourceless = []string{"devpts", "mqueue", "ramfs", "shm", "tmpfs"}

// hostRoutes are host paths whose mount hands a container the host: its
// devices and kernel interfaces, the sockets and state of the runtimes (and
// so of every container), of NRI and of the kubelet (pod resources, other
// pods' volumes, credentials). A source that is one, lies under one or holds
// one (/, /run, /var/lib) is refused unless a pattern names it exactly.
var hostRoutes = withVarRun([]string{"/dev", "/proc", "/sys",
	"/run/containerd", "/run/crio", "/run/containers", "/run/nri", "/run/docker.sock", "/run/k3s",
	"/var/lib/containerd", "/var/lib/containers", "/var/lib/docker", "/var/lib/kubelet", "/etc/kubernetes"})

// withVarRun adds /var/run/x for every /run/x: /var/run is a symlink to
// /run on most hosts, and the paths are judged before and after resolving
// it, also where it does not exist.
func withVarRun(routes []string) []string {
	for _, r := range routes {
		if strings.HasPrefix(r, "/run/") {
			routes = append(routes, "/var"+r)
		}
	}
	return routes
}

func (v *Validator) mounts(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleMounts, func(owner string) string {
		return fmt.Sprintf("added mounts that reach the host (kernel file systems, host paths outside validator.mounts "+
			"allowed and plugins.%s, or on the host's routes)", owner)
	})
	for _, m := range req.GetAdjust().GetMounts() {
		if _, removed := m.IsMarkedForRemoval(); removed {
			continue
		}
		owner, _ := req.GetOwners().MountOwner(id, m.GetDestination())
		if slices.Contains(kernelFileSystems, strings.ToLower(m.GetType())) {
			c.add(owner, fmt.Sprintf("%s at %s (a kernel file system: it reaches the host whatever the policy)", m.GetType(), m.GetDestination()))
			continue
		}
		for _, src := range hostSources(m) {
			if why := v.sourceProblem(idOf(owner), src); why != "" {
				c.add(owner, fmt.Sprintf("%s at %s (%s)", src, m.GetDestination(), why))
			}
		}
	}
	return c.findings()
}

// hostSources are the host paths a mount shows in the container: the source
// of a bind mount, or of any mount whose source is a path (a block device),
// and the directories of an overlay.
func hostSources(m *api.Mount) []string {
	typ := strings.ToLower(m.GetType())
	bind := typ == "bind" || typ == "rbind" || slices.Contains(m.GetOptions(), "bind") || slices.Contains(m.GetOptions(), "rbind")
	var out []string
	if bind || !slices.Contains(sourceless, typ) && strings.HasPrefix(m.GetSource(), "/") {
		out = append(out, m.GetSource())
	}
	if typ == "overlay" {
		for _, o := range m.GetOptions() {
			key, dirs, _ := strings.Cut(o, "=")
			if slices.Contains([]string{"lowerdir", "upperdir", "workdir"}, key) {
				out = append(out, strings.Split(dirs, ":")...)
			}
		}
	}
	return out
}

// sourceProblem says why the plugin may not mount the host path src, ""
// when it may: src as given (cleaned) and as it resolves on the host must
// both match the plugin's patterns and, on a host route, be named exactly.
func (v *Validator) sourceProblem(plugin config.PluginID, src string) string {
	if !path.IsAbs(src) {
		return "not an absolute host path"
	}
	clean := path.Clean(src)
	resolved := resolveHost(clean)
	for _, p := range slices.Compact([]string{clean, resolved}) {
		via := ""
		if p != clean {
			via = "it resolves to " + p + " on the host: "
		}
		if !v.cfg.Mounts.Allows(plugin, p) {
			return via + "not in validator.mounts"
		}
		if route := routeOf(p); route != "" && !v.cfg.Mounts.Names(plugin, p) {
			return via + route + ": only a pattern naming it exactly allows it"
		}
	}
	return ""
}

// routeOf says how p touches a host route, "" when it does not.
func routeOf(p string) string {
	under := func(p, dir string) bool { return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") }
	if p == "/" {
		return "the host's root"
	}
	for _, r := range hostRoutes {
		switch {
		case p == r:
			return "the host's " + r
		case under(p, r):
			return "under the host's " + r
		case under(r, p):
			return "it holds the host's " + r
		}
	}
	return ""
}

// resolveHost resolves the symlinks of the longest existing prefix of the
// clean absolute path p as this process sees the file system: the host's for
// a plugin the runtime launches, which shares the runtime's mount namespace.
func resolveHost(p string) string {
	dir, rest := p, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return path.Join(r, rest)
		}
		if dir == "/" {
			return p
		}
		dir, rest = path.Dir(dir), path.Join(path.Base(dir), rest)
	}
}
