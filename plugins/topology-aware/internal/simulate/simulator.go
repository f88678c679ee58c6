package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
)

// Simulator is the container runtime of a simulation, around the plugin
// itself: it keeps what containerd keeps (the pods, every container's state
// and OCI spec with the cpusets the plugin's adjustments and updates gave
// it) and calls the plugin's NRI handlers (nriplugin) in the order
// containerd calls them, applying what they return. So what it reports is
// what the plugin does; only the reading of the plugin's placements for
// the report (nriplugin.Plugin.View) is its own.
type Simulator struct {
	machine *Machine
	node    kubepod.Config
	// pageSizes are the machine's hugepage sizes by the kubelet's names.
	pageSizes map[string]uint64
	config    []byte
	source    string // of config, for its errors
	stateDir  string // the plugin's checkpoint, removed by Close
	devices   deviceTable

	plugin *nriplugin.Plugin
	// stopped: the plugin was closed, and no other started (a failed
	// restart); the report reads its state as it left it.
	stopped  bool
	reserved cpuset.CPUSet

	// mu guards the runtime's state: the step being run holds it, and the
	// plugin's Updater (the runner's, which the plugin calls from its own
	// goroutine) waits for it. updated is signalled by the Updater.
	mu      sync.Mutex
	updated *sync.Cond
	pods    map[PodRef]*simPod
	podList []*simPod // in creation order, as the runtime lists sandboxes
	owners  map[Delete]*owner
	// ctrs are the containers created and not removed (exited init
	// containers stay until their pod goes, as in containerd); live the
	// running ones in creation order, the order of the report.
	ctrs map[string]*simContainer
	live []*simContainer
	seq  int
	cur  *stepState
	stat stats
}

// owner is a controller of the workload and the pods it created.
type owner struct {
	pods []PodRef
}

type simPod struct {
	pod     *kubepod.Pod
	nri     *api.PodSandbox
	created int // the step that created it
	ctrs    []*simContainer
}

type simContainer struct {
	pod   *simPod
	ctr   *kubepod.Container
	seq   int // creation order
	state api.ContainerState
	// shown are its spec's cpuset.cpus and cpuset.mems, kept beside it:
	// every step compares every container's with its placement.
	shown [2]string
	// What the report last said of it, for the warnings and the peak.
	pool       string
	cpuRequest int64 // millicores
	memory     int64 // bytes accounted, hugepages included
}

func (sc *simContainer) running() bool { return sc.state == api.ContainerState_CONTAINER_RUNNING }

func (sc *simContainer) name() string {
	m := sc.pod.pod.Manifest
	return m.Namespace + "/" + m.Name + "/" + sc.ctr.Name
}

// cpuset is the container's cpuset.cpus and cpuset.mems as the runtime
// shows them.
func (sc *simContainer) cpuset() [2]string { return sc.shown }

// setResources writes resources into the container's spec, as containerd
// does with CRI resources.
func (sc *simContainer) setResources(r kubepod.LinuxContainerResources) {
	kubepod.WithResources(sc.ctr.Spec, r)
	cpu := sc.ctr.Spec.Linux.Resources.CPU
	sc.shown = [2]string{cpu.Cpus, cpu.Mems}
}

// deviceTable is the plugin's DeviceSource: the devices the workload gives
// containers by NUMA node, which NRI does not show (device-injector's CDI
// devices), by container id.
type deviceTable struct {
	mu      sync.Mutex
	devices map[string][]policy.Device
}

func (d *deviceTable) ContainerDevices(id k8s.Identity) ([]policy.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.devices[id.ContainerID], nil
}

func (d *deviceTable) set(id string, devices []policy.Device) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(devices) == 0 {
		delete(d.devices, id)
		return
	}
	d.devices[id] = devices
}

// settleTimeout bounds the wait for the updates the plugin sends through
// the Updater (after a pod's reservation is released, or when a
// Synchronize reply has no room for them): it pushes them at once.
const settleTimeout = 10 * time.Second

// New starts the plugin for a simulation of the machine with its
// configuration (config, read from source; nil for the defaults).
func New(m *Machine, config []byte, source string) (*Simulator, error) {
	node, pageSizes, err := m.kubeletNode()
	if err != nil {
		return nil, err
	}
	stateDir, err := os.MkdirTemp("", "nri-topology-aware-simulate-state-")
	if err != nil {
		return nil, fmt.Errorf("create the plugin's state directory: %w", err)
	}
	s := &Simulator{
		machine: m, node: node, pageSizes: pageSizes, config: withoutStateDir(config), source: source,
		stateDir: stateDir, devices: deviceTable{devices: map[string][]policy.Device{}},
		pods: map[PodRef]*simPod{}, owners: map[Delete]*owner{}, ctrs: map[string]*simContainer{},
	}
	s.updated = sync.NewCond(&s.mu)
	if _, err := s.startPlugin(); err != nil {
		_ = os.RemoveAll(stateDir)
		return nil, err
	}
	s.plugin.View(func(pol *policy.Policy) { s.reserved = pol.ReservedCPUs() })
	return s, nil
}

// withoutStateDir leaves the configuration's state-dir out: the plugin of
// a simulation keeps its checkpoint in a directory of its own, never in
// the one a node's plugin uses. A configuration that is no YAML mapping is
// left as it is, for the plugin to say what is wrong with it.
func withoutStateDir(config []byte) []byte {
	var doc yaml.Node
	if yaml.Unmarshal(config, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return config
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "state-dir" {
			root.Content = slices.Delete(root.Content, i, i+2)
			out, err := yaml.Marshal(&doc)
			if err != nil {
				return config
			}
			return out
		}
	}
	return config
}

// Close stops the plugin and removes its state.
func (s *Simulator) Close() error {
	var err error
	if s.plugin != nil && !s.stopped {
		err = s.plugin.Close()
	}
	return errors.Join(err, os.RemoveAll(s.stateDir))
}

// quietLog takes the plugin's log: the report says where every container
// went and why.
var quietLog = logrus.NewEntry(&logrus.Logger{Out: io.Discard, Formatter: &logrus.TextFormatter{}, Level: logrus.PanicLevel})

// startPlugin starts a plugin process's worth of plugin: built, configured
// and synchronized with the runtime's pods and containers, as at a plugin
// (re)start. It returns the Synchronize's updates, applied.
func (s *Simulator) startPlugin() ([]*api.ContainerUpdate, error) {
	p, err := nriplugin.New(plugin.Deps{
		Name: "topology-aware", Index: "30", Log: quietLog,
		Registry: prometheus.NewRegistry(), MetricsNamespace: "nri_suite_topology_aware",
		Updater: updater{s},
	}, nriplugin.Options{Topology: s.machine.Topology, SysfsRoot: s.machine.SysfsRoot, StateDir: s.stateDir, Devices: &s.devices})
	if err != nil {
		return nil, fmt.Errorf("start the plugin: %w", err)
	}
	source := s.source
	if source == "" {
		source = "built-in defaults"
	}
	if err := p.Configure(s.config, source); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("--config: %w", err)
	}
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, sp := range s.podList {
		pods = append(pods, sp.nri)
		for _, sc := range sp.ctrs {
			ctrs = append(ctrs, s.nriContainer(sc))
		}
	}
	updates, err := p.Synchronize(context.Background(), pods, ctrs)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("synchronize the plugin: %w", err)
	}
	s.plugin = p
	s.applyLocked(updates)
	return updates, nil
}

// updater is the runner's Updater for the plugin: the runtime applies the
// updates it requests outside of NRI calls.
type updater struct{ s *Simulator }

func (u updater) UpdateContainers(updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	failed := u.s.applyLocked(updates)
	u.s.updated.Broadcast()
	return failed, nil
}

// applyLocked applies container updates as containerd does, and returns
// those of containers it does not have.
func (s *Simulator) applyLocked(updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	var failed []*api.ContainerUpdate
	for _, u := range updates {
		sc, ok := s.ctrs[u.GetContainerId()]
		if !ok {
			failed = append(failed, u)
			continue
		}
		s.setResources(sc, u.GetLinux().GetResources())
	}
	return failed
}

// setResources writes NRI resources into the container's spec, as
// containerd's update does, noting for the step's report where it was.
func (s *Simulator) setResources(sc *simContainer, res *api.LinuxResources) {
	if res == nil {
		return
	}
	if cur := s.cur; cur != nil {
		if _, seen := cur.before[sc.ctr.ID]; !seen {
			cur.before[sc.ctr.ID] = sc.cpuset()
		}
	}
	sc.setResources(kubepod.FromNRIResources(res))
}

func (s *Simulator) nriContainer(sc *simContainer) *api.Container {
	return kubepod.NRIContainer(sc.ctr, sc.ctr.Spec, kubepod.ContainerStatus{State: sc.state})
}

// Run validates the whole workload (Validate), then plays every step,
// writing a record to sink as each is done; the final state comes last. It
// stops at the first step that fails (a violated invariant of the plugin's
// state, an update the plugin did not send), writing what failed and the
// state it stopped in. Refused containers are results, not failures.
func (s *Simulator) Run(w *Workload, sink Sink) error {
	if err := s.Validate(w); err != nil {
		return err
	}
	if err := sink.Write(Record{Machine: s.describeMachine()}); err != nil {
		return err
	}
	for i := range w.Steps {
		step := &w.Steps[i]
		r, err := s.runStep(step)
		if err != nil {
			err = fmt.Errorf("%s: %s: %w", step.Pos, step, err)
			final := s.final(i)
			return errors.Join(err,
				sink.Write(Record{Error: &Failure{Step: step.Number, Position: step.Pos, Message: err.Error()}}),
				sink.Write(Record{Final: &final}))
		}
		if err := sink.Write(Record{Step: r}); err != nil {
			return err
		}
	}
	final := s.final(len(w.Steps))
	return sink.Write(Record{Final: &final})
}

// stepState is what the step being run changed.
type stepState struct {
	report *StepReport
	// before are the cpusets of the containers the step updated, before it.
	before map[string][2]string
	// changes are what the step did to containers beyond updating them.
	changes map[string]string
}

// Changes a step makes to a container, as reported.
const (
	changeCreated  = "created"
	changeResized  = "resized"
	changeUpdated  = "updated"
	changeReplaced = "replaced"
)

// runStep plays one step. After it, the plugin's state must satisfy the
// policy's invariants and every container must run where the plugin placed
// it: the runtime must have got every update it needs, from the replies or
// through the Updater.
func (s *Simulator) runStep(step *Step) (r *StepReport, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = &stepState{
		report:  &StepReport{Step: step.Number, Position: step.Pos, Kind: step.Kind},
		before:  map[string][2]string{},
		changes: map[string]string{},
	}
	defer func() { s.cur = nil }()
	defer func() {
		// The runner of a real plugin turns a handler's panic into a failed
		// request; here it fails the step.
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	switch step.Kind {
	case StepCreate:
		err = s.create(step)
	case StepResize:
		err = s.resize(step.Resize)
	case StepDelete:
		err = s.delete(*step.Delete)
	case StepRestart:
		err = s.restart()
	default:
		err = fmt.Errorf("unknown step kind %q", step.Kind)
	}
	if err != nil {
		return nil, err
	}
	if err := s.settleLocked(); err != nil {
		return nil, err
	}
	var checkErr error
	s.plugin.View(func(pol *policy.Policy) { checkErr = pol.Check() })
	if checkErr != nil {
		return nil, fmt.Errorf("the plugin's state violates the policy's invariants: %w", checkErr)
	}
	s.report(step)
	return s.cur.report, nil
}

func (s *Simulator) create(step *Step) error {
	r := s.cur.report
	for _, o := range step.Create.Objects {
		r.Objects = append(r.Objects, o.String())
		own := &owner{}
		if o.Kind != KindPod {
			s.owners[Delete{Kind: o.Kind, PodRef: PodRef{Namespace: o.Namespace, Name: o.Name}}] = own
		}
		for _, manifest := range o.Pods() {
			pod, err := s.node.Convert(manifest)
			if err != nil {
				return err
			}
			sp := &simPod{pod: pod, nri: kubepod.NRIPodSandbox(pod), created: step.Number}
			ref := PodRef{Namespace: pod.Manifest.Namespace, Name: pod.Manifest.Name}
			s.pods[ref] = sp
			s.podList = append(s.podList, sp)
			own.pods = append(own.pods, ref)
			if err := s.runPod(sp, step.Create.Devices); err != nil {
				return err
			}
		}
	}
	return nil
}

// runPod starts a pod's containers as the kubelet does: init containers
// one by one to completion (native sidecars started and left running),
// then the app containers. A refused init container stops the pod there.
func (s *Simulator) runPod(sp *simPod, devices map[string][]DeviceSpec) error {
	r := s.cur.report
	// A pod the scheduler would not bind to this node never reaches it.
	if why := s.unschedulable(sp.pod.Manifest); why != "" {
		for _, ctr := range sp.pod.Containers {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, why))
		}
		return nil
	}
	blockedBy := ""
	for _, ctr := range sp.pod.Containers {
		if blockedBy != "" {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, "not started: init container "+blockedBy+" was refused"))
			continue
		}
		s.addDevices(ctr, devices[ctr.Name])
		sc, err := s.createContainer(sp, ctr)
		if err != nil {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, err.Error()))
			if ctr.Kind != kubepod.AppContainer {
				blockedBy = ctr.Name
			}
			continue
		}
		if ctr.Kind == kubepod.InitContainer {
			// It runs to completion; the plugin releases it at StopContainer.
			r.Exited = append(r.Exited, s.entry(sc, ""))
			if err := s.stopContainer(sc); err != nil {
				return err
			}
		}
	}
	return nil
}

// addDevices gives the container the workload's devices: device nodes in
// its spec (as the runtime or a lower-index plugin adds them), the others
// through the plugin's DeviceSource (as device-injector's records do).
func (s *Simulator) addDevices(ctr *kubepod.Container, devices []DeviceSpec) {
	var known []policy.Device
	for i, d := range devices {
		if d.NUMANode != nil {
			known = append(known, policy.Device{
				ID:       fmt.Sprintf("numa-node %d device %d", *d.NUMANode, i),
				NUMANode: *d.NUMANode,
				CPUs:     s.machine.Topology.CPUsOfNode(*d.NUMANode),
			})
			continue
		}
		ctr.Spec.Linux.Devices = append(ctr.Spec.Linux.Devices, d.linuxDevice())
	}
	s.devices.set(ctr.ID, known)
}

// createContainer is containerd's CreateContainer, StartContainer and
// PostStartContainer as the plugin sees them. A refusal is undone as
// containerd undoes it: the plugin sees the container stopped and removed.
func (s *Simulator) createContainer(sp *simPod, ctr *kubepod.Container) (*simContainer, error) {
	ctx := context.Background()
	s.seq++
	sc := &simContainer{pod: sp, ctr: ctr, seq: s.seq, state: api.ContainerState_CONTAINER_UNKNOWN}
	adjust, updates, err := s.plugin.CreateContainer(ctx, sp.nri, s.nriContainer(sc))
	if err != nil {
		_, _ = s.plugin.StopContainer(ctx, sp.nri, s.nriContainer(sc))
		_ = s.plugin.RemoveContainer(ctx, sp.nri, s.nriContainer(sc))
		s.devices.set(ctr.ID, nil)
		return nil, err
	}
	s.applyLocked(updates)
	sc.setResources(kubepod.FromNRIResources(adjust.GetLinux().GetResources()))
	sc.state = api.ContainerState_CONTAINER_CREATED
	s.ctrs[ctr.ID] = sc
	sp.ctrs = append(sp.ctrs, sc)
	sc.state = api.ContainerState_CONTAINER_RUNNING
	if err := s.plugin.PostStartContainer(ctx, sp.nri, s.nriContainer(sc)); err != nil {
		return nil, fmt.Errorf("PostStartContainer of %s: %w", sc.name(), err)
	}
	s.live = append(s.live, sc)
	s.cur.changes[ctr.ID] = changeCreated
	return sc, nil
}

// stopContainer is containerd's StopContainer: the container stays, exited,
// until its pod is removed.
func (s *Simulator) stopContainer(sc *simContainer) error {
	sc.state = api.ContainerState_CONTAINER_STOPPED
	s.live = slices.DeleteFunc(s.live, func(l *simContainer) bool { return l == sc })
	s.untrack(sc)
	delete(s.cur.changes, sc.ctr.ID)
	updates, err := s.plugin.StopContainer(context.Background(), sc.pod.nri, s.nriContainer(sc))
	if err != nil {
		return fmt.Errorf("StopContainer of %s: %w", sc.name(), err)
	}
	s.applyLocked(updates)
	return nil
}

// resize is the kubelet's in-place resize: the container's new CRI
// resources reach the plugin in UpdateContainer.
func (s *Simulator) resize(rs *Resize) error {
	r := s.cur.report
	r.Pod, r.Container = rs.PodRef.String(), rs.Container
	sp := s.pods[rs.PodRef]
	ctr := sp.pod.Container(rs.Container)
	sc, created := s.ctrs[ctr.ID]
	if !created || !sc.running() {
		r.Rejected = append(r.Rejected, rejection(sp, ctr, "not running: its creation was refused"))
		return nil
	}
	manifest, newCtr, why := resizedManifest(sp.pod.Manifest, rs)
	if why != "" {
		r.Rejected = append(r.Rejected, rejection(sp, ctr, why))
		return nil
	}
	res, err := kubepod.ContainerResources(manifest, newCtr, s.node.MemoryCapacity, s.node.HugePageSizes)
	if err != nil {
		return err
	}
	updates, err := s.plugin.UpdateContainer(context.Background(), sp.nri, s.nriContainer(sc), kubepod.ToNRIResources(res))
	if err != nil {
		r.Rejected = append(r.Rejected, rejection(sp, ctr, err.Error()))
		return nil
	}
	// As containerd: the last update is the container's own, written over
	// the resources the kubelet asked for.
	final := kubepod.ToNRIResources(res)
	if n := len(updates); n > 0 && updates[n-1].GetContainerId() == ctr.ID {
		final, updates = updates[n-1].GetLinux().GetResources(), updates[:n-1]
	}
	s.applyLocked(updates)
	sp.pod.Manifest, ctr.Manifest, ctr.Resources = manifest, newCtr, res
	sc.setResources(res)
	s.setResources(sc, final)
	s.cur.changes[ctr.ID] = changeResized
	return nil
}

// delete deletes a pod, or every pod of a controller, newest first.
func (s *Simulator) delete(d Delete) error {
	s.cur.report.Objects = []string{d.String()}
	if d.Kind == KindPod {
		return s.removePod(d.PodRef)
	}
	own := s.owners[d]
	delete(s.owners, d)
	for _, ref := range slices.Backward(own.pods) {
		if _, exists := s.pods[ref]; exists {
			if err := s.removePod(ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// removePod tears a pod down as the kubelet and containerd do: the app
// containers stopped, then the sidecars in reverse order, the sandbox
// stopped, every container removed, and the sandbox removed.
func (s *Simulator) removePod(ref PodRef) error {
	ctx := context.Background()
	sp := s.pods[ref]
	var order []*simContainer
	for _, sc := range sp.ctrs {
		if sc.ctr.Kind == kubepod.AppContainer {
			order = append(order, sc)
		}
	}
	for _, sc := range slices.Backward(sp.ctrs) {
		if sc.ctr.Kind == kubepod.SidecarContainer {
			order = append(order, sc)
		}
	}
	for _, sc := range order {
		if sc.running() {
			s.cur.report.Released = append(s.cur.report.Released, s.entry(sc, ""))
			if err := s.stopContainer(sc); err != nil {
				return err
			}
		}
	}
	if err := s.plugin.StopPodSandbox(ctx, sp.nri); err != nil {
		return fmt.Errorf("StopPodSandbox of %s: %w", ref, err)
	}
	for _, sc := range slices.Backward(sp.ctrs) {
		if err := s.plugin.RemoveContainer(ctx, sp.nri, s.nriContainer(sc)); err != nil {
			return fmt.Errorf("RemoveContainer of %s: %w", sc.name(), err)
		}
		delete(s.ctrs, sc.ctr.ID)
		s.devices.set(sc.ctr.ID, nil)
	}
	if err := s.plugin.RemovePodSandbox(ctx, sp.nri); err != nil {
		return fmt.Errorf("RemovePodSandbox of %s: %w", ref, err)
	}
	delete(s.pods, ref)
	s.podList = slices.DeleteFunc(s.podList, func(p *simPod) bool { return p == sp })
	return nil
}

// restart is a plugin restart: the plugin process ends (writing its
// checkpoint) and a new one synchronizes with the running containers.
func (s *Simulator) restart() error {
	for _, sc := range s.live {
		s.cur.before[sc.ctr.ID] = sc.cpuset()
	}
	// Closing waits for the plugin's push in flight through the Updater,
	// which waits for the runtime's lock.
	s.mu.Unlock()
	err := s.plugin.Close()
	s.mu.Lock()
	s.stopped = true
	if err != nil {
		return fmt.Errorf("stop the plugin: %w", err)
	}
	if _, err := s.startPlugin(); err != nil {
		return err
	}
	s.stopped = false
	rr := &RestartReport{Moved: []string{}}
	for _, sc := range s.live {
		if sc.cpuset() == s.cur.before[sc.ctr.ID] {
			rr.Kept++
			continue
		}
		rr.Moved = append(rr.Moved, sc.name())
		s.cur.changes[sc.ctr.ID] = changeReplaced
	}
	s.cur.report.Restart = rr
	return nil
}

// settleLocked waits until every container runs where the plugin placed
// it: the updates the plugin pushes through the Updater arrive from its
// own goroutine. One that never comes is a failure of the plugin.
func (s *Simulator) settleLocked() error {
	wrong := s.misplacedLocked()
	if len(wrong) == 0 {
		return nil
	}
	deadline := time.Now().Add(settleTimeout)
	timer := time.AfterFunc(settleTimeout, func() {
		s.mu.Lock()
		s.updated.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for len(wrong) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the plugin sent no update within %v", strings.Join(wrong, "; "), settleTimeout)
		}
		s.updated.Wait()
		wrong = s.misplacedLocked()
	}
	return nil
}

// misplacedLocked describes every running container that does not run
// where the plugin placed it.
func (s *Simulator) misplacedLocked() []string {
	var wrong []string
	var cpusText, memsText cpusetText
	s.plugin.View(func(pol *policy.Policy) {
		for _, sc := range s.live {
			pl, placed := pol.Placement(sc.ctr.ID)
			shown := sc.cpuset()
			cpus, okCPUs := cpusText.parse(shown[0])
			mems, okMems := memsText.parse(shown[1])
			switch {
			case !placed:
				wrong = append(wrong, fmt.Sprintf("container %s runs, but the plugin has no placement for it", sc.name()))
			case !okCPUs || !okMems || !cpus.Equal(pl.CPUs) || (!pl.Mems.IsEmpty() && !mems.Equal(pl.Mems)):
				wrong = append(wrong, fmt.Sprintf("container %s runs on cpus %q mems %q, but the plugin placed it on cpus %q mems %q",
					sc.name(), shown[0], shown[1], pl.CPUs, pl.Mems))
			}
		}
	})
	return wrong
}

// cpusetText parses cpusets, most of them the same text over and over (the
// shared pool's), which it parses once.
type cpusetText struct {
	text string
	set  cpuset.CPUSet
	err  error
	seen bool
}

func (c *cpusetText) parse(text string) (cpuset.CPUSet, bool) {
	if !c.seen || text != c.text {
		c.text, c.seen = text, true
		c.set, c.err = cpuset.Parse(text)
	}
	return c.set, c.err == nil
}

// report completes the step's report: the containers it changed, those
// that only followed the shared pool, the counts and the warnings.
func (s *Simulator) report(step *Step) {
	r, cur := s.cur.report, s.cur
	var sharedCPUs cpuset.CPUSet
	s.plugin.View(func(pol *policy.Policy) {
		sharedCPUs = pol.SharedCPUs()
		r.SharedCPUs, r.SharedMems = sharedCPUs.String(), pol.SharedMems(false).String()
	})
	follows := [2]string{r.SharedCPUs, r.SharedMems}
	var listed []*simContainer
	for _, id := range sortedKeys(cur.before, cur.changes) {
		sc, ok := s.ctrs[id]
		if !ok || !sc.running() {
			continue
		}
		if cur.changes[id] == "" {
			now := sc.cpuset()
			if now == cur.before[id] {
				continue
			}
			if sc.pool == string(policy.PoolShared) && now == follows {
				r.Followed++
				continue
			}
			cur.changes[id] = changeUpdated
		}
		listed = append(listed, sc)
	}
	slices.SortFunc(listed, func(a, b *simContainer) int { return a.seq - b.seq })
	for _, sc := range listed {
		e := s.entry(sc, cur.changes[sc.ctr.ID])
		s.untrack(sc)
		s.track(sc, e)
		r.Changed = append(r.Changed, e)
	}
	r.Running = len(s.live)
	s.stat.refusals += len(r.Rejected)
	r.Warnings = s.stat.afterStep(step, sharedCPUs.Size(), s.reserved.Size())
	if s.stat.isPeak(sharedCPUs.Size()) {
		s.plugin.View(func(pol *policy.Policy) {
			s.stat.peak = Peak{Step: step.Number, Position: step.Pos, SharedCPUs: r.SharedCPUs, Usage: pol.Usage()}
		})
	}
}

func sortedKeys(a map[string][2]string, b map[string]string) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, dup := a[k]; !dup {
			keys = append(keys, k)
		}
	}
	return keys
}

// entry is the report of a container's placement now.
func (s *Simulator) entry(sc *simContainer, change string) ContainerPlacement {
	var pl policy.Placement
	s.plugin.View(func(pol *policy.Policy) { pl, _ = pol.Placement(sc.ctr.ID) })
	return s.placementEntry(sc, pl, change)
}

func (s *Simulator) placementEntry(sc *simContainer, pl policy.Placement, change string) ContainerPlacement {
	m := sc.pod.pod.Manifest
	nodes := s.machine.Topology.NodesOfCPUs(pl.CPUs)
	if nodes == nil {
		nodes = []int{}
	}
	return ContainerPlacement{
		ID: sc.ctr.ID, Namespace: m.Namespace, Pod: m.Name, Container: sc.ctr.Name,
		Pool: string(pl.Pool), CPUs: pl.CPUs.String(), Mems: pl.Mems.String(),
		NUMANodes: nodes, Affinity: slices.Clone(pl.NUMANodes),
		CPURequest:  sc.ctr.Manifest.Resources.Requests.Cpu().MilliValue(),
		MemoryBytes: pl.Memory, HugePages: s.pageSizeNames(pl.HugePages),
		Reason: pl.Reason, Unplaced: pl.Unplaced, Change: change,
	}
}

// pageSizeNames renames page size in bytes -> bytes to the kubelet's names
// of the sizes, for the report.
func (s *Simulator) pageSizeNames(hugePages map[uint64]int64) map[string]int64 {
	if len(hugePages) == 0 {
		return nil
	}
	out := make(map[string]int64, len(hugePages))
	for name, size := range s.pageSizes {
		if bytes, ok := hugePages[size]; ok {
			out[name] = bytes
		}
	}
	return out
}

func rejection(sp *simPod, ctr *kubepod.Container, why string) Rejection {
	m := sp.pod.Manifest
	return Rejection{ID: ctr.ID, Namespace: m.Namespace, Pod: m.Name, Container: ctr.Name, Error: why}
}

func (s *Simulator) describeMachine() *MachineInfo {
	nodes := s.machine.Topology.Nodes()
	if nodes == nil {
		nodes = []int{}
	}
	return &MachineInfo{
		Source:   s.machine.Source,
		CPUs:     s.machine.Topology.CPUs().String(),
		Nodes:    nodes,
		Isolated: s.machine.Topology.Isolated().String(),
		Reserved: s.reserved.String(),
	}
}

// final is the state after stepsRun steps.
func (s *Simulator) final(stepsRun int) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{
		StepsRun:   stepsRun,
		Containers: make([]ContainerPlacement, 0, len(s.live)),
		Pools:      map[string]int{},
		Peak:       s.stat.peak,
		Refusals:   s.stat.refusals,
	}
	podNames := map[string]string{}
	for ref, sp := range s.pods {
		podNames[string(sp.pod.Manifest.UID)] = ref.String()
	}
	s.plugin.View(func(pol *policy.Policy) {
		st.SharedCPUs, st.SharedMems = pol.SharedCPUs().String(), pol.SharedMems(false).String()
		for _, sc := range s.live {
			pl, _ := pol.Placement(sc.ctr.ID)
			e := s.placementEntry(sc, pl, "")
			st.Containers = append(st.Containers, e)
			st.Pools[e.Pool]++
		}
		st.Usage = pol.Usage()
		st.Warnings = s.stat.final(pol.SharedCPUs().Size(), s.reserved.Size())
		for _, pod := range pol.Snapshot().Pods {
			if st.PodReservations == nil {
				st.PodReservations = map[string]string{}
			}
			name, ok := podNames[pod.PodUID]
			if !ok {
				name = "uid " + pod.PodUID // its sandbox is gone, its last container not yet
			}
			st.PodReservations[name] = pod.CPUs.String()
		}
	})
	if st.Peak.Step == 0 {
		st.Peak = Peak{Usage: st.Usage, SharedCPUs: st.SharedCPUs}
	}
	return st
}
