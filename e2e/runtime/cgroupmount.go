package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// cgroupV1User is a Runtime that needs v1 hierarchies a hybrid host may not
// mount (a controller left to the v2 side). The sandbox mounts a temporary
// hierarchy for each before the kubelet starts and unmounts it at teardown,
// once the sandbox's cgroups in it are gone.
type cgroupV1User interface {
	CgroupV1Controllers() []string
}

// cgroupV1MountBase is where v1 hierarchies are mounted by convention.
const cgroupV1MountBase = "/sys/fs/cgroup"

// cgroupMount is a v1 hierarchy the sandbox mounted.
type cgroupMount struct {
	Controller string `json:"controller"`
	Path       string `json:"path"`
	CreatedDir bool   `json:"createdDir"` // the mount point did not exist before
}

// mountCgroupsV1 mounts a v1 hierarchy under base for each controller the
// kernel has but no v1 hierarchy holds, and returns what it mounted, also
// on error, so that teardown can undo it.
func mountCgroupsV1(base string, controllers []string) ([]cgroupMount, error) {
	kernel, err := kernelCgroupControllers()
	if err != nil {
		return nil, err
	}
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	var mounted []cgroupMount
	for _, ctrl := range controllers {
		if !kernel[ctrl] || hasV1Hierarchy(hierarchies, ctrl) {
			continue // nothing to limit, or already there
		}
		m := cgroupMount{Controller: ctrl, Path: filepath.Join(base, ctrl)}
		if _, err := os.Lstat(m.Path); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(m.Path, 0o755); err != nil {
				return mounted, fmt.Errorf("creating mount point of the %s cgroup hierarchy: %w", ctrl, err)
			}
			m.CreatedDir = true
		}
		if err := syscall.Mount("cgroup", m.Path, "cgroup", 0, ctrl); err != nil {
			if m.CreatedDir {
				_ = os.Remove(m.Path)
			}
			return mounted, fmt.Errorf("mounting a cgroup v1 %s hierarchy at %s (is %s enabled in a v2 subtree_control?): %w", ctrl, m.Path, ctrl, err)
		}
		mounted = append(mounted, m)
	}
	return mounted, nil
}

func hasV1Hierarchy(hierarchies []cgroupHierarchy, controller string) bool {
	for _, h := range hierarchies {
		if !h.V2 && h.has(controller) {
			return true
		}
	}
	return false
}

// kernelCgroupControllers returns the enabled controllers of /proc/cgroups.
func kernelCgroupControllers() (map[string]bool, error) {
	data, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's cgroup controllers: %w", err)
	}
	return parseProcCgroups(string(data)), nil
}

// parseProcCgroups parses /proc/cgroups: a header line starting with "#",
// then "name hierarchy num_cgroups enabled" per controller. Lines of
// another shape are skipped.
func parseProcCgroups(data string) map[string]bool {
	ctrls := map[string]bool{}
	for _, line := range strings.Split(data, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		ctrls[fields[0]] = fields[3] == "1"
	}
	return ctrls
}

// isMounted reports whether the hierarchy is still mounted at its path.
func (m cgroupMount) isMounted() bool {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return false
	}
	for _, h := range hierarchies {
		if h.Mount == m.Path && h.has(m.Controller) {
			return true
		}
	}
	return false
}

// unmount unmounts the hierarchy and removes a mount point it created. It
// refuses while cgroups are left in it: the kernel would keep the hierarchy
// alive, out of sight, with the controller bound to v1.
func (m cgroupMount) unmount() error {
	if !m.isMounted() {
		if m.CreatedDir {
			return removeMountPoint(m.Path)
		}
		return nil
	}
	entries, err := os.ReadDir(m.Path)
	if err != nil {
		return fmt.Errorf("listing the %s cgroup hierarchy at %s: %w", m.Controller, m.Path, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: cgroup %s is left in it", m.Controller, m.Path, e.Name())
		}
	}
	if err := syscall.Unmount(m.Path, 0); err != nil {
		return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: %w", m.Controller, m.Path, err)
	}
	if m.CreatedDir {
		return removeMountPoint(m.Path)
	}
	return nil
}

func removeMountPoint(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing cgroup mount point %s: %w", path, err)
	}
	return nil
}
