package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/e2e/runtime/netns"
)

// mountInfo is the part of a /proc/self/mountinfo line teardown needs.
type mountInfo struct {
	mountPoint   string
	fsType       string
	superOptions string
}

// parseMountinfoLine parses one line of mountinfo (proc(5)); ok is false for
// a line that does not have the documented shape.
func parseMountinfoLine(line string) (mountInfo, bool) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+4 {
		return mountInfo{}, false
	}
	return mountInfo{
		mountPoint:   unescapeOctal(fields[4]),
		fsType:       fields[sep+1],
		superOptions: fields[sep+3],
	}, true
}

// unescapeOctal undoes the kernel's \NNN escaping of spaces, tabs,
// newlines and backslashes in mount paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		if m, ok := parseMountinfoLine(scanner.Text()); ok && isUnder(m.mountPoint, dir) {
			mounts = append(mounts, m.mountPoint)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, nil
}

// unmountUnder unmounts everything at or below dir, deepest first; a busy
// mount is detached lazily. Repeats because a mount point may be stacked.
func unmountUnder(dir string) error {
	for range 10 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("unmounting under %s: still mounted: %s", dir, strings.Join(mounts, ", "))
	}
	return nil
}

// sandboxProcess is a process that belongs to a sandbox, and the reason.
type sandboxProcess struct {
	pid     int
	cmdline string
	why     string
}

// sandboxProcesses finds the live processes of a sandbox: those whose
// command line, working directory, executable or root is in runDir (the
// daemons, shims, runc, plugins) and those in a cgroup under cgroupRoot (the
// containers). Zombies are skipped: they are dead and only wait for reaping.
func sandboxProcesses(runDir, cgroupRoot string) ([]sandboxProcess, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var found []sandboxProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || isZombie(pid) {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if why := belongsToSandbox(dir, cmdline, runDir, cgroupRoot); why != "" {
			found = append(found, sandboxProcess{pid: pid, cmdline: cmdline, why: why})
		}
	}
	return found, nil
}

func belongsToSandbox(procDir, cmdline, runDir, cgroupRoot string) string {
	for _, arg := range strings.Fields(cmdline) {
		if strings.Contains(arg, runDir+"/") || strings.HasSuffix(arg, runDir) {
			return "command line refers to " + runDir
		}
	}
	for _, link := range []string{"cwd", "exe", "root"} {
		if target, err := os.Readlink(filepath.Join(procDir, link)); err == nil && isUnder(strings.TrimSuffix(target, " (deleted)"), runDir) {
			return link + " is " + target
		}
	}
	if data, err := os.ReadFile(filepath.Join(procDir, "cgroup")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && isUnder(parts[2], cgroupRoot) {
				return "in cgroup " + parts[2]
			}
		}
	}
	return ""
}

func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name, which may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// killSandboxProcesses SIGKILLs every process of the sandbox by PID and
// waits until they are gone. Rounds repeat in case a dying shim's child
// showed up late.
func killSandboxProcesses(runDir, cgroupRoot string, timeout time.Duration, log logrus.FieldLogger) error {
	deadline := time.Now().Add(timeout)
	for {
		procs, err := sandboxProcesses(runDir, cgroupRoot)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for _, p := range procs {
				left = append(left, fmt.Sprintf("%d (%s: %s)", p.pid, p.why, p.cmdline))
			}
			return fmt.Errorf("killing sandbox processes: still alive: %s", strings.Join(left, "; "))
		}
		for _, p := range procs {
			log.WithFields(logrus.Fields{"pid": p.pid, "why": p.why}).Debugf("killing leftover process %s", p.cmdline)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostCleanup undoes everything a sandbox may have left, by what it can find
// on the host: processes, mounts, cgroups, sysctls, host directories, and
// finally the run dir itself (only once nothing is mounted under it).
func hostCleanup(runDir string, st *hostState, keepRunDir bool, log logrus.FieldLogger) error {
	cgroupRoot := cgroupRootFor(runDir)
	var errs []error
	if err := killSandboxProcesses(runDir, cgroupRoot, 20*time.Second, log); err != nil {
		errs = append(errs, err)
	}
	unmountErr := unmountUnder(runDir)
	if unmountErr != nil {
		errs = append(errs, unmountErr)
	}
	if err := removeCgroupRoot(cgroupRoot, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if st != nil {
		if err := st.restore(); err != nil {
			errs = append(errs, err)
		}
	}
	if !keepRunDir && unmountErr == nil {
		if err := os.RemoveAll(runDir); err != nil {
			errs = append(errs, fmt.Errorf("removing run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// LeftoversIn lists what of the sandbox with run dir runDir is still on
// the host: processes, mounts, cgroups and the run dir itself. It serves
// to check a sandbox whose owner is gone (Sandbox.Leftovers also checks
// sysctls and host directories).
func LeftoversIn(runDir string) []string {
	return leftovers(runDir, nil, false)
}

// leftovers lists what of a sandbox is still on the host.
func leftovers(runDir string, st *hostState, keepRunDir bool) []string {
	var out []string
	procs, err := sandboxProcesses(runDir, cgroupRootFor(runDir))
	if err != nil {
		out = append(out, err.Error())
	}
	for _, p := range procs {
		out = append(out, fmt.Sprintf("process %d (%s): %s", p.pid, p.why, p.cmdline))
	}
	mounts, err := mountsUnder(runDir)
	if err != nil {
		out = append(out, err.Error())
	}
	for _, m := range mounts {
		out = append(out, "mount "+m)
	}
	out = append(out, cgroupRootsLeft(cgroupRootFor(runDir))...)
	if ns := filepath.Join(netns.RunDir, clusterNetnsName(runDir)); isPresent(ns) {
		out = append(out, "network namespace "+ns)
	}
	if st != nil {
		out = append(out, st.changes()...)
	}
	if !keepRunDir && isPresent(runDir) {
		out = append(out, "run dir "+runDir)
	}
	return out
}

func isPresent(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// runDirPrefix names every sandbox's run dir, so that SweepStale finds them.
const runDirPrefix = "nri-sandbox-"

// cgroupRootFor is the kubelet's --cgroup-root for a run dir: named after
// it, so that a stale run dir leads to its cgroups.
func cgroupRootFor(runDir string) string {
	return "/" + filepath.Base(runDir)
}

// SweepStale cleans up after sandboxes under base whose owner died without
// teardown (killed, or a test binary that hit its timeout): their shims,
// containers, mounts, cgroups, sysctls and host directories. It waits for
// the host lock, so it never touches a live sandbox. Start does the same.
func SweepStale(ctx context.Context, base string, log logrus.FieldLogger) error {
	lock, err := lockHost(ctx, hostLockPath, func(msg string) { log.Info(msg) })
	if err != nil {
		return err
	}
	defer lock.Close()
	return sweepStale(base, log)
}

// sweepStale does SweepStale's work; the caller holds the host lock, so no
// other sandbox can be alive.
func sweepStale(base string, log logrus.FieldLogger) error {
	dirs, err := filepath.Glob(filepath.Join(base, runDirPrefix+"*"))
	if err != nil {
		return fmt.Errorf("finding stale sandboxes: %w", err)
	}
	var errs []error
	for _, dir := range dirs {
		log.WithField("dir", dir).Warn("cleaning up after a sandbox that was not torn down")
		st, err := loadHostState(dir)
		if err != nil {
			log.WithError(err).Warn("no state of the stale sandbox: sysctls and host directories stay as they are")
			st = nil
		}
		if err := hostCleanup(dir, st, false, log); err != nil {
			errs = append(errs, fmt.Errorf("cleaning stale sandbox %s: %w", dir, err))
		}
	}
	// Cluster sandboxes' network namespaces; no sandbox is alive.
	if err := netns.Sweep(netns.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("cleaning stale sandboxes: %w", err))
	}
	return errors.Join(errs...)
}
