package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
)

// kubeletSysctls are the sysctls the kubelet sets on start (its "kernel
// defaults"); the sandbox puts the host's values back.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// kubeletHostDirs are created by the kubelet whatever --root-dir says
// (/run/mount by mount(8), which it calls to bind-mount its root dir).
var kubeletHostDirs = []string{"/var/log/containers", "/var/lib/kubelet/device-plugins", "/run/mount"}

// preRegisteredHostDirs are written by pre-registered plugins: the runtime
// launches them without flags and without output, so they publish to the
// default shared state directory (external plugins get --shared-dir inside
// the run dir) and log to the default log directory.
var preRegisteredHostDirs = []string{state.DefaultDir, plugin.PreRegisteredLogDir}

// hostState records what the sandbox changed on the host, in the run dir, so
// that its own teardown and, after a crash, SweepStale can undo it.
type hostState struct {
	Sysctls     map[string]string `json:"sysctls"`     // /proc/sys path below /proc/sys -> original value
	CreatedDirs []string          `json:"createdDirs"` // outermost directories that did not exist before
	// CgroupMounts are v1 hierarchies mounted for the runtime; they are
	// unmounted after the sandbox's cgroups are removed.
	CgroupMounts []cgroupMount `json:"cgroupMounts,omitempty"`
}

const hostStateFile = "sandbox.json"

// recordHost saves the sysctls and notes which of dirs (and their parents)
// do not exist yet.
func recordHost(dirs []string) (*hostState, error) {
	st := &hostState{Sysctls: map[string]string{}}
	for _, name := range kubeletSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return nil, fmt.Errorf("saving sysctl %s: %w", name, err)
		}
		st.Sysctls[name] = strings.TrimSpace(string(data))
	}
	for _, dir := range dirs {
		if created := outermostMissing(dir); created != "" {
			st.CreatedDirs = append(st.CreatedDirs, created)
		}
	}
	return st, nil
}

// outermostMissing returns the highest ancestor of dir (or dir itself) that
// does not exist, "" when dir exists.
func outermostMissing(dir string) string {
	missing := ""
	for d := filepath.Clean(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = d
	}
	return missing
}

func (st *hostState) save(runDir string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding sandbox state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(runDir, hostStateFile), data, 0o644); err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	return nil
}

func loadHostState(runDir string) (*hostState, error) {
	data, err := os.ReadFile(filepath.Join(runDir, hostStateFile))
	if err != nil {
		return nil, fmt.Errorf("reading sandbox state: %w", err)
	}
	var st hostState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decoding sandbox state %s: %w", filepath.Join(runDir, hostStateFile), err)
	}
	return &st, nil
}

// restore writes the saved sysctls back, unmounts the cgroup hierarchies
// and removes the created directories.
func (st *hostState) restore() error {
	var errs []error
	for _, m := range st.CgroupMounts {
		if err := m.unmount(); err != nil {
			errs = append(errs, err)
		}
	}
	for name, value := range st.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s to %s: %w", name, value, err))
		}
	}
	for _, dir := range st.CreatedDirs {
		// Some are mount points (/run/netns is a mount of itself).
		if err := unmountUnder(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing host directory %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// changes lists what differs from the recorded host state.
func (st *hostState) changes() []string {
	var out []string
	for name, value := range st.Sysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err == nil && strings.TrimSpace(string(data)) != value {
			out = append(out, fmt.Sprintf("sysctl %s is %s, was %s", name, strings.TrimSpace(string(data)), value))
		}
	}
	for _, dir := range st.CreatedDirs {
		if _, err := os.Lstat(dir); err == nil {
			out = append(out, "host directory "+dir+" is left")
		}
	}
	for _, m := range st.CgroupMounts {
		if m.isMounted() {
			out = append(out, fmt.Sprintf("cgroup %s hierarchy mounted at %s", m.Controller, m.Path))
		} else if m.isHidden() {
			out = append(out, fmt.Sprintf("cgroup %s hierarchy still alive after its unmount from %s", m.Controller, m.Path))
		} else if _, err := os.Lstat(m.Path); err == nil && m.CreatedDir {
			out = append(out, "cgroup mount point "+m.Path+" is left")
		}
	}
	return out
}

// hostLockPath serializes sandboxes on one machine: sysctls, the kubelet's
// host directories and the runtimes' shim socket directories are global.
const hostLockPath = "/run/nri-sandbox.lock"

// lockHost takes the lock at path, waiting until ctx ends. The lock is
// released when the returned file is closed or the process dies.
func lockHost(ctx context.Context, path string, log func(string)) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening host lock %s: %w", path, err)
	}
	announced := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !announced {
			log("waiting for another sandbox on this host to finish (" + path + ")")
			announced = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for host lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nodeIP returns a non-loopback IPv4 address of this host: the kubelet wants
// one for --node-ip even when everything listens on loopback.
func nodeIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing interface addresses: %w", err)
	}
	for _, a := range addrs {
		ipNet, ok := a.(*net.IPNet)
		if ok && !ipNet.IP.IsLoopback() && ipNet.IP.To4() != nil {
			return ipNet.IP.String(), nil
		}
	}
	return "", errors.New("finding a node IP: no non-loopback IPv4 address on this host")
}

// freePort returns a TCP port on loopback that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// canLowerOOMScoreAdj reports whether this process may set a negative
// oom_score_adj (CAP_SYS_RESOURCE), by trying it on itself and putting the
// value back.
func canLowerOOMScoreAdj() bool {
	const path = "/proc/self/oom_score_adj"
	old, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if err := os.WriteFile(path, []byte("-1"), 0o644); err != nil {
		return false
	}
	_ = os.WriteFile(path, old, 0o644) // raising it back needs no capability
	return true
}
