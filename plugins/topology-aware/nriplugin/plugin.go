// Package nriplugin is the NRI side of the topology-aware plugin: it turns
// the runtime's container events into requests for the allocation policy
// (package policy), applies the placements as cpuset adjustments and updates,
// keeps the policy's state in a checkpoint so that a restart moves nothing,
// publishes every placement in the shared state, and serves metrics.
//
// The policy is not safe for concurrent use and every NRI request holds the
// runtime's lock anyway, so one mutex serializes the handlers; nothing slow
// happens under it (the checkpoint and the records are written behind, see
// persister).
package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/config"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/nrt"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// DefaultStateDir holds the checkpoint. It is under /run, a tmpfs: the
// checkpoint must survive a restart of the plugin or of the runtime (the
// containers keep running, so must their placements), and must not survive
// a reboot (no container survives one, and a stale checkpoint would make the
// first containers after boot look like conflicts).
const DefaultStateDir = "/run/nri-suite/topology-aware"

// CheckpointFile is the checkpoint's name within the state directory.
const CheckpointFile = "checkpoint.json"

// Options are what the plugin needs besides the runner's Deps.
type Options struct {
	// Topology is the machine, discovered at start.
	Topology *topology.Topology
	// SysfsRoot is where device locality is looked up (usually /sys).
	SysfsRoot string
	// StateDir holds the checkpoint (DefaultStateDir), unless the
	// configuration's state-dir names another directory.
	StateDir string
	// Devices, if set, supplies the devices of a container that NRI does not
	// show (CDI devices injected by a lower-index plugin). Unset, they are
	// device-injector's records in the shared state (InjectedDevices), unless
	// sharing is disabled.
	Devices DeviceSource
	// Classes applies the block I/O and RDT classes on the node; nil: the
	// plugin touches nothing of the node for them (a simulation, a test),
	// and RDT counts as unavailable.
	Classes *classes.Node
	// PublishNRT publishes the node's NodeResourceTopology through the API
	// server (nrt.go), if the plugin can reach one.
	PublishNRT bool
}

// Plugin is the topology-aware NRI plugin.
type Plugin struct {
	topo     *topology.Topology
	log      *logrus.Entry
	metrics  *metrics
	requests RequestBuilder
	persist  *persister
	reapply  *reapplier
	// nrt publishes the NodeResourceTopology; nil: not published.
	nrt     *nrt.Publisher
	classes *classes.Tracker
	// flagCheckpoint is the checkpoint in --state-dir.
	flagCheckpoint *state.Checkpoint[Saved]

	mu  sync.Mutex
	cfg policy.Config
	// checkpoint is where the state is saved: flagCheckpoint, or the one in
	// the configuration's state-dir. moved is where it was saved before the
	// configuration moved it: the state until checkpoint has one, and
	// removed once checkpoint holds the state taken from it (see
	// savedStateLocked and retireMoved).
	checkpoint, moved *state.Checkpoint[Saved]
	// readAtStart is flagCheckpoint as New read it, for the first
	// Synchronize (nil once used): decoding 10,000 containers' state takes
	// most of that Synchronize's time, which NRI bounds (2 s), and nothing
	// writes the checkpoint before it.
	readAtStart *loadedCheckpoint
	// pol is nil until the first Synchronize.
	pol *policy.Policy
	// pending are containers whose placement changed in an event that could
	// not return updates (RemoveContainer); the next handler that can
	// delivers them, with their placement as it is then.
	pending map[string]bool
	// starts are the containers created and not started yet (starting.go).
	starts startTracker
	// events posts Events about pods to the API server (a nil
	// *apievents.Recorder without one posts nothing).
	events eventPoster
	// unsolicited: the runtime takes updates outside of its requests
	// safely (runtime.go); else what the reapplier would push goes with the
	// next reply that carries updates.
	unsolicited atomic.Bool
}

// eventPoster posts an Event about a pod without waiting
// (apievents.Recorder).
type eventPoster interface {
	Post(pod apievents.PodRef, eventType, reason, message string)
}

// New builds the plugin with the default configuration (see config.Parse);
// Configure replaces it.
func New(deps plugin.Deps, opts Options) (*Plugin, error) {
	if opts.Topology == nil {
		return nil, errors.New("create topology-aware plugin: no topology")
	}
	if err := plugin.CheckPath("--state-dir", opts.StateDir); err != nil {
		return nil, fmt.Errorf("create topology-aware plugin: %w", err)
	}
	cfg, err := config.Load(nil, "built-in defaults", opts.Topology)
	if err != nil {
		return nil, err
	}
	cp, err := newCheckpoint(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("create topology-aware plugin: %w", err)
	}
	// Placements are published in the runner's shared state directory,
	// unless sharing is disabled.
	var pools *state.Records[state.PoolRecord]
	var placements *state.Records[state.PlacementRecord]
	if deps.SharedDir != "" {
		if pools, err = state.PoolRecords(deps.SharedDir); err != nil {
			return nil, fmt.Errorf("create topology-aware plugin: %w", err)
		}
		if placements, err = state.PlacementRecords(deps.SharedDir); err != nil {
			return nil, fmt.Errorf("create topology-aware plugin: %w", err)
		}
		if opts.Devices == nil {
			if opts.Devices, err = NewInjectedDevices(deps.SharedDir); err != nil {
				return nil, fmt.Errorf("create topology-aware plugin: %w", err)
			}
		}
	}
	if opts.Classes == nil {
		opts.Classes = classes.NewNode(deps.Log, classes.NodeOptions{})
	}
	p := &Plugin{
		topo:           opts.Topology,
		log:            deps.Log,
		metrics:        newMetrics(deps.MetricsNamespace),
		requests:       RequestBuilder{SysfsRoot: opts.SysfsRoot, Devices: opts.Devices, Log: deps.Log},
		flagCheckpoint: cp,
		checkpoint:     cp,
		readAtStart:    loadCheckpoint(cp),
		cfg:            cfg.Config,
		pending:        map[string]bool{},
		starts:         newStartTracker(),
		classes:        classes.NewTracker(opts.Classes, deps.MetricsNamespace),
		events:         deps.Events,
	}
	if err := p.classes.Configure(cfg.Classes); err != nil {
		return nil, fmt.Errorf("create topology-aware plugin: %w", err)
	}
	if err := p.metrics.register(deps.Registry, newUsageCollector(deps.MetricsNamespace, p.usage), p.classes.Collectors()...); err != nil {
		return nil, fmt.Errorf("create topology-aware plugin: register metrics: %w", err)
	}
	p.persist = newPersister(cp, pools, placements, p.collect, p.retireMoved, deps.Log, p.metrics)
	p.reapply = newReapplier(deps.Updater, p.currentUpdates, deps.Log, p.metrics)
	p.unsolicited.Store(true)
	if opts.PublishNRT {
		p.nrt = p.connectNRT(deps)
	}
	return p, nil
}

// loadedCheckpoint is what a checkpoint's Load returned.
type loadedCheckpoint struct {
	path  string
	saved Saved
	found bool
	err   error
}

func loadCheckpoint(cp *state.Checkpoint[Saved]) *loadedCheckpoint {
	saved, found, err := cp.Load()
	return &loadedCheckpoint{path: cp.Path(), saved: saved, found: found, err: err}
}

// newCheckpoint is the checkpoint in dir.
func newCheckpoint(dir string) (*state.Checkpoint[Saved], error) {
	return state.NewCheckpoint[Saved](filepath.Join(dir, CheckpointFile), CheckpointVersion)
}

// Configure implements plugin.Configurable. The new configuration takes
// effect at the next Synchronize, which NRI always sends after it: the
// policy is rebuilt there from the live state. The classes apply on the
// node at once, to the containers created from now on. A state-dir in the
// configuration wins over --state-dir; the state is saved there from now on.
func (p *Plugin) Configure(data []byte, source string) error {
	cfg, err := config.Load(data, source, p.topo)
	if err != nil {
		return err
	}
	if err := p.classes.Configure(cfg.Classes); err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	cp := p.flagCheckpoint
	if cfg.StateDir != "" {
		if cp, err = newCheckpoint(cfg.StateDir); err != nil {
			return fmt.Errorf("config %s: %w", source, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg.Config
	if cp.Path() != p.checkpoint.Path() {
		p.log.WithFields(logrus.Fields{"from": p.checkpoint.Path(), "to": cp.Path(), "source": source}).Info("checkpoint moved by the configuration")
		p.checkpoint, p.moved = cp, p.checkpoint
		p.persist.UseCheckpoint(cp)
	}
	p.log.WithField("source", source).WithField("config", fmt.Sprintf("%+v", cfg)).Debug("configuration loaded")
	return nil
}

// Close stops re-applying placements and writes the state a last time.
func (p *Plugin) Close() error {
	p.reapply.Close()
	if p.nrt != nil {
		p.nrt.Close()
	}
	if err := p.persist.Close(); err != nil {
		return fmt.Errorf("close topology-aware plugin: %w", err)
	}
	return nil
}

// CreateContainer places the container and updates the containers whose
// CPUs the placement changed.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pol, err := p.policyLocked()
	if err != nil {
		return nil, nil, err
	}
	req, id, err := p.requests.Build(pod, ctr, nil)
	if err != nil {
		return nil, nil, p.reject(id, err)
	}
	cls, err := p.classes.Assign(classes.Container{Name: id.Container, Namespace: id.Namespace, QOS: req.QOS, PodAnnotations: pod.GetAnnotations()})
	if err != nil {
		return nil, nil, p.reject(id, &requestError{reason: invalidAnnotationReason, err: err})
	}
	start := time.Now()
	pl, others, err := pol.Allocate(req)
	p.metrics.observe(opAllocate, start)
	if err != nil {
		return nil, nil, p.reject(id, err)
	}
	adjust := &api.ContainerAdjustment{}
	adjust.SetLinuxCPUSetCPUs(pl.CPUs.String())
	if !pl.Mems.IsEmpty() {
		adjust.SetLinuxCPUSetMems(pl.Mems.String())
	}
	p.granted(id, "placed container", pl, len(others), p.classes.Set(ctr.GetId(), adjust, cls))
	updates := p.updatesLocked(others, ctr.GetId())
	p.starts.created(ctr.GetId()) // after updatesLocked: its own updates are not lost to it
	return adjust, updates, nil
}

// UpdateContainer resizes the container in place to the new resources.
func (p *Plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pol, err := p.policyLocked()
	if err != nil {
		return nil, err
	}
	req, id, err := p.requests.Build(pod, ctr, res)
	if err != nil {
		return nil, p.reject(id, err)
	}
	op, place := opResize, pol.Resize
	if _, known := pol.Placement(req.ContainerID); !known {
		// Created while the plugin was away and not running at Synchronize.
		op, place = opAllocate, pol.Allocate
	}
	start := time.Now()
	pl, others, err := place(req)
	p.metrics.observe(op, start)
	if err != nil {
		return nil, p.reject(id, err)
	}
	p.granted(id, "resized container", pl, len(others), nil)
	// The resize itself applies, or fails the request.
	return append(p.updatesLocked(others, ctr.GetId()), containerUpdates([]policy.Placement{pl}, mustApply)...), nil
}

// StopContainer releases the container's CPUs and memory; the shared
// containers get them back in the same call.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nil, nil
	}
	return p.updatesLocked(p.releaseLocked(pod, ctr), ""), nil
}

// PostStartContainer pushes the container's placement again, once this
// handler returned, if an update of it before its start may have been lost
// (see starting.go), or if the runtime shows it elsewhere: a placement
// counts as applied only once the runtime shows it.
func (p *Plugin) PostStartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nil
	}
	pl, placed := p.pol.Placement(ctr.GetId())
	why := ""
	switch {
	case p.starts.started(ctr.GetId(), pl.Pool == policy.PoolShared):
		why = "an update before its start may have been lost"
	case !shows(ctr, pl):
		why = "the runtime shows it elsewhere"
	}
	if placed && why != "" {
		names := k8s.IdentityOf(pod, ctr).Fields()
		names["why"] = why
		p.reapplyLocked(ctr.GetId(), names)
	}
	return nil
}

// shows reports whether the runtime shows the container on its placement,
// or tells nothing of its cpuset to compare (no CPU resources at all).
func shows(ctr *api.Container, pl policy.Placement) bool {
	cpu := ctr.GetLinux().GetResources().GetCpu()
	if cpu == nil {
		return true
	}
	return showsSet(cpu.GetCpus(), pl.CPUs) && (pl.Mems.IsEmpty() || showsSet(cpu.GetMems(), pl.Mems))
}

func showsSet(text string, set cpuset.CPUSet) bool {
	got, err := cpuset.Parse(text)
	return err == nil && got.Equal(set)
}

// currentUpdates returns the updates that set the containers to their
// placements as they are now; containers no longer placed are left out.
// The reapplier calls it outside the handlers.
func (p *Plugin) currentUpdates(ids []string) []*api.ContainerUpdate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nil
	}
	pls := make([]policy.Placement, 0, len(ids))
	for _, id := range ids {
		if pl, ok := p.pol.Placement(id); ok {
			pls = append(pls, pl)
		}
	}
	return containerUpdates(pls, mustApply)
}

// RemoveContainer releases the container if StopContainer did not (a
// container removed without being stopped). NRI lets RemoveContainer return
// no updates, so those it causes wait for the next event that can.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nil
	}
	for _, pl := range p.releaseLocked(pod, ctr) {
		p.pending[pl.ContainerID] = true
	}
	return nil
}

// StopPodSandbox releases what the Topology Manager's pod scope holds for
// the pod. NRI lets it return no updates: the shared containers it grows
// get theirs through the Updater, and at the latest with the next event
// that can return updates.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releasePodLocked(pod)
	return nil
}

// RemovePodSandbox is StopPodSandbox for a sandbox removed without a stop.
func (p *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return p.StopPodSandbox(ctx, pod)
}

func (p *Plugin) releasePodLocked(pod *api.PodSandbox) {
	if p.pol == nil {
		return
	}
	changed, held := p.pol.ReleasePod(pod.GetUid())
	for _, pl := range changed {
		p.pending[pl.ContainerID] = true
		p.reapplyLocked(pl.ContainerID, logrus.Fields{"container_id": pl.ContainerID})
	}
	if held {
		p.changed()
		p.log.WithFields(logrus.Fields{"pod": pod.GetName(), "namespace": pod.GetNamespace(), "updated": len(changed)}).
			Info("released the pod's reservation")
	}
}

// releaseLocked forgets the container and returns the placements that
// changed; a container the policy does not know is a no-op.
func (p *Plugin) releaseLocked(pod *api.PodSandbox, ctr *api.Container) []policy.Placement {
	pl, known := p.pol.Placement(ctr.GetId())
	if !known {
		return nil
	}
	start := time.Now()
	others := p.pol.Release(ctr.GetId())
	p.metrics.observe(opRelease, start)
	delete(p.pending, ctr.GetId())
	p.starts.forget(ctr.GetId())
	p.classes.Forget(ctr.GetId())
	p.changed()
	p.log.WithFields(k8s.IdentityOf(pod, ctr).Fields()).WithFields(logrus.Fields{
		"pool": pl.Pool, "cpus": pl.CPUs.String(), "mems": pl.Mems.String(), "updated": len(others),
	}).Info("released container")
	return others
}

// changed tells whoever publishes the state behind the handlers that it
// changed: the checkpoint and records, and the NodeResourceTopology.
func (p *Plugin) changed() {
	p.persist.Changed()
	if p.nrt != nil {
		p.nrt.Changed()
	}
}

// policyLocked returns the policy, which exists once the runtime has
// synchronized.
func (p *Plugin) policyLocked() (*policy.Policy, error) {
	if p.pol == nil {
		return nil, errors.New("topology-aware: not synchronized with the runtime yet")
	}
	return p.pol, nil
}

// granted records and logs a placement made for id, with the classes set
// (classes.Tracker.Set), if any.
func (p *Plugin) granted(id k8s.Identity, what string, pl policy.Placement, updated int, classFields logrus.Fields) {
	p.metrics.grants.WithLabelValues(string(pl.Pool)).Inc()
	p.changed()
	entry := p.log.WithFields(id.Fields()).WithFields(placementFields(pl)).WithFields(classFields).WithField("updated", updated)
	if pl.Warning != "" {
		// Allowed by the configuration, but not what the request asks.
		entry.WithField("warning", pl.Warning).Warn(what)
		return
	}
	entry.Info(what)
}

// reject records and logs a refused request and returns the error that fails
// it, naming the container unless the policy's message already does.
func (p *Plugin) reject(id k8s.Identity, err error) error {
	reason := rejectionReason(err)
	p.metrics.rejections.WithLabelValues(reason).Inc()
	p.log.WithFields(id.Fields()).WithField("reason", reason).WithError(err).Info("refused container")
	name := "container " + id.String()
	if strings.Contains(err.Error(), name) {
		return fmt.Errorf("topology-aware: %w", err)
	}
	return fmt.Errorf("topology-aware: %s: %w", name, err)
}

func placementFields(pl policy.Placement) logrus.Fields {
	return logrus.Fields{
		"pool":       pl.Pool,
		"cpus":       pl.CPUs.String(),
		"mems":       pl.Mems.String(),
		"numa_nodes": pl.NUMANodes,
		"reason":     pl.Reason,
	}
}

// updatesLocked returns the updates for the changed placements and the
// pending ones, but none for exclude (the container of the request, which
// gets its adjustment or its own update). Each carries the container's
// placement as it is now.
func (p *Plugin) updatesLocked(changed []policy.Placement, exclude string) []*api.ContainerUpdate {
	if len(p.pending) > 0 {
		changed = p.withPendingLocked(changed)
	}
	changed = slices.DeleteFunc(changed, func(pl policy.Placement) bool { return pl.ContainerID == exclude })
	if len(changed) > 0 {
		p.starts.announced()
	}
	if p.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		for _, pl := range changed {
			p.log.WithField("container_id", pl.ContainerID).WithFields(placementFields(pl)).Debug("updating container")
		}
	}
	return containerUpdates(changed, mayFail)
}

// withPendingLocked adds the pending containers to changed, with their
// placements as they are now, sorted by id, and clears the pending set.
func (p *Plugin) withPendingLocked(changed []policy.Placement) []policy.Placement {
	for _, pl := range changed {
		p.pending[pl.ContainerID] = true
	}
	ids := slices.Sorted(maps.Keys(p.pending))
	clear(p.pending)
	out := make([]policy.Placement, 0, len(ids))
	for _, id := range ids {
		if pl, ok := p.pol.Placement(id); ok {
			out = append(out, pl)
		}
	}
	return out
}

// Whether the runtime may fail an update without failing the call it came
// with (NRI's IgnoreFailure). Updates of other containers in a handler's
// answer, and a Synchronize's, may: a container can exit between the answer
// and the runtime applying it, and that must not fail another container's
// creation or the Synchronize (CRI-O then drops the plugin, which
// reconnects into the same failure). A resize's own update, and the
// reapplier's, which counts what the runtime did not apply, must apply.
const (
	mustApply = false
	mayFail   = true
)

// containerUpdates sets running containers' cpusets to their placements.
// An exclusive grant updates every shared container, hundreds on a busy
// node, all to the same pool: the updates are allocated together and each
// distinct cpuset is formatted once.
func containerUpdates(pls []policy.Placement, ignoreFailure bool) []*api.ContainerUpdate {
	if len(pls) == 0 {
		return nil
	}
	n := len(pls)
	updates := make([]*api.ContainerUpdate, n)
	blocks := make([]api.ContainerUpdate, n)
	linux := make([]api.LinuxContainerUpdate, n)
	resources := make([]api.LinuxResources, n)
	cpus := make([]api.LinuxCPU, n)
	var render cpusetRenderer
	for i, pl := range pls {
		cpus[i].Cpus = render.cpus(pl.CPUs)
		if !pl.Mems.IsEmpty() {
			cpus[i].Mems = render.mems(pl.Mems)
		}
		resources[i].Cpu = &cpus[i]
		linux[i].Resources = &resources[i]
		blocks[i].ContainerId = pl.ContainerID
		blocks[i].Linux = &linux[i]
		blocks[i].IgnoreFailure = ignoreFailure
		updates[i] = &blocks[i]
	}
	return updates
}

// cpusetRenderer formats the cpusets of many updates, most of which carry
// the same shared pool: it formats each distinct set once.
type cpusetRenderer struct {
	lastCPUs, lastMems cpuset.CPUSet
	cpusText, memsText string
}

func (r *cpusetRenderer) cpus(set cpuset.CPUSet) string {
	if r.cpusText == "" || !set.Equal(r.lastCPUs) {
		r.lastCPUs, r.cpusText = set, set.String()
	}
	return r.cpusText
}

func (r *cpusetRenderer) mems(set cpuset.CPUSet) string {
	if r.memsText == "" || !set.Equal(r.lastMems) {
		r.lastMems, r.memsText = set, set.String()
	}
	return r.memsText
}

// collect gives the persister the state to write. It holds the plugin's
// lock, so it only copies: the writer encodes outside it.
func (p *Plugin) collect() (persistedState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return persistedState{}, false
	}
	return persistedState{
		saved: p.savedLocked(),
		pools: map[string]state.PoolRecord{state.SharedPoolRecord: newSharedPoolRecord(p.pol)},
	}, true
}

// savedLocked is the live state as the checkpoint saves it.
func (p *Plugin) savedLocked() Saved {
	return Saved{Snapshot: p.pol.Snapshot(), Classes: p.classes.Saved()}
}

// usage gives the metrics collector the policy's figures at scrape time.
func (p *Plugin) usage() ([]policy.NodeUsage, []policy.Placement, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nil, nil, false
	}
	return p.pol.Usage(), p.pol.Placements(), true
}
