// Package nriplugin is the NRI side of the device-injector: at
// CreateContainer it reads what the container asks for (package request),
// checks it against the namespace's policy (package config), resolves CDI
// names with the CDI cache (package resolve), checks everything against each
// other and the container (plan), and returns the adjustment: CDI devices by
// name in runtime mode, plain device nodes, mounts, env and hooks in plugin
// mode. The located device nodes are published in the shared state for the
// plugins that run later (topology-aware), and removed with the container.
// The devices' health (package health) is checked at creation and published
// per device and per container. At Synchronize, containers created while the
// plugin was not connected get their records rebuilt from their pods'
// annotations (sync.go).
package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/nodecondition"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/health"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// Options are what the plugin needs besides the runner's Deps.
type Options struct {
	// SysfsRoot is where device locality is looked up (usually /sys).
	SysfsRoot string
}

// Plugin is the device-injector NRI plugin.
type Plugin struct {
	log       *logrus.Entry
	metrics   *metrics
	resolver  *resolve.Resolver
	records   *state.Records[state.ContainerDevices] // nil: sharing disabled
	devHealth *state.Records[state.DeviceHealthSet]  // nil: sharing disabled
	ctrHealth *state.Records[state.ContainerHealth]  // nil: sharing disabled
	sysfsRoot string
	monitor   *health.Monitor
	api       apiReport
	// devHealthStale: the device health record failed to be written; only
	// the monitor's goroutine uses it.
	devHealthStale bool
	stop           context.CancelFunc
	stopped        chan struct{}

	ctrMu      sync.Mutex
	containers map[string]*tracked // by container id

	mu      sync.RWMutex
	cfg     config.Config
	runtime string // the runtime's name as NRI reported it at registration
}

// New builds the plugin with the default configuration; Configure replaces
// it.
func New(deps plugin.Deps, opts Options) (*Plugin, error) {
	if err := plugin.CheckAbsPath("--sysfs-root", opts.SysfsRoot); err != nil {
		return nil, fmt.Errorf("create device-injector plugin: %w", err)
	}
	cfg, err := config.Parse(nil, "built-in defaults")
	if err != nil {
		return nil, err
	}
	p := &Plugin{log: deps.Log, metrics: newMetrics(deps.MetricsNamespace), sysfsRoot: opts.SysfsRoot, cfg: cfg,
		containers: map[string]*tracked{}}
	if deps.SharedDir != "" {
		if p.records, err = state.ContainerDeviceRecords(deps.SharedDir); err != nil {
			return nil, fmt.Errorf("create device-injector plugin: %w", err)
		}
		if p.devHealth, err = state.DeviceHealthRecords(deps.SharedDir); err != nil {
			return nil, fmt.Errorf("create device-injector plugin: %w", err)
		}
		if p.ctrHealth, err = state.ContainerHealthRecords(deps.SharedDir); err != nil {
			return nil, fmt.Errorf("create device-injector plugin: %w", err)
		}
	}
	p.resolver = resolve.New(cfg.SpecDirs, deps.Log)
	p.monitor = health.New(health.Sources{Inventory: p.resolver.Inventory, InUse: p.inUse}, cfg.HealthInterval)
	if err := p.metrics.register(deps.Registry, deps.MetricsNamespace, p.resolver.SpecErrors, p.resolver.Devices, p.monitor.Snapshot); err != nil {
		p.resolver.Close()
		return nil, fmt.Errorf("create device-injector plugin: register metrics: %w", err)
	}
	p.api = apiReport{reported: map[string]state.DeviceHealth{}}
	if deps.Events != nil {
		p.api.events = deps.Events
	}
	switch {
	case deps.APIClient != nil && deps.NodeName == "":
		p.log.Warn("no --node-name (nor $NODE_NAME): no " + string(ConditionDevicesHealthy) + " condition on the node")
	case deps.APIClient != nil:
		p.api.condition = nodecondition.New(deps.APIClient, deps.NodeName, ConditionDevicesHealthy, deps.Log)
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop, p.stopped = stop, make(chan struct{})
	go func() {
		defer close(p.stopped)
		var wg sync.WaitGroup
		if p.api.condition != nil {
			wg.Go(func() { p.api.condition.Run(ctx) })
		}
		p.monitor.Run(ctx, p.healthChecked)
		wg.Wait()
	}()
	return p, nil
}

// Configure implements plugin.Configurable.
func (p *Plugin) Configure(data []byte, source string) error {
	cfg, err := config.Parse(data, source)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(cfg.SpecDirs, p.cfg.SpecDirs) {
		p.resolver.SetSpecDirs(cfg.SpecDirs)
	}
	p.cfg = cfg
	p.monitor.SetInterval(cfg.HealthInterval)
	p.monitor.SetProbes(health.Probes{Checks: cfg.HealthChecks, Concurrency: cfg.CheckConcurrency})
	log := p.log.WithFields(logrus.Fields{"source": source, "mode": cfg.EffectiveMode(p.runtime), "spec_dirs": cfg.SpecDirs,
		"health_checks": len(cfg.HealthChecks)})
	for _, problem := range resolve.DirProblems(cfg.SpecDirs) {
		log.Warn(problem)
	}
	log.Info("configured")
	return nil
}

// SetRuntime implements plugin.RuntimeAware: mode auto depends on whether the
// runtime applies NRI's CDI adjustments.
func (p *Plugin) SetRuntime(name, version string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runtime = name
	p.log.WithFields(logrus.Fields{"runtime": name, "version": version, "mode": p.cfg.EffectiveMode(name)}).Info("attached to runtime")
}

// Close stops watching the spec directories and devices.
func (p *Plugin) Close() error {
	p.stop()
	<-p.stopped
	p.resolver.Close()
	return nil
}

// CreateContainer gives the container the devices and mounts it asks for,
// or fails its creation saying why.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.mu.RLock()
	cfg, runtime := p.cfg, p.runtime
	p.mu.RUnlock()
	id := k8s.IdentityOf(pod, ctr)
	mode := cfg.EffectiveMode(runtime)

	inj, err := p.inject(cfg, mode, pod, ctr, id)
	if err != nil {
		reason := failureReason(err)
		// The paths and names it quotes are the pod's, as long as its
		// annotations (request.MaxValue), and the CDI cache's spec errors
		// are as long as the specs make them.
		err = quote.Error(err)
		p.metrics.failures.WithLabelValues(reason).Inc()
		p.log.WithFields(id.Fields()).WithField("reason", reason).WithError(err).Info("refused container")
		return nil, nil, fmt.Errorf("device-injector: container %s: %w", id, err)
	}
	if inj == nil {
		return nil, nil, nil
	}
	if err := p.publish(id, inj.devices); err != nil {
		p.metrics.failures.WithLabelValues(failureReason(err)).Inc()
		p.log.WithFields(id.Fields()).WithError(err).Warn("refused container: its device locality could not be published")
		return nil, nil, fmt.Errorf("device-injector: container %s: %w", id, err)
	}
	p.track(id, inj.devices)
	for kind, n := range inj.counts {
		p.metrics.injections.WithLabelValues(string(mode), kind).Add(float64(n))
	}
	p.log.WithFields(id.Fields()).WithFields(logrus.Fields{
		"mode": mode, "cdi": inj.counts[kindCDI], "nodes": inj.counts[kindNode], "mounts": inj.counts[kindMount],
	}).Info("injected devices")
	return inj.adjust, nil, nil
}

// RemoveContainer drops the container's record.
func (p *Plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	if p.records != nil {
		if err := p.records.Remove(ctr.GetId()); err != nil {
			p.recordError("remove device record", err)
		}
	}
	p.untrack(ctr.GetId())
	return nil
}

// injection is what one container gets.
type injection struct {
	adjust  *api.ContainerAdjustment
	devices []state.InjectedDevice
	counts  map[string]int // by kind
}

// inject works out the container's injection; nil when it asks for nothing.
func (p *Plugin) inject(cfg config.Config, mode config.Mode, pod *api.PodSandbox, ctr *api.Container, id k8s.Identity) (*injection, error) {
	req, err := request.Parse(pod.GetAnnotations(), id.Container)
	if err != nil {
		return nil, err
	}
	if req.Empty() {
		return nil, nil
	}
	mounts, err := checkPolicy(cfg.Policy.For(id.Namespace), id.Namespace, pod.GetAnnotations(), req)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(req.CDI))
	for i, c := range req.CDI {
		names[i] = c.Name
	}
	if err := p.checkHealth(cfg.UnhealthyAction, pod.GetAnnotations(), req, p.log.WithFields(id.Fields())); err != nil {
		return nil, err
	}
	resolved, err := p.resolver.Resolve(names, resolve.Owner{UID: ctr.GetUser().GetUid(), GID: ctr.GetUser().GetGid()})
	if err != nil {
		return nil, err
	}

	pl := newPlan(ctr)
	var errs []error
	for _, d := range resolved {
		errs = append(errs, pl.addCDI(d, mode))
	}
	nodes := make([]rspec.LinuxDevice, 0, len(req.Devices))
	for _, d := range req.Devices {
		node, err := hostDevice(d)
		if err == nil {
			err = pl.addDevice(node, source{name: "annotation " + d.Key})
			nodes = append(nodes, node)
		}
		errs = append(errs, err)
	}
	for i, m := range mounts {
		errs = append(errs, pl.addMount(m, source{name: "annotation " + req.Mounts[i].Key}))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &injection{
		adjust:  pl.adjustment(mode),
		devices: p.locate(resolved, nodes, id),
		counts:  map[string]int{kindCDI: len(resolved), kindNode: len(nodes), kindMount: len(req.Mounts)},
	}, nil
}

// checkPolicy checks everything asked for, reporting every refusal with the
// annotation that asked, and returns the mounts as they are to be mounted:
// their sources resolved on the host (hostMount).
func checkPolicy(rule config.Rule, namespace string, annotations map[string]string, req request.Request) ([]rspec.Mount, error) {
	var errs []error
	refuse := func(key string, err error) {
		if err != nil {
			errs = append(errs, &request.Error{Key: key, Value: annotations[key], Err: err})
		}
	}
	for _, c := range req.CDI {
		refuse(c.Key, rule.AllowCDI(namespace, c.Name))
	}
	for _, d := range req.Devices {
		refuse(d.Key, allowDevicePath(rule, namespace, d.Path))
	}
	mounts := make([]rspec.Mount, len(req.Mounts))
	for i, m := range req.Mounts {
		var err error
		mounts[i], err = hostMount(rule, namespace, m)
		refuse(m.Key, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return mounts, nil
}

// locate describes the injected device nodes with their NUMA locality.
func (p *Plugin) locate(cdiDevices []resolve.Device, nodes []rspec.LinuxDevice, id k8s.Identity) []state.InjectedDevice {
	var out []state.InjectedDevice
	for _, d := range cdiDevices {
		if len(d.Nodes) == 0 {
			out = append(out, state.InjectedDevice{Name: d.Name, Kind: state.DeviceKindCDI, NUMANode: locality.UnknownNode})
		}
		for _, n := range d.Nodes {
			out = append(out, p.locateNode(d.Name, state.DeviceKindCDI, n, id))
		}
	}
	for _, n := range nodes {
		out = append(out, p.locateNode(n.Path, state.DeviceKindNode, n, id))
	}
	return out
}

// locateNode looks a node up under the sysfs root. Locality only informs
// placement, so a node sysfs does not know (virtual devices such as
// /dev/null) is recorded with an unknown node rather than failing.
func (p *Plugin) locateNode(name, kind string, n rspec.LinuxDevice, id k8s.Identity) state.InjectedDevice {
	out := state.InjectedDevice{Name: name, Kind: kind, Path: n.Path, Type: n.Type, Major: n.Major, Minor: n.Minor,
		NUMANode: locality.UnknownNode}
	sysKind := locality.Char
	if n.Type == "b" {
		sysKind = locality.Block
	}
	loc, err := locality.OfDevice(p.sysfsRoot, sysKind, n.Major, n.Minor)
	if err != nil {
		entry := p.log.WithFields(id.Fields()).WithField("device", n.Path).WithError(err)
		if errors.Is(err, locality.ErrNotFound) {
			entry.Debug("device unknown to sysfs; its locality is unknown")
		} else {
			entry.Warn("could not locate device; its locality is unknown")
		}
		return out
	}
	out.NUMANode = loc.NUMANode
	if !loc.CPUs.IsEmpty() {
		out.LocalCPUs = loc.CPUs.String()
	}
	return out
}

// ErrPublish is wrapped by the error for a container whose device record
// could not be written.
var ErrPublish = errors.New("publishing device locality")

// publish writes the container's record before CreateContainer returns, so
// that topology-aware, which runs next, aligns the container with its
// devices. A failure fails the creation: the container would otherwise run
// unaligned without anyone saying so.
func (p *Plugin) publish(id k8s.Identity, devices []state.InjectedDevice) error {
	if p.records == nil {
		return nil
	}
	rec := state.ContainerDevices{
		ContainerID: id.ContainerID, PodUID: id.PodUID, Namespace: id.Namespace,
		Pod: id.Pod, Container: id.Container, Devices: devices,
	}
	if err := p.records.Publish(id.ContainerID, rec); err != nil {
		p.metrics.recordErrors.Inc()
		return fmt.Errorf("%w for topology-aware in %s: %w", ErrPublish, p.records.Dir(), err)
	}
	return nil
}

func (p *Plugin) recordError(what string, err error) {
	p.metrics.recordErrors.Inc()
	p.log.WithError(err).Warn(what)
}
