package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
		if !kernel[ctrl].Enabled || hasV1Hierarchy(hierarchies, ctrl) {
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

// procCgroup is a controller's line of /proc/cgroups.
type procCgroup struct {
	Hierarchy int // 0: on the v2 side (or not in use)
	Cgroups   int // live and dying cgroups in its hierarchy
	Enabled   bool
}

// kernelCgroupControllers returns the controllers of /proc/cgroups.
func kernelCgroupControllers() (map[string]procCgroup, error) {
	data, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's cgroup controllers: %w", err)
	}
	return parseProcCgroups(string(data)), nil
}

// parseProcCgroups parses /proc/cgroups: a header line starting with "#",
// then "name hierarchy num_cgroups enabled" per controller. Lines of
// another shape are skipped.
func parseProcCgroups(data string) map[string]procCgroup {
	ctrls := map[string]procCgroup{}
	for _, line := range strings.Split(data, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		hierarchy, err1 := strconv.Atoi(fields[1])
		cgroups, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil {
			continue
		}
		ctrls[fields[0]] = procCgroup{Hierarchy: hierarchy, Cgroups: cgroups, Enabled: fields[3] == "1"}
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

// isHidden reports whether the controller's v1 hierarchy outlived its
// mount: unmounted while it still had (dying) cgroups, the kernel keeps it,
// out of sight, with the controller bound to v1 until it is mounted again.
func (m cgroupMount) isHidden() bool {
	ctrls, err := kernelCgroupControllers()
	return err == nil && ctrls[m.Controller].Hierarchy != 0 && !m.isMounted()
}

// cgroupUnmountTimeout bounds the wait for removed cgroups to be released.
const cgroupUnmountTimeout = 10 * time.Second

// unmount unmounts the hierarchy, so that the kernel destroys it and the
// controller returns to v2, and removes a mount point it created. The kernel
// destroys a hierarchy at unmount only when no cgroup, not even a removed
// one still being released, is left in it: so unmount refuses while child
// cgroups exist, waits for removed ones to go, and first mounts a hidden
// hierarchy again (left by an earlier teardown) to finish the job.
func (m cgroupMount) unmount() error {
	if m.isHidden() {
		if err := os.MkdirAll(m.Path, 0o755); err != nil {
			return fmt.Errorf("recreating mount point of the hidden %s cgroup hierarchy: %w", m.Controller, err)
		}
		if err := syscall.Mount("cgroup", m.Path, "cgroup", 0, m.Controller); err != nil {
			return fmt.Errorf("mounting the hidden %s cgroup hierarchy again at %s: %w", m.Controller, m.Path, err)
		}
	}
	if m.isMounted() {
		if err := m.waitEmpty(cgroupUnmountTimeout); err != nil {
			return err
		}
		if err := syscall.Unmount(m.Path, 0); err != nil {
			return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: %w", m.Controller, m.Path, err)
		}
		if err := m.waitDestroyed(cgroupUnmountTimeout); err != nil {
			return err
		}
	}
	if m.CreatedDir {
		if err := os.Remove(m.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing cgroup mount point %s: %w", m.Path, err)
		}
	}
	return nil
}

// waitDestroyed returns once the kernel has destroyed the unmounted
// hierarchy (it does so asynchronously) and the controller is back on v2.
func (m cgroupMount) waitDestroyed(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctrls, err := kernelCgroupControllers()
		if err != nil {
			return err
		}
		if ctrls[m.Controller].Hierarchy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: the kernel still holds hierarchy %d after %s", m.Controller, m.Path, ctrls[m.Controller].Hierarchy, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEmpty returns once the hierarchy holds its root cgroup only.
func (m cgroupMount) waitEmpty(timeout time.Duration) error {
	entries, err := os.ReadDir(m.Path)
	if err != nil {
		return fmt.Errorf("listing the %s cgroup hierarchy at %s: %w", m.Controller, m.Path, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: cgroup %s is left in it", m.Controller, m.Path, e.Name())
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		ctrls, err := kernelCgroupControllers()
		if err != nil {
			return err
		}
		n := ctrls[m.Controller].Cgroups
		if n <= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unmounting the %s cgroup hierarchy at %s: %d removed cgroups are still being released after %s", m.Controller, m.Path, n-1, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
