// Package nriplugin is the NRI side of sidecar-order. NRI cannot delay a
// container's start and sees a stop only after it happened, so the order is
// enforced inside the containers by the helper (package helper). At
// CreateContainer of an annotated pod the plugin writes the pod's spec into
// a coordination directory on the host, mounts that directory and the static
// helper into the container and puts the helper in front of the container's
// args. It removes the directory with the pod, and turns what the helpers
// report there into metrics. Pods without the sidecars annotation are not
// touched.
package nriplugin

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/annotations"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
)

// DefaultStateDir holds one coordination directory per annotated pod.
const DefaultStateDir = "/run/nri-suite/sidecar-order"

// HelperName is the helper binary's file name next to the plugin's.
const HelperName = "nri-sidecar-helper"

// Options are what the plugin needs besides the runner's Deps.
type Options struct {
	// HelperPath is the static helper binary; empty means HelperName next
	// to the plugin's executable.
	HelperPath string
	// StateDir is where the pods' coordination directories are made.
	StateDir string
}

// Plugin is the sidecar-order NRI plugin.
type Plugin struct {
	log     *logrus.Entry
	metrics *metrics
	runtime atomic.Value // string: the runtime's name and version

	cfgMu    sync.RWMutex
	helper   string
	stateDir string

	// argsDropped is set once a container was created without the args the
	// plugin set: the runtime's NRI predates args adjustments (CRI-O 1.34.0
	// vendors one). From then on pods are left alone, as without the plugin,
	// instead of half-adjusted.
	argsDropped atomic.Bool
	mu          sync.Mutex
	adjusted    map[string]bool // ids of containers created with the helper, until PostCreateContainer
}

// New checks the helper and the state directory and builds the plugin. It
// creates nothing: the state directory is made at the first annotated pod,
// once the configuration, which may name another, is known.
func New(deps plugin.Deps, opts Options) (*Plugin, error) {
	path, err := opts.check(flagKeys)
	if err != nil && opts.HelperPath == "" && errors.Is(err, os.ErrNotExist) {
		// A pre-registered plugin learns where the helper is from its
		// configuration, which arrives after this.
		deps.Log.WithError(err).Warn("no helper next to the plugin; annotated pods fail until the configuration names one")
		path, err = "", nil
	}
	if err != nil {
		return nil, fmt.Errorf("create sidecar-order plugin: %w", err)
	}
	p := &Plugin{log: deps.Log, metrics: newMetrics(deps.MetricsNamespace), helper: path, stateDir: opts.StateDir,
		adjusted: map[string]bool{}}
	p.runtime.Store("unknown runtime")
	if err := p.metrics.register(deps.Registry); err != nil {
		return nil, fmt.Errorf("create sidecar-order plugin: %w", err)
	}
	if path != "" {
		// Not "ready": the configuration, applied after this, may still refuse.
		p.log.WithFields(logrus.Fields{"helper": path, "state_dir": opts.StateDir}).Info("found the helper next to the plugin")
	}
	return p, nil
}

// pathKeys name the helper and the state directory in messages: the flags,
// or the configuration's keys.
type pathKeys struct{ helper, stateDir string }

var (
	flagKeys   = pathKeys{helper: "--helper", stateDir: "--state-dir"}
	configKeys = pathKeys{helper: "helper", stateDir: "state-dir"}
)

// check finds the helper and checks the state directory's path; it returns
// the helper's path.
func (o Options) check(keys pathKeys) (string, error) {
	if err := plugin.CheckPath(keys.stateDir, o.StateDir); err != nil {
		return "", err
	}
	if info, err := os.Stat(o.StateDir); err == nil && !info.IsDir() {
		return "", fmt.Errorf("%s: %q is not a directory (mode %s): expected a directory", keys.stateDir, o.StateDir, info.Mode())
	}
	if o.HelperPath != "" {
		if err := plugin.CheckPath(keys.helper, o.HelperPath); err != nil {
			return "", err
		}
	}
	return helperPath(o.HelperPath)
}

// config is the YAML configuration, for pre-registered plugins, which the
// runtime starts without flags. Absent keys keep the flags' values.
type config struct {
	Helper   string `yaml:"helper"`
	StateDir string `yaml:"state-dir"`
}

// Configure implements plugin.Configurable. A pre-registered plugin cannot
// find the helper next to itself: an executable in the runtime's plugin
// directory that is not named NN-name stops the runtime from loading any
// plugin, so the helper lives elsewhere and the configuration names it.
func (p *Plugin) Configure(data []byte, source string) error {
	p.cfgMu.RLock()
	c := config{Helper: p.helper, StateDir: p.stateDir}
	p.cfgMu.RUnlock()
	if err := plugin.DecodeConfig(data, source, &c); err != nil {
		return err
	}
	path, err := Options{HelperPath: c.Helper, StateDir: c.StateDir}.check(configKeys)
	if err != nil {
		return fmt.Errorf("configuration from %s: %w", source, err)
	}
	p.cfgMu.Lock()
	p.helper, p.stateDir = path, c.StateDir
	p.cfgMu.Unlock()
	p.log.WithFields(logrus.Fields{"helper": path, "state_dir": c.StateDir, "source": source}).Info("configured")
	return nil
}

// paths returns the helper and the state directory.
func (p *Plugin) paths() (helper, stateDir string) {
	p.cfgMu.RLock()
	defer p.cfgMu.RUnlock()
	return p.helper, p.stateDir
}

// helperPath finds the helper and checks that it is a static executable: it
// runs inside images that may have no dynamic loader and no libc.
func helperPath(path string) (string, error) {
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding the helper next to the plugin: %w", err)
		}
		path = filepath.Join(filepath.Dir(self), HelperName)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("helper %s: %w (build it with CGO_ENABLED=0 from ./plugins/sidecar-order/cmd/sidecar-helper, or pass --helper)", path, err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("helper %s: mode %s: expected an executable file", path, info.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("helper %s: expected a static ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("helper %s: dynamically linked: expected a static executable (CGO_ENABLED=0)", path)
		}
	}
	return path, nil
}

// podDirName is what a pod's directory may be called: its UID (or sandbox
// id), never a path.
var podDirName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// podDir is the coordination directory of the pod; "" when the pod has no
// usable name for one.
func (p *Plugin) podDir(pod *api.PodSandbox) (coord.Dir, error) {
	_, stateDir := p.paths()
	id := k8s.IdentityOf(pod, nil)
	name := id.PodUID
	if name == "" {
		name = id.PodSandboxID
	}
	if !podDirName.MatchString(name) {
		return coord.Dir{}, fmt.Errorf("pod %s/%s: uid %q: expected letters, digits, '.', '_' and '-' to name its coordination directory", id.Namespace, id.Pod, name)
	}
	return coord.Dir{Path: filepath.Join(stateDir, name)}, nil
}

// CreateContainer puts the helper in front of every container of an
// annotated pod.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	id := k8s.IdentityOf(pod, ctr)
	log := p.log.WithFields(id.Fields())
	spec, err := annotations.Parse(pod.GetAnnotations())
	if err != nil {
		p.metrics.invalid.Inc()
		return nil, nil, fmt.Errorf("sidecar-order: container %s: %w", id, err)
	}
	if spec == nil {
		return nil, nil, nil
	}
	if p.argsDropped.Load() {
		p.metrics.unsupported.Inc()
		log.WithField("runtime", p.runtime.Load()).Warn("the runtime drops NRI args adjustments: container left alone, its order is not enforced")
		return nil, nil, nil
	}
	role := helper.RoleMain
	if spec.Sidecar(id.Container) >= 0 {
		role = helper.RoleSidecar
	} else if len(spec.Mains) > 0 && !slices.Contains(spec.Mains, id.Container) {
		// Neither a sidecar nor a declared main: an init container, say.
		log.WithField("mains", spec.Mains).Info("not a sidecar nor a declared main: left alone")
		return nil, nil, nil
	}
	helperBin, _ := p.paths()
	if helperBin == "" {
		return nil, nil, fmt.Errorf("sidecar-order: container %s: no helper binary: expected --helper or helper in the configuration (a static build of ./plugins/sidecar-order/cmd/sidecar-helper)", id)
	}
	args := ctr.GetArgs()
	if len(args) == 0 {
		return nil, nil, fmt.Errorf("sidecar-order: container %s: the runtime passed no args (entrypoint and command): nothing for the helper to run", id)
	}
	dir, err := p.podDir(pod)
	if err != nil {
		return nil, nil, fmt.Errorf("sidecar-order: %w", err)
	}
	if err := p.prepare(dir, spec, role, id.Container); err != nil {
		return nil, nil, fmt.Errorf("sidecar-order: container %s: %w", id, err)
	}

	adjust := &api.ContainerAdjustment{}
	adjust.AddMount(&api.Mount{Source: helperBin, Destination: helper.BinaryPath, Type: "bind",
		Options: []string{"bind", "ro", "nosuid", "nodev"}})
	adjust.AddMount(&api.Mount{Source: dir.Path, Destination: helper.DirPath, Type: "bind",
		Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}})
	adjust.SetArgs(HelperArgs(role, id.Container, args))
	p.metrics.containers.WithLabelValues(role).Inc()
	p.mu.Lock()
	p.adjusted[ctr.GetId()] = true
	p.mu.Unlock()
	log.WithFields(logrus.Fields{"role": role, "sidecars": len(spec.Sidecars), "dir": dir.Path}).Info("put the helper in front of the container")
	log.WithField("args", args).Debug("original args")
	return adjust, nil, nil
}

// HelperArgs are the args of a container that runs args behind the helper.
func HelperArgs(role, container string, args []string) []string {
	return append([]string{helper.BinaryPath, "--role", role, "--container", container, "--"}, args...)
}

// prepare makes the pod's directory, writes its spec and registers a main.
func (p *Plugin) prepare(dir coord.Dir, spec *coord.Pod, role, container string) error {
	// 0711: the pods' directories are reachable by their containers, but
	// no host user can list which pods have one.
	if err := os.MkdirAll(filepath.Dir(dir.Path), 0o711); err != nil {
		return fmt.Errorf("making the state directory: %w", err)
	}
	if err := dir.Make(); err != nil {
		return err
	}
	if err := dir.WriteSpec(spec); err != nil {
		return err
	}
	if role == helper.RoleMain {
		return dir.RegisterMain(container)
	}
	return nil
}

// SetRuntime implements plugin.RuntimeAware.
func (p *Plugin) SetRuntime(name, version string) { p.runtime.Store(name + " " + version) }

// PostCreateContainer checks that the runtime applied the args: a runtime
// whose NRI predates args adjustments drops them silently, and the helper
// would then never run.
func (p *Plugin) PostCreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	adjusted := p.adjusted[ctr.GetId()]
	delete(p.adjusted, ctr.GetId())
	p.mu.Unlock()
	if args := ctr.GetArgs(); !adjusted || len(args) > 0 && args[0] == helper.BinaryPath {
		return nil
	}
	p.metrics.unsupported.Inc()
	if !p.argsDropped.Swap(true) {
		p.log.WithFields(k8s.IdentityOf(pod, ctr).Fields()).WithField("runtime", p.runtime.Load()).
			Error("the runtime dropped the args adjustment (its NRI predates args adjustments; containerd >= 2.2 has them): sidecar order cannot be enforced, leaving annotated pods alone from now on")
	}
	return nil
}

// RemoveContainer forgets a container whose creation failed after the
// plugin adjusted it.
func (p *Plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	delete(p.adjusted, ctr.GetId())
	p.mu.Unlock()
	return nil
}

// StopContainer collects what the container's helper reported.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, _ *api.Container) ([]*api.ContainerUpdate, error) {
	p.collect(pod)
	return nil, nil
}

// StopPodSandbox collects the reports of a pod whose containers all exited
// (a completed Job-like pod gets no StopContainer for them).
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.collect(pod)
	return nil
}

// RemovePodSandbox collects the last reports and removes the pod's
// directory, if the plugin made it.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	dir, ok := p.collect(pod)
	if !ok {
		return nil
	}
	if err := os.RemoveAll(dir.Path); err != nil {
		return fmt.Errorf("sidecar-order: removing the coordination directory of pod %s: %w", k8s.IdentityOf(pod, nil), err)
	}
	p.log.WithFields(k8s.IdentityOf(pod, nil).Fields()).WithField("dir", dir.Path).Info("removed the pod's coordination directory")
	return nil
}

// collect turns the pod's reports into metrics; ok is false when the pod
// has no coordination directory the plugin made.
func (p *Plugin) collect(pod *api.PodSandbox) (coord.Dir, bool) {
	dir, err := p.podDir(pod)
	if err != nil || !dir.Owned() {
		return dir, false
	}
	reports, err := dir.TakeReports()
	for _, r := range reports {
		p.metrics.observe(r)
	}
	if err != nil {
		p.metrics.badReports.Inc()
		p.log.WithFields(k8s.IdentityOf(pod, nil).Fields()).WithError(err).Warn("reading the helpers' reports")
	}
	return dir, true
}

// Synchronize removes the directories of pods that went while the plugin
// was away, so that a missed RemovePodSandbox leaves nothing behind. It
// removes only the directories the plugin made (coord.Dir.Owned): the state
// directory may hold others, such as the shared state's when pointed at it.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	keep := map[string]bool{}
	for _, pod := range pods {
		if dir, err := p.podDir(pod); err == nil {
			keep[dir.Path] = true
		}
	}
	_, stateDir := p.paths()
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // made at the first annotated pod
	}
	if err != nil {
		return nil, fmt.Errorf("sidecar-order: listing %s: %w", stateDir, err)
	}
	for _, e := range entries {
		path := filepath.Join(stateDir, e.Name())
		if !e.IsDir() || keep[path] {
			continue
		}
		if !(coord.Dir{Path: path}).Owned() {
			p.log.WithField("dir", path).Debug("not a coordination directory the plugin made: left alone")
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			p.log.WithError(err).WithField("dir", path).Warn("removing the coordination directory of a pod that is gone")
			continue
		}
		p.log.WithField("dir", path).Info("removed the coordination directory of a pod that is gone")
	}
	return nil, nil
}
