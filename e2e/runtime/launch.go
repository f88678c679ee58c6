package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
)

// Launch says who starts the plugins that Sandbox.StartPlugin is asked for.
type Launch int

const (
	// LaunchExternal: the sandbox starts each plugin as an external plugin
	// that connects to the runtime's NRI socket, with the runner's flags.
	LaunchExternal Launch = iota
	// LaunchByRuntime: the sandbox lays each plugin out as `make install`
	// does, in the runtime's plugin and config dirs, and restarts the
	// runtime, which launches it as a pre-registered plugin: no flags (a
	// spec with Args or LogLevel is refused), its configuration from
	// NN-name.conf, its log in /var/log/nri-suite, its shared state in the
	// host's /run/nri-suite (Sandbox.SharedDir). Every restart of the
	// runtime launches every laid-out plugin again as a new process, and the
	// Plugin handles follow; a plugin killed or stopped comes back only
	// then: StartPlugin again (same or new spec) lays it out and restarts
	// the runtime. That is how a scenario's "plugin restart" runs here.
	LaunchByRuntime
)

func (l Launch) String() string {
	switch l {
	case LaunchExternal:
		return "external"
	case LaunchByRuntime:
		return "by-runtime"
	}
	return fmt.Sprintf("Launch(%d)", int(l))
}

// launchTimeout bounds a restart of the runtime and the relaunch of its
// plugins, far above what it takes (a few seconds).
const launchTimeout = 2 * time.Minute

// relaunchWait bounds the wait for one plugin's new process to be
// connected and ready after the runtime's restart; the runtime gives a
// plugin 5 s to register (NRIConfig.RegistrationTimeout).
const relaunchWait = 30 * time.Second

// oldPluginGrace is how long a plugin the runtime launched before its
// restart gets to exit by itself (it does when its connection closes)
// before it is killed.
const oldPluginGrace = 10 * time.Second

// startByRuntime is StartPlugin with LaunchByRuntime.
func (s *Sandbox) startByRuntime(spec PluginSpec) (*Plugin, error) {
	if err := spec.validatePreRegistered(); err != nil {
		return nil, err
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	// Its private directory exists in this mode too: a test's Config may
	// name paths below it.
	if err := os.MkdirAll(s.PluginDir(spec), 0o755); err != nil {
		return nil, fmt.Errorf("creating directory of plugin %s: %w", spec.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	out, err := layOut(ctx, spec, s.nri, s.cdiDir, filepath.Join(s.dir, "preregistered"), filepath.Join(root, "deployments", "preregistered"))
	if err != nil {
		return nil, err
	}
	if out != "" {
		s.log.WithField("plugin", spec.Name).Info(out)
	}
	logPath := filepath.Join(plugin.PreRegisteredLogDir, spec.id()+".log")
	p := &Plugin{Spec: spec, LogPath: logPath, process: newLaunched("plugin "+spec.id(), logPath)}
	s.mu.Lock()
	s.plugins = append(s.plugins, p)
	s.mu.Unlock()
	if err := s.relaunch(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// layOut puts spec into the runtime's plugin and config dirs as `make
// install` does: a plugin the suite ships (shippedDir/conf.d has its
// configuration) through shippedDir/install.sh, with staging (BIN_DIR and
// PREFIX) under work; any other plugin the same way by hand. Then its
// configuration is spec.Config in place of the shipped one (none when
// empty). It returns what install.sh said.
func layOut(ctx context.Context, spec PluginSpec, nri NRIConfig, cdiDir, work, shippedDir string) (string, error) {
	shipped, err := shippedBySuite(spec, filepath.Join(shippedDir, "conf.d"))
	if err != nil {
		return "", err
	}
	if !shipped {
		return "", installPreRegistered(spec, nri, cdiDir)
	}
	// install.sh keeps a configuration it finds (an operator's edits): the
	// previous layout's is none.
	if err := os.Remove(filepath.Join(nri.PluginConfigPath, spec.id()+".conf")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("removing the configuration of plugin %s laid out before: %w", spec.id(), err)
	}
	out, err := runInstallScript(ctx, spec, nri, work, filepath.Join(shippedDir, "install.sh"))
	if err != nil {
		return out, err
	}
	return out, writePreRegisteredConfig(spec, nri, cdiDir)
}

// shippedBySuite reports whether install.sh lays spec out: confDir (the
// shipped configurations) has one for its NN-name. A suite plugin under
// another index is an error, since install.sh installs it under its own.
func shippedBySuite(spec PluginSpec, confDir string) (bool, error) {
	var found []string
	for _, pattern := range []string{"[0-9][0-9]-" + spec.Name + ".conf", "[0-9][0-9]-" + spec.Name + ".conf.in"} {
		matches, err := filepath.Glob(filepath.Join(confDir, pattern))
		if err != nil {
			return false, fmt.Errorf("finding the shipped configuration of plugin %s: %w", spec.Name, err)
		}
		found = append(found, matches...)
	}
	for _, path := range found {
		id := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".in"), ".conf")
		if id != spec.id() {
			return false, fmt.Errorf("plugin %s: idx %s: install.sh installs it as %s (%s), expected that index", spec.Name, spec.Idx, id, path)
		}
	}
	return len(found) > 0, nil
}

// helperBinaries are what install.sh takes from BIN_DIR besides the
// plugins; the sandbox finds them next to the plugin's binary, as `make
// build` puts them in bin/.
var helperBinaries = []string{"nri-sidecar-helper"}

// runInstallScript runs install.sh for spec alone: BIN_DIR under work holds
// spec.Binary as nri-<name> and the helpers found next to it; PREFIX is
// work/prefix, the plugin and config dirs are the runtime's, no DESTDIR.
func runInstallScript(ctx context.Context, spec PluginSpec, nri NRIConfig, work, script string) (string, error) {
	binDir := filepath.Join(work, "bin", spec.id())
	if err := os.RemoveAll(binDir); err != nil {
		return "", fmt.Errorf("preparing install.sh's BIN_DIR for plugin %s: %w", spec.id(), err)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("preparing install.sh's BIN_DIR for plugin %s: %w", spec.id(), err)
	}
	binary, err := filepath.Abs(spec.Binary)
	if err != nil {
		return "", fmt.Errorf("plugin %s: binary %s: %w", spec.id(), spec.Binary, err)
	}
	links := map[string]string{"nri-" + spec.Name: binary}
	for _, helper := range helperBinaries {
		if path := filepath.Join(filepath.Dir(binary), helper); isFile(path) {
			links[helper] = path
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(binDir, name)); err != nil {
			return "", fmt.Errorf("preparing install.sh's BIN_DIR for plugin %s: %w", spec.id(), err)
		}
	}
	cmd := exec.CommandContext(ctx, "bash", script, binDir)
	cmd.Env = append(os.Environ(), "DESTDIR=", "PREFIX="+filepath.Join(work, "prefix"),
		"NRI_PLUGIN_DIR="+nri.PluginPath, "NRI_CONF_DIR="+nri.PluginConfigPath, "PLUGINS="+spec.Name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("laying out plugin %s with %s: %w: %s", spec.id(), script, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// relaunch restarts the runtime, which launches every laid-out plugin
// again, and waits until the plugins that were running before are gone
// and each plugin handle's newest has a new process, connected and ready.
func (s *Sandbox) relaunch(ctx context.Context) error {
	s.mu.Lock()
	var running []*launched
	current := map[string]*launched{} // by NRI id: the newest handle's
	for _, p := range s.plugins {
		if l, ok := p.process.(*launched); ok {
			current[p.Spec.id()] = l
			if !l.exited() {
				running = append(running, l)
			}
		}
	}
	s.mu.Unlock()
	statuses, err := state.PluginStatuses(s.SharedDir())
	if err != nil {
		return fmt.Errorf("relaunching plugins: %w", err)
	}
	// A record left by a process that is gone must not pass for the new one.
	before := map[string]int{}
	for id := range current {
		if st, found, err := statuses.Read(id); err == nil && found {
			before[id] = st.PID
		}
	}
	since := time.Now()
	if err := s.restartRuntime(ctx); err != nil {
		return err
	}
	for _, l := range running {
		if !l.waitExit(oldPluginGrace) {
			s.log.WithField("pid", l.PID()).Warn(l.name + " launched before the runtime's restart did not exit: killing it")
			l.kill()
		}
	}
	for id, l := range current {
		err := PollUntil(ctx, relaunchWait, 100*time.Millisecond, func() error {
			st, found, err := statuses.Read(id)
			pid, err := relaunchedPID(st, found, err, before[id], since)
			if err != nil {
				return err
			}
			return l.bind(pid)
		})
		if err != nil {
			return fmt.Errorf("waiting for the runtime to launch plugin %s: %w; last log lines of %s:\n%s", id, err, l.logPath, tailFile(l.logPath, 20))
		}
		s.log.WithFields(logrus.Fields{"plugin": id, "pid": l.PID()}).Info("plugin launched by the runtime")
	}
	return nil
}

// relaunchedPID returns the PID of a plugin's status record (st, found and
// err as Records.Read returns them) if it shows a process launched since
// then: a PID other than the one recorded before (0: none), published after
// since, connected and ready.
func relaunchedPID(st state.PluginStatus, found bool, err error, before int, since time.Time) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case !found:
		return 0, errors.New("no status record yet")
	case st.PID == before || st.Updated.Before(since):
		return 0, fmt.Errorf("status record of pid %d updated %s: expected a process launched since %s (not pid %d)",
			st.PID, st.Updated.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano), before)
	case !st.Connected || !st.Ready:
		return 0, fmt.Errorf("pid %d: connected %v, ready %v: expected both", st.PID, st.Connected, st.Ready)
	}
	return st.PID, nil
}

// launched is a plugin process that the runtime started. Not being the
// sandbox's child, it is held by a pidfd: signals reach that very process
// even if its PID is reused, and its exit shows even while it waits, a
// zombie, to be reaped. bind points it at the runtime's next launch.
type launched struct {
	name    string // for messages: "plugin 30-topology-aware"
	logPath string
	mu      sync.Mutex
	pid     int
	fd      int // the pidfd; -1 before the first launch
}

func newLaunched(name, logPath string) *launched {
	return &launched{name: name, logPath: logPath, fd: -1}
}

// bind holds process pid from now on, and lets go of the previous one.
func (l *launched) bind(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("opening pidfd of %s (pid %d): %w", l.name, pid, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd >= 0 {
		unix.Close(l.fd)
	}
	l.pid, l.fd = pid, fd
	return nil
}

// release closes the pidfd; the process is left as it is.
func (l *launched) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd >= 0 {
		unix.Close(l.fd)
	}
	l.fd = -1
}

// PID returns the process id; 0 before the first launch.
func (l *launched) PID() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// exited reports whether the process has ended (or was never launched).
func (l *launched) exited() bool { return l.waitExit(0) }

// waitExit waits up to d for the process to end and reports whether it has.
func (l *launched) waitExit(d time.Duration) bool {
	l.mu.Lock()
	fd := l.fd
	l.mu.Unlock()
	if fd < 0 {
		return true
	}
	deadline := time.Now().Add(d)
	for {
		// A pidfd turns readable when its process exits.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return true // a pidfd that cannot be polled holds nothing alive
		case n > 0:
			return true
		case !time.Now().Before(deadline):
			return false
		}
	}
}

// signal sends sig to the process; an ended one is no error.
func (l *launched) signal(sig unix.Signal) {
	l.mu.Lock()
	fd := l.fd
	l.mu.Unlock()
	if fd >= 0 {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits.
func (l *launched) stop(grace time.Duration) {
	if l.exited() {
		return
	}
	l.signal(unix.SIGTERM)
	if !l.waitExit(grace) {
		l.kill()
	}
}

// kill sends SIGKILL and waits until the process has ended.
func (l *launched) kill() {
	if l.exited() {
		return
	}
	l.signal(unix.SIGKILL)
	for !l.waitExit(time.Minute) {
		l.signal(unix.SIGKILL)
	}
}

// waitFor polls check every 100 ms until it returns nil, ctx ends or the
// process ends; the error then carries check's last error and the log tail.
func (l *launched) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	for {
		last := check(ctx)
		if last == nil {
			return nil
		}
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("waiting for %s: %w (last: %v); last log lines of %s:\n%s", what, ctx.Err(), last, l.logPath, tailFile(l.logPath, 20))
		case l.waitExit(100 * time.Millisecond):
			return fmt.Errorf("waiting for %s: %s (pid %d) exited (last: %v); last log lines of %s:\n%s", what, l.name, l.PID(), last, l.logPath, tailFile(l.logPath, 20))
		}
	}
}
