package hostns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// procNames maps OCI namespace types to their names under /proc/<pid>/ns.
var procNames = map[string]string{
	"pid": "pid", "network": "net", "ipc": "ipc", "uts": "uts", "mount": "mnt",
	"user": "user", "cgroup": "cgroup", "time": "time",
}

// ProcHost finds the host's namespaces as those of PID 1 and of the plugin's
// own process under Proc: the plugin runs in the host's namespaces (launched
// by the runtime, or as a DaemonSet with hostPID and hostNetwork), and PID 1's
// may be out of reach (a sandbox that hides them). Two paths name the same
// namespace when they are the same nsfs inode.
type ProcHost struct {
	Proc string // usually /proc
}

// IsHost reports whether path is the host's namespace of type nsType.
func (h ProcHost) IsHost(nsType, path string) (bool, error) {
	name, ok := procNames[nsType]
	if !ok {
		return false, fmt.Errorf("unknown namespace type %q", nsType)
	}
	target, err := inode(path)
	if err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", path, err)
	}
	var errs []error
	for _, pid := range []string{"1", "self"} {
		host, err := inode(filepath.Join(h.Proc, pid, "ns", name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if host == target {
			return true, nil
		}
	}
	if len(errs) == 2 {
		return false, fmt.Errorf("reading the host's %s namespace: %w", nsType, errors.Join(errs...))
	}
	return false, nil
}

// nsID identifies a namespace: its nsfs device and inode.
type nsID struct{ dev, ino uint64 }

func inode(path string) (nsID, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nsID{}, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nsID{}, fmt.Errorf("%s: no inode information", path)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}
