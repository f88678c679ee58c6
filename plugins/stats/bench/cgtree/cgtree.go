// Package cgtree creates real cgroups for benchmarks: pods with one
// container each under a private parent in every hierarchy of the host
// (each v1 controller and the v2 side), and removes them again.
package cgtree

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

// Tree is a private parent cgroup with pods and containers under it.
type Tree struct {
	// Parent is the cgroup name of the private parent, e.g. /nri-stats-bench-123.
	Parent string
	dirs   []string // the parent's directory in every hierarchy
	pods   int
}

// Create makes parent/pod<i>/ctr<i> for i < pods in every hierarchy under
// root; on error, whatever was made is removed.
func Create(root, parent string, pods int) (*Tree, error) {
	hierarchies, err := hierarchies(root)
	if err != nil {
		return nil, err
	}
	t := &Tree{Parent: parent, pods: pods}
	for _, h := range hierarchies {
		dir := filepath.Join(h, parent)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, errors.Join(fmt.Errorf("creating benchmark cgroup %s: %w", dir, err), t.Remove())
		}
		t.dirs = append(t.dirs, dir)
		for i := range pods {
			if err := os.MkdirAll(filepath.Join(dir, PodName(i), ContainerName(i)), 0o755); err != nil {
				return nil, errors.Join(fmt.Errorf("creating benchmark cgroups under %s: %w", dir, err), t.Remove())
			}
		}
	}
	return t, nil
}

// PodName and ContainerName name the i-th pod and container cgroups.
func PodName(i int) string       { return "pod" + strconv.Itoa(i) }
func ContainerName(i int) string { return "ctr" + strconv.Itoa(i) }

// Remove deletes every cgroup the tree made (they hold no processes).
func (t *Tree) Remove() error {
	var errs []error
	for _, dir := range t.dirs {
		for i := range t.pods {
			pod := filepath.Join(dir, PodName(i))
			for _, d := range []string{filepath.Join(pod, ContainerName(i)), pod} {
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("removing benchmark cgroup: %w", err))
				}
			}
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing benchmark cgroup: %w", err))
		}
	}
	t.dirs = nil
	return errors.Join(errs...)
}

// hierarchies are the distinct hierarchy roots under root: one directory
// per mounted v1 hierarchy (co-mounted controllers are one), plus the v2
// one; on a v2 host, root itself.
func hierarchies(root string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return []string{root}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing cgroup hierarchies under %s: %w", root, err)
	}
	var out []string
	for _, e := range entries {
		dir, err := filepath.EvalSymlinks(filepath.Join(root, e.Name()))
		if err != nil {
			continue
		}
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return out, nil
}

// Inventory is what the plugin would know from NRI about n such pods under
// parent: one running container each, with their cgroup paths.
func Inventory(parent string, n int) *inventory.Inventory {
	inv := inventory.New()
	pods := make([]*api.PodSandbox, n)
	ctrs := make([]*api.Container, n)
	for i := range n {
		podDir := path.Join(parent, PodName(i))
		pods[i] = &api.PodSandbox{Id: fmt.Sprint("sb", i), Name: fmt.Sprint("pod-", i), Namespace: "bench",
			Linux: &api.LinuxPodSandbox{CgroupParent: podDir}}
		ctrs[i] = &api.Container{Id: fmt.Sprint("ctr", i), PodSandboxId: pods[i].Id, Name: "main",
			State: api.ContainerState_CONTAINER_RUNNING, Linux: &api.LinuxContainer{CgroupsPath: path.Join(podDir, ContainerName(i))}}
	}
	inv.Replace(pods, ctrs)
	return inv
}
