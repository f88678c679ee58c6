package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bounds of the waits for plugin processes. Generous: plugin binaries may be
// race-instrumented and the machine shared; a healthy plugin takes well
// under a second.
const (
	registrationWait = 30 * time.Second
	stopWait         = 10 * time.Second

	// raceExitCode is the status a -race binary exits with after a report.
	raceExitCode = 66
)

// DefaultPluginArgs are the flags every plugin gets besides name, index,
// socket and config: verbose logs, and metrics on a free loopback port so
// that plugins of parallel tests do not collide.
var DefaultPluginArgs = []string{"--http-addr", "127.0.0.1:0", "--log-level", "debug"}

// PreRegisteredPlugin is a plugin the runtime launches itself from its
// plugin directory, with its config from the config directory.
type PreRegisteredPlugin struct {
	Index  string // two digits, e.g. "10"
	Name   string
	Binary string // e.g. from BuildPlugin
	Config string // YAML; no NN-name.conf when empty
	// Args are the flags the binary runs with; nil means DefaultPluginArgs.
	Args []string

	logPath string
}

func (p *PreRegisteredPlugin) qualified() string { return p.Index + "-" + p.Name }

// install writes NN-name into the plugin directory: a script that execs the
// binary with its output in a log file (the runtime discards a launched
// plugin's output) and NN-name.conf into the config directory.
func (rt *Runtime) install(p PreRegisteredPlugin, logDir string) error {
	p.logPath = filepath.Join(logDir, p.qualified()+".log")
	args := p.Args
	if args == nil {
		args = DefaultPluginArgs
	}
	quoted := []string{shellQuote(p.Binary)}
	for _, a := range append(args, "--shared-dir", rt.sharedDir) {
		quoted = append(quoted, shellQuote(a))
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s >>%s 2>&1\n", strings.Join(quoted, " "), shellQuote(p.logPath))
	if err := os.WriteFile(filepath.Join(rt.pluginDir, p.qualified()), []byte(script), 0o755); err != nil {
		return fmt.Errorf("writing the plugin launcher: %w", err)
	}
	if p.Config != "" {
		if err := os.WriteFile(filepath.Join(rt.configDir, p.qualified()+".conf"), []byte(p.Config), 0o644); err != nil {
			return fmt.Errorf("writing the plugin config: %w", err)
		}
	}
	for i := range rt.opts.plugins {
		if rt.opts.plugins[i].qualified() == p.qualified() {
			rt.opts.plugins[i].logPath = p.logPath
		}
	}
	rt.t.Cleanup(func() {
		if rt.t.Failed() {
			rt.t.Logf("log of pre-registered plugin %s:\n%s", p.qualified(), readLog(p.logPath))
		}
	})
	return nil
}

// PreRegisteredLog is the output of the pre-registered plugin "NN-name".
func (rt *Runtime) PreRegisteredLog(qualifiedName string) string {
	for _, p := range rt.opts.plugins {
		if p.qualified() == qualifiedName {
			return readLog(p.logPath)
		}
	}
	return ""
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func readLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(data)
}

// Plugin is an external plugin process connected to a runtime's socket.
type Plugin struct {
	rt         *Runtime
	binary     string
	index      string
	name       string
	config     string
	args       []string
	configPath string
	logPath    string

	cmd    *exec.Cmd
	done   chan struct{}
	err    error // of cmd.Wait, valid once done is closed
	synced int   // Synchronize calls seen so far
}

// PluginOption configures an external plugin.
type PluginOption func(*Plugin)

// WithConfig gives the plugin a YAML config file (--config).
func WithConfig(yaml string) PluginOption {
	return func(p *Plugin) { p.config = yaml }
}

// WithArgs replaces DefaultPluginArgs.
func WithArgs(args ...string) PluginOption {
	return func(p *Plugin) { p.args = args }
}

// StartPlugin starts binary as the external plugin index-name on the
// runtime's socket with the standard flags, waits until the runtime has
// registered and synchronized it, and stops it when the test ends.
func (rt *Runtime) StartPlugin(t testing.TB, binary, index, name string, opts ...PluginOption) *Plugin {
	t.Helper()
	p := &Plugin{rt: rt, binary: binary, index: index, name: name, args: DefaultPluginArgs}
	for _, o := range opts {
		o(p)
	}
	dir := t.TempDir()
	p.logPath = filepath.Join(dir, p.QualifiedName()+".log")
	if p.config != "" {
		p.configPath = filepath.Join(dir, p.QualifiedName()+".yaml")
		if err := os.WriteFile(p.configPath, []byte(p.config), 0o644); err != nil {
			t.Fatalf("writing the config of plugin %s: %v", p.QualifiedName(), err)
		}
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("log of plugin %s:\n%s", p.QualifiedName(), p.Log())
		}
	})
	p.Restart(t)
	return p
}

// QualifiedName is the name the runtime knows the plugin by: "NN-name".
func (p *Plugin) QualifiedName() string { return p.index + "-" + p.name }

// PID is the plugin process's id (0 when it is not running).
func (p *Plugin) PID() int {
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Log is everything the plugin wrote to stdout and stderr, across restarts.
func (p *Plugin) Log() string { return readLog(p.logPath) }

func (p *Plugin) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Restart starts the plugin process again (after Kill or Stop; the first
// start is StartPlugin's) and waits until it has registered and synchronized.
func (p *Plugin) Restart(t testing.TB) {
	t.Helper()
	if p.running() {
		t.Fatalf("starting plugin %s: it is already running as pid %d", p.QualifiedName(), p.cmd.Process.Pid)
	}
	args := []string{"--name", p.name, "--idx", p.index, "--socket", p.rt.socket, "--shared-dir", p.rt.sharedDir}
	if p.configPath != "" {
		args = append(args, "--config", p.configPath)
	}
	args = append(args, p.args...)
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening the log of plugin %s: %v", p.QualifiedName(), err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== harness: starting %s %s\n", p.binary, strings.Join(args, " "))
	cmd := exec.Command(p.binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	before := p.rt.reg.syncCount(p.QualifiedName())
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting plugin %s: %v", p.QualifiedName(), err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func(done chan struct{}) {
		p.err = cmd.Wait()
		close(done)
	}(p.done)
	p.synced = before
	p.WaitSynchronized(t)
}

// WaitSynchronized waits until the runtime has completed a Synchronize with
// the plugin that it had not seen yet: after a start, or after a runtime
// Restart once the plugin has reconnected.
func (p *Plugin) WaitSynchronized(t testing.TB) {
	t.Helper()
	deadline := time.NewTimer(registrationWait)
	defer deadline.Stop()
	for {
		n, changed := p.rt.reg.watch(p.QualifiedName())
		if n > p.synced {
			p.synced = n
			p.rt.waitSyncCommitted()
			return
		}
		select {
		case <-changed:
		case <-p.done:
			t.Fatalf("plugin %s exited (%v) before it registered and synchronized; its log:\n%s", p.QualifiedName(), p.err, p.Log())
		case <-deadline.C:
			t.Fatalf("plugin %s did not register and synchronize within %v; its log:\n%s", p.QualifiedName(), registrationWait, p.Log())
		}
	}
}

// waitSyncCommitted returns once no plugin synchronization is in flight: the
// adaptation adds a plugin to its list only after Synchronize returns, under
// the lock BlockPluginSync takes.
func (rt *Runtime) waitSyncCommitted() {
	rt.mu.Lock()
	nri := rt.nri
	rt.mu.Unlock()
	if nri != nil {
		nri.BlockPluginSync().Unblock()
	}
}

// Kill kills the plugin with SIGKILL and waits for it to exit.
func (p *Plugin) Kill(t testing.TB) {
	t.Helper()
	if !p.running() {
		t.Fatalf("killing plugin %s: it is not running", p.QualifiedName())
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("killing plugin %s: %v", p.QualifiedName(), err)
	}
	<-p.done
}

// Stop stops the plugin with SIGTERM, as a DaemonSet's pod is stopped, and
// fails the test if it does not exit cleanly in time or reported a data race.
func (p *Plugin) Stop(t testing.TB) {
	t.Helper()
	if !p.running() {
		t.Fatalf("stopping plugin %s: it is not running", p.QualifiedName())
	}
	p.stop(t)
}

func (p *Plugin) stop(t testing.TB) {
	if !p.running() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stopping plugin %s: %v", p.QualifiedName(), err)
	}
	select {
	case <-p.done:
	case <-time.After(stopWait):
		t.Errorf("plugin %s did not exit within %v of SIGTERM; killing it", p.QualifiedName(), stopWait)
		_ = p.cmd.Process.Kill()
		<-p.done
		return
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		if exit.ExitCode() == raceExitCode {
			t.Errorf("plugin %s reported a data race; its log:\n%s", p.QualifiedName(), p.Log())
		} else {
			t.Errorf("plugin %s exited with %v after SIGTERM, expected a clean exit", p.QualifiedName(), p.err)
		}
	}
}
