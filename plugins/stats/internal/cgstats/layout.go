package cgstats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Mode is how a host mounts its cgroups.
type Mode string

const (
	// ModeV1 has one directory per v1 controller under the root.
	ModeV1 Mode = "v1"
	// ModeHybrid is v1 controllers plus the controller-less v2 hierarchy at
	// <root>/unified, which carries PSI.
	ModeHybrid Mode = "hybrid"
	// ModeV2 is the unified hierarchy mounted at the root.
	ModeV2 Mode = "v2"
)

// Layout is where a host's cgroup hierarchies are.
type Layout struct {
	Mode Mode
	// Root is the cgroup mount directory (/sys/fs/cgroup): the v2 hierarchy
	// on ModeV2, the parent of the v1 controller directories otherwise.
	Root string
	// Unified is the v2 hierarchy: Root on ModeV2, Root/unified on
	// ModeHybrid, empty on ModeV1.
	Unified string
}

// DefaultRoot is where the host mounts its cgroups.
const DefaultRoot = "/sys/fs/cgroup"

// Detect tells the layout under root from the files the kernel puts there:
// cgroup.controllers exists only at the root of a v2 hierarchy, and v1
// hosts have a memory or cpuacct controller directory.
func Detect(root string) (Layout, error) {
	if exists(filepath.Join(root, "cgroup.controllers")) {
		return Layout{Mode: ModeV2, Root: root, Unified: root}, nil
	}
	if !exists(filepath.Join(root, "cpuacct")) && !exists(filepath.Join(root, "memory")) {
		return Layout{}, fmt.Errorf("detecting the cgroup layout under %s: neither cgroup.controllers (v2) nor cpuacct or memory controller directories (v1)", root)
	}
	unified := filepath.Join(root, "unified")
	if exists(filepath.Join(unified, "cgroup.controllers")) {
		return Layout{Mode: ModeHybrid, Root: root, Unified: unified}, nil
	}
	return Layout{Mode: ModeV1, Root: root}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
