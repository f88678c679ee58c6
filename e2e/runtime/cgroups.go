package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// cgroupHierarchy is one mounted cgroup hierarchy: a v1 controller (or
// named hierarchy) or the unified v2 tree.
type cgroupHierarchy struct {
	Mount       string
	Controllers []string // from the super options, e.g. [cpuset]; empty for v2
	V2          bool
}

// cgroupHierarchies lists the cgroup hierarchies mounted on this host.
func cgroupHierarchies() ([]cgroupHierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	var out []cgroupHierarchy
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		m, ok := parseMountinfoLine(scanner.Text())
		if !ok {
			continue
		}
		switch m.fsType {
		case "cgroup":
			out = append(out, cgroupHierarchy{Mount: m.mountPoint, Controllers: v1Controllers(m.superOptions)})
		case "cgroup2":
			out = append(out, cgroupHierarchy{Mount: m.mountPoint, V2: true})
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

// v1Controllers picks the controllers (and "name=" of a named hierarchy)
// out of a v1 cgroup mount's super options.
func v1Controllers(superOptions string) []string {
	var ctrls []string
	for _, opt := range strings.Split(superOptions, ",") {
		switch {
		case strings.HasPrefix(opt, "name="):
			ctrls = append(ctrls, opt)
		case strings.Contains(opt, "="), opt == "", nonControllerOptions[opt]:
		default:
			ctrls = append(ctrls, opt)
		}
	}
	return ctrls
}

// nonControllerOptions are the flag options a v1 cgroup mount may carry.
var nonControllerOptions = map[string]bool{
	"rw": true, "ro": true, "clone_children": true, "noprefix": true, "xattr": true,
	"cpuset_v2_mode": true, "favordynmods": true, "nsdelegate": true,
}

func (h cgroupHierarchy) has(controller string) bool {
	for _, c := range h.Controllers {
		if c == controller {
			return true
		}
	}
	return false
}

// createCgroupRoot makes root in every hierarchy, so that the kubelet
// accepts it as --cgroup-root; a v1 cpuset child starts with empty
// cpus/mems and must inherit them before any task can join it.
func createCgroupRoot(root string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		dir := filepath.Join(h.Mount, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		if !h.V2 && h.has("cpuset") {
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				value, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file))
				if err != nil {
					return fmt.Errorf("reading %s of the parent of cgroup %s: %w", file, dir, err)
				}
				if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
					return fmt.Errorf("setting %s of cgroup %s: %w", file, dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes root and every cgroup below it, in every
// hierarchy, deepest first. Tasks that are still exiting keep a cgroup busy
// for a moment, so it retries until deadline.
func removeCgroupRoot(root string, timeout time.Duration) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var errs []error
		for _, h := range hierarchies {
			if err := rmdirTree(filepath.Join(h.Mount, root)); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 || time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rmdirTree removes a cgroup directory tree depth-first; cgroupfs needs
// rmdir (not unlink of the control files).
func rmdirTree(top string) error {
	var dirs []string
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing cgroups under %s: %w", top, err)
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var errs []error
	for _, dir := range dirs {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupRootsLeft lists the hierarchies in which root still exists.
func cgroupRootsLeft(root string) []string {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	for _, h := range hierarchies {
		dir := filepath.Join(h.Mount, root)
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "cgroup "+dir)
		}
	}
	return left
}

// CgroupDir returns the host directory of a cgroup path (as in an OCI
// spec's cgroupsPath with the cgroupfs driver) for a v1 controller, or in the
// unified hierarchy when controller is "".
func CgroupDir(controller, cgroupsPath string) (string, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return "", err
	}
	for _, h := range hierarchies {
		if (controller == "" && h.V2) || (controller != "" && !h.V2 && h.has(controller)) {
			return filepath.Join(h.Mount, cgroupsPath), nil
		}
	}
	return "", fmt.Errorf("finding cgroup hierarchy of controller %q: not mounted", controller)
}
