package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// PluginSpec says how to run one NRI plugin binary of the suite.
type PluginSpec struct {
	// Binary is the plugin executable (see BuildPlugin).
	Binary string
	// Name and Idx register the plugin with NRI; Idx is two digits, "00"-"99".
	Name string
	Idx  string
	// Config is the plugin's YAML configuration; empty for none.
	Config []byte
	// LogLevel is passed as --log-level; empty means "info". External
	// plugins only, as Args.
	LogLevel string
	// Args are the plugin's own flags, after the runner's. PluginDir in an
	// argument stands for the plugin's private directory in the run dir, so
	// that state such as a checkpoint stays inside the sandbox:
	// {"--state-dir", runtime.PluginDir + "/state"}. External plugins only:
	// the runtime launches pre-registered ones without flags.
	Args []string
}

// PluginDir stands for an external plugin's private directory in
// PluginSpec.Args: <run dir>/plugins/<idx>-<name>, which holds its log and
// configuration too and lives as long as the sandbox, across restarts of the
// plugin.
const PluginDir = "{plugin-dir}"

func (s PluginSpec) validate() error {
	if s.Binary == "" || s.Name == "" {
		return fmt.Errorf("plugin spec %+v: binary and name are required", s)
	}
	if n, err := strconv.Atoi(s.Idx); err != nil || len(s.Idx) != 2 || n < 0 {
		return fmt.Errorf("plugin %s: idx %q: expected two digits, 00 to 99", s.Name, s.Idx)
	}
	return nil
}

// validatePreRegistered also refuses what the runtime cannot pass to a
// plugin it launches itself.
func (s PluginSpec) validatePreRegistered() error {
	if err := s.validate(); err != nil {
		return err
	}
	if len(s.Args) > 0 {
		return fmt.Errorf("pre-registered plugin %s: args %q: the runtime launches pre-registered plugins without flags, expected none", s.id(), s.Args)
	}
	if s.LogLevel != "" {
		return fmt.Errorf("pre-registered plugin %s: log level %q: the runtime launches pre-registered plugins without flags, expected none", s.id(), s.LogLevel)
	}
	return nil
}

// id is the plugin's NRI id, "<idx>-<name>".
func (s PluginSpec) id() string { return s.Idx + "-" + s.Name }

// Plugin is a plugin process the sandbox started: an external plugin, or
// one the runtime launched (LaunchByRuntime), whose handle then follows the
// runtime's relaunches of it.
type Plugin struct {
	Spec PluginSpec
	// LogPath is the plugin's log: in its directory in the run dir, or the
	// runner's file in plugin.PreRegisteredLogDir for one the runtime
	// launched (shared by its successive processes).
	LogPath string
	process pluginProcess
}

// pluginProcess is a *process (an external plugin, the sandbox's child) or
// a *launched (the runtime's).
type pluginProcess interface {
	PID() int
	exited() bool
	stop(grace time.Duration)
	kill()
	waitFor(ctx context.Context, what string, check func(context.Context) error) error
}

// PID returns the plugin's process id.
func (p *Plugin) PID() int { return p.process.PID() }

// Running reports whether the plugin process is alive.
func (p *Plugin) Running() bool { return !p.process.exited() }

// Stop sends SIGTERM, and SIGKILL after grace.
func (p *Plugin) Stop(grace time.Duration) { p.process.stop(grace) }

// Kill sends SIGKILL and waits until the process is gone: a crash, which
// flushes nothing. Sandbox.StartPlugin with the same spec starts it again on
// the same directory (with LaunchByRuntime: lays it out again and restarts
// the runtime).
func (p *Plugin) Kill() { p.process.kill() }

// HTTPAddr returns the address the plugin serves HTTP on, from its log; ""
// until it has started serving.
func (p *Plugin) HTTPAddr() string { return p.LoggedAddr(runnerServingMsg) }

// runnerServingMsg starts the line the runner logs when it serves /metrics,
// /healthz and /readyz.
const runnerServingMsg = "serving /metrics"

// LoggedAddr returns the address the plugin last logged in a line whose
// message starts with msg (a plugin's own listener); "" if none yet.
func (p *Plugin) LoggedAddr(msg string) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return LoggedAddr(string(data), msg)
}

// LoggedAddr finds, in a plugin's logrus text log, the addr field of the
// last line whose message starts with msg (addr="127.0.0.1:41234").
func LoggedAddr(log, msg string) string {
	pattern := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `[^"]*".*\baddr="?([^"\s]+)`)
	m := pattern.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// WaitReady waits until the plugin's /readyz answers 200: registered with
// the runtime and synchronized.
func (p *Plugin) WaitReady(ctx context.Context) error {
	return p.process.waitFor(ctx, "plugin "+p.Spec.Name+" to be ready", func(ctx context.Context) error {
		addr := p.HTTPAddr()
		if addr == "" {
			return errors.New("no HTTP address in the plugin's log yet")
		}
		return httpOK(ctx, http.DefaultClient, "http://"+addr+"/readyz")
	})
}

// moduleRoot finds the directory of the go.mod above the working directory,
// so that plugin packages can be named as in the repository ("./e2e/testplugin").
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// BuildPlugin builds the plugin package pkg (a path relative to the module
// root, like "./e2e/testplugin") into dir/name and returns the binary's path.
func BuildPlugin(ctx context.Context, pkg, dir, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating plugin build dir: %w", err)
	}
	out := filepath.Join(dir, name)
	if _, err := runTool(ctx, nil, "go", "build", "-C", root, "-o", out, pkg); err != nil {
		return "", fmt.Errorf("building plugin %s: %w", pkg, err)
	}
	return out, nil
}

// pluginArgs are the runner's standard flags for an external plugin, its
// shared state going to sharedDir, then spec.Args with PluginDir replaced by
// dir.
func pluginArgs(spec PluginSpec, socket, configPath, sharedDir, dir string) []string {
	level := spec.LogLevel
	if level == "" {
		level = "info"
	}
	args := []string{spec.Binary, "--name", spec.Name, "--idx", spec.Idx, "--socket", socket,
		"--http-addr", "127.0.0.1:0", "--log-level", level, "--shared-dir", sharedDir}
	if configPath != "" {
		args = append(args, "--config", configPath)
	}
	for _, arg := range spec.Args {
		args = append(args, strings.ReplaceAll(arg, PluginDir, dir))
	}
	return args
}

// CDIDir in a pre-registered plugin's Config stands for the sandbox's CDI
// spec dir (Sandbox.CDISpecDir), which exists only once the sandbox starts,
// when the runtime already launches the plugin.
const CDIDir = "{cdi-dir}"

// PreRegisteredFromLayout returns a spec for every plugin of an installed
// pre-registered layout (`make install`): each NN-name executable of
// pluginDir, with confDir/NN-name.conf as its configuration if there is one.
// Anything else in pluginDir is an error, as it is for the runtime.
func PreRegisteredFromLayout(pluginDir, confDir string) ([]PluginSpec, error) {
	entries, err := os.ReadDir(pluginDir)
	if err != nil {
		return nil, fmt.Errorf("reading pre-registered layout: %w", err)
	}
	var specs []PluginSpec
	for _, e := range entries {
		idx, name, ok := strings.Cut(e.Name(), "-")
		spec := PluginSpec{Binary: filepath.Join(pluginDir, e.Name()), Name: name, Idx: idx}
		if !ok || e.IsDir() || spec.validate() != nil {
			return nil, fmt.Errorf("reading pre-registered layout: %s: expected only executables named NN-name in %s", e.Name(), pluginDir)
		}
		conf, err := os.ReadFile(filepath.Join(confDir, e.Name()+".conf"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reading pre-registered layout: %w", err)
		}
		spec.Config = conf
		specs = append(specs, spec)
	}
	return specs, nil
}

// installPreRegistered lays out a plugin the way the runtime launches it:
// the binary as NN-name in the plugin dir, its configuration as NN-name.conf
// in the plugin config dir (writePreRegisteredConfig).
func installPreRegistered(spec PluginSpec, nri NRIConfig, cdiDir string) error {
	if err := spec.validatePreRegistered(); err != nil {
		return err
	}
	data, err := os.ReadFile(spec.Binary)
	if err != nil {
		return fmt.Errorf("reading plugin binary %s: %w", spec.Binary, err)
	}
	// Through a rename: the runtime may still run the previous binary.
	if err := writeFileAtomic(filepath.Join(nri.PluginPath, spec.id()), data, 0o755); err != nil {
		return fmt.Errorf("installing pre-registered plugin %s: %w", spec.id(), err)
	}
	return writePreRegisteredConfig(spec, nri, cdiDir)
}

// writePreRegisteredConfig makes spec.Config, with CDIDir replaced by
// cdiDir, the plugin's NN-name.conf in the plugin config dir; an empty
// Config removes it, so that the plugin runs on its defaults.
func writePreRegisteredConfig(spec PluginSpec, nri NRIConfig, cdiDir string) error {
	path := filepath.Join(nri.PluginConfigPath, spec.id()+".conf")
	if len(spec.Config) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing configuration of pre-registered plugin %s: %w", spec.id(), err)
		}
		return nil
	}
	config := strings.ReplaceAll(string(spec.Config), CDIDir, cdiDir)
	if err := writeFileAtomic(path, []byte(config), 0o644); err != nil {
		return fmt.Errorf("installing configuration of pre-registered plugin %s: %w", spec.id(), err)
	}
	return nil
}

// writeFileAtomic writes path through a temporary file beside it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
