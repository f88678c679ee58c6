package cgstats

import (
	"fmt"
	"path"
	"strings"
)

// Name turns a cgroups path as the runtime puts it in the OCI spec (and NRI
// passes it) into the cgroup's path below the root of every hierarchy, the
// form cAdvisor uses as its id label:
//
//	cgroupfs:  /kubepods/burstable/pod<uid>/<id>         (containerd)
//	           /kubepods/burstable/pod<uid>/crio-<id>    (CRI-O)
//	systemd:   kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>
//	           -> /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//	           kubepods-burstable-pod<uid_>.slice:crio:<id> -> .../crio-<id>.scope
//	a bare slice name (a pod's systemd cgroup parent) is expanded likewise.
func Name(cgroupsPath string) (string, error) {
	if cgroupsPath == "" {
		return "", fmt.Errorf("resolving cgroups path: empty, expected a cgroupfs path or slice:prefix:name")
	}
	if strings.Contains(cgroupsPath, ":") {
		return systemdName(cgroupsPath)
	}
	if !strings.Contains(cgroupsPath, "/") && strings.HasSuffix(cgroupsPath, ".slice") {
		return expandSlice(cgroupsPath)
	}
	if strings.Contains(cgroupsPath, "..") {
		return "", fmt.Errorf("resolving cgroups path %q: contains '..', expected a path below the cgroup root", cgroupsPath)
	}
	return path.Clean("/" + cgroupsPath), nil
}

// systemdName resolves the systemd driver's slice:prefix:name form the way
// runc's systemd cgroup manager does.
func systemdName(cgroupsPath string) (string, error) {
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("resolving systemd cgroups path %q: %d ':'-separated parts, expected slice:prefix:name", cgroupsPath, len(parts))
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	if slice == "" {
		slice = "system.slice" // runc's default parent
	}
	dir, err := expandSlice(slice)
	if err != nil {
		return "", fmt.Errorf("resolving systemd cgroups path %q: %w", cgroupsPath, err)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("resolving systemd cgroups path %q: unit name %q, expected a non-empty name without '/'", cgroupsPath, name)
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		if prefix != "" {
			unit = prefix + "-" + name
		}
		unit += ".scope"
	}
	return path.Join(dir, unit), nil
}

// expandSlice turns a-b-c.slice into /a.slice/a-b.slice/a-b-c.slice, as
// systemd nests slices (runc's ExpandSlice); -.slice is the root.
func expandSlice(slice string) (string, error) {
	base, ok := strings.CutSuffix(slice, ".slice")
	if !ok || strings.Contains(slice, "/") {
		return "", fmt.Errorf("slice %q: expected a name ending in .slice without '/'", slice)
	}
	if base == "-" {
		return "/", nil
	}
	if base == "" || strings.HasPrefix(base, "-") || strings.HasSuffix(base, "-") || strings.Contains(base, "--") {
		return "", fmt.Errorf("slice %q: expected dash-separated non-empty components", slice)
	}
	var dir, prefix strings.Builder
	for i, component := range strings.Split(base, "-") {
		if i > 0 {
			prefix.WriteByte('-')
		}
		prefix.WriteString(component)
		dir.WriteString("/" + prefix.String() + ".slice")
	}
	return dir.String(), nil
}
