package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// ErrInvalidWorkload is wrapped by the errors of Run and Step that come
// from the workload itself (a step naming a pod that does not exist, a
// device the machine lacks), as opposed to containers that are refused,
// which are results.
var ErrInvalidWorkload = errors.New("invalid workload")

// Simulator plays a workload against the policy the way the runtime and the
// plugin would: it keeps what a runtime keeps (every pod, every container's
// OCI spec with the cpusets the plugin's adjustments and updates gave it)
// and calls the policy as the plugin's NRI handlers do.
type Simulator struct {
	machine *Machine
	cfg     policy.Config
	node    kubepod.Config
	// pageSizes are the machine's hugepage sizes by the kubelet's names.
	pageSizes map[string]uint64
	pol       *policy.Policy

	pods map[PodRef]*simPod
	// live are the running containers in creation order, the order of the
	// report; ctrs holds them by id.
	live []string
	ctrs map[string]*simContainer
}

type simPod struct {
	pod     *kubepod.Pod
	nri     *api.PodSandbox
	created int // the step that created it
}

type simContainer struct {
	pod *simPod
	ctr *kubepod.Container
	// extra are the devices NRI does not show (numa-node devices).
	extra []policy.Device
}

// New builds a simulator of the machine with the policy configuration cfg.
func New(m *Machine, cfg policy.Config) (*Simulator, error) {
	pol, err := policy.New(m.Topology, cfg)
	if err != nil {
		return nil, fmt.Errorf("build the policy: %w", err)
	}
	node, pageSizes, err := m.kubeletNode()
	if err != nil {
		return nil, err
	}
	return &Simulator{
		machine:   m,
		cfg:       cfg,
		node:      node,
		pageSizes: pageSizes,
		pol:       pol,
		pods:      map[PodRef]*simPod{},
		ctrs:      map[string]*simContainer{},
	}, nil
}

// Run plays every step and reports each. It stops at the first error in
// the workload or violated invariant; refused containers are results.
func (s *Simulator) Run(w *Workload) (*Report, error) {
	report := &Report{Machine: describeMachine(s.machine), Steps: make([]StepReport, 0, len(w.Steps))}
	for i := range w.Steps {
		step := &w.Steps[i]
		r, err := s.Step(step)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", step, step.Kind, err)
		}
		report.Steps = append(report.Steps, r)
	}
	report.Final = s.state()
	return report, nil
}

// Step plays one step. After it, the policy's invariants must hold and
// every container must run where the policy placed it: an update the
// policy did not return would otherwise go unnoticed.
func (s *Simulator) Step(step *Step) (StepReport, error) {
	r := StepReport{Step: step.Number, Line: step.Line, Kind: step.Kind}
	changes := map[string]string{}
	var err error
	switch step.Kind {
	case StepCreate:
		err = s.create(step, &r, changes)
	case StepResize:
		err = s.resize(step.Resize, &r, changes)
	case StepDelete:
		err = s.delete(*step.Delete, &r, changes)
	case StepRestart:
		err = s.restart(&r, changes)
	default:
		err = fmt.Errorf("%w: unknown step kind %q", ErrInvalidWorkload, step.Kind)
	}
	if err != nil {
		return r, err
	}
	if err := s.pol.Check(); err != nil {
		return r, fmt.Errorf("policy invariants violated: %w", err)
	}
	if err := s.checkRuntimeView(); err != nil {
		return r, err
	}
	r.SharedCPUs = s.pol.SharedCPUs().String()
	r.Containers = s.placements(changes)
	return r, nil
}

// Changes a step makes to a container, as reported.
const (
	changeCreated  = "created"
	changeResized  = "resized"
	changeUpdated  = "updated"
	changeAdopted  = "adopted"
	changeReplaced = "replaced"
)

func (s *Simulator) create(step *Step, r *StepReport, changes map[string]string) error {
	c := step.Create
	pod, err := s.node.Convert(c.Manifest)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidWorkload, err)
	}
	ref := PodRef{Namespace: pod.Manifest.Namespace, Name: pod.Manifest.Name}
	r.Pod = ref.String()
	if old, exists := s.pods[ref]; exists {
		return fmt.Errorf("%w: pod %s already exists (created by step %d): expected a new pod, or a delete step first", ErrInvalidWorkload, ref, old.created)
	}
	extra, err := s.devices(c, pod)
	if err != nil {
		return err
	}
	sp := &simPod{pod: pod, nri: kubepod.NRIPodSandbox(pod), created: step.Number}
	s.pods[ref] = sp
	// A pod the scheduler would not bind to this node never reaches it.
	if why := s.unschedulable(pod.Manifest); why != "" {
		for _, ctr := range pod.Containers {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, why))
		}
		return nil
	}
	// The kubelet starts init containers one by one, each after the
	// previous one completed (or, a sidecar, started): one refused stops
	// the pod there.
	var blockedBy string
	for _, ctr := range pod.Containers {
		if blockedBy != "" {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, "not started: init container "+blockedBy+" was refused"))
			continue
		}
		sc := &simContainer{pod: sp, ctr: ctr, extra: extra[ctr.Name]}
		pl, err := s.allocate(sc, changes)
		if err != nil {
			r.Rejected = append(r.Rejected, rejection(sp, ctr, err.Error()))
			if ctr.Kind != kubepod.AppContainer {
				blockedBy = ctr.Name
			}
			continue
		}
		if ctr.Kind == kubepod.InitContainer {
			// It runs to completion; the plugin releases it at StopContainer.
			r.Exited = append(r.Exited, s.entry(sc, pl, ""))
			s.release(ctr.ID, changes)
		}
	}
	return nil
}

// unschedulable returns why the scheduler would not place the pod on this
// machine, or "". Only what the simulation could otherwise get silently
// wrong is checked: hugepages of a size the machine lacks, which the
// kubelet would leave out of the container's limits.
func (s *Simulator) unschedulable(pod *v1.Pod) string {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ctr := range list {
			for name, q := range ctr.Resources.Limits {
				if !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) || q.IsZero() {
					continue
				}
				limits, err := kubepod.HugepageLimits(v1.ResourceRequirements{Limits: v1.ResourceList{name: q}}, s.node.HugePageSizes)
				if err != nil {
					return fmt.Sprintf("unschedulable: container %s: %v", ctr.Name, err)
				}
				if !slices.ContainsFunc(limits, func(l kubepod.HugepageLimit) bool { return l.Limit > 0 }) {
					return fmt.Sprintf("unschedulable: container %s asks for %s, and the machine has no hugepages of that size (it has %s)",
						ctr.Name, name, sizesOrNone(s.node.HugePageSizes))
				}
			}
		}
	}
	return ""
}

func sizesOrNone(sizes []string) string {
	if len(sizes) == 0 {
		return "none"
	}
	return strings.Join(sizes, ", ")
}

// devices checks the workload's devices against the machine, adds the
// device nodes to the containers' OCI specs (as the runtime or a
// lower-index plugin would) and returns, per container, the devices NRI
// does not show.
func (s *Simulator) devices(c *Create, pod *kubepod.Pod) (map[string][]policy.Device, error) {
	extra := map[string][]policy.Device{}
	for _, ctr := range pod.Containers {
		for i, d := range c.Devices[ctr.Name] {
			field := fmt.Sprintf("create.devices.%s[%d]", ctr.Name, i)
			if d.NUMANode != nil {
				node := *d.NUMANode
				if _, ok := s.machine.Topology.Node(node); !ok {
					return nil, fmt.Errorf("%w: %s: numa-node %d: expected one of the machine's nodes %s",
						ErrInvalidWorkload, field, node, cpuset.New(s.machine.Topology.Nodes()...))
				}
				extra[ctr.Name] = append(extra[ctr.Name], policy.Device{
					ID:       fmt.Sprintf("numa-node %d device %d", node, i),
					NUMANode: node,
					CPUs:     s.machine.Topology.CPUsOfNode(node),
				})
				continue
			}
			if s.machine.SysfsRoot == "" {
				return nil, fmt.Errorf("%w: %s: %s: the machine (%s) has no devices: expected --sysfs, a --topology description with devices, or a numa-node device",
					ErrInvalidWorkload, field, d, s.machine.Source)
			}
			if _, err := locality.OfDevice(s.machine.SysfsRoot, d.Kind, d.Major, d.Minor); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidWorkload, field, err)
			}
			typ := "c"
			if d.Kind == locality.Block {
				typ = "b"
			}
			ctr.Spec.Linux.Devices = append(ctr.Spec.Linux.Devices, rspec.LinuxDevice{
				Path: fmt.Sprintf("/dev/simulated/%s-%d-%d", d.Kind, d.Major, d.Minor), Type: typ, Major: d.Major, Minor: d.Minor,
			})
		}
	}
	return extra, nil
}

// allocate is CreateContainer: it places the container and applies the
// placement and the updates of the others as the runtime would.
func (s *Simulator) allocate(sc *simContainer, changes map[string]string) (policy.Placement, error) {
	req, _, err := s.requests(sc).Build(sc.pod.nri, s.nriContainer(sc), nil)
	if err != nil {
		return policy.Placement{}, err
	}
	pl, others, err := s.pol.Allocate(req)
	if err != nil {
		return policy.Placement{}, err
	}
	s.ctrs[sc.ctr.ID] = sc
	s.live = append(s.live, sc.ctr.ID)
	setCPUSet(sc.ctr.Spec, pl)
	changes[sc.ctr.ID] = changeCreated
	s.apply(others, changes)
	return pl, nil
}

// release is StopContainer: the container's CPUs go back and the shared
// containers get them in the same call.
func (s *Simulator) release(id string, changes map[string]string) {
	others := s.pol.Release(id)
	delete(s.ctrs, id)
	delete(changes, id)
	s.live = slices.DeleteFunc(s.live, func(l string) bool { return l == id })
	s.apply(others, changes)
}

// apply writes the placements the policy returned for other containers
// into their specs, as the runtime applies NRI container updates.
func (s *Simulator) apply(updates []policy.Placement, changes map[string]string) {
	for _, pl := range updates {
		sc, ok := s.ctrs[pl.ContainerID]
		if !ok {
			continue
		}
		setCPUSet(sc.ctr.Spec, pl)
		if changes[pl.ContainerID] == "" {
			changes[pl.ContainerID] = changeUpdated
		}
	}
}

// setCPUSet applies a placement as the plugin's adjustment or update does:
// cpuset.mems only when the placement has nodes.
func setCPUSet(spec *rspec.Spec, pl policy.Placement) {
	res := spec.Linux.Resources
	if res == nil {
		res = &rspec.LinuxResources{}
		spec.Linux.Resources = res
	}
	if res.CPU == nil {
		res.CPU = &rspec.LinuxCPU{}
	}
	res.CPU.Cpus = pl.CPUs.String()
	if !pl.Mems.IsEmpty() {
		res.CPU.Mems = pl.Mems.String()
	}
}

func (s *Simulator) nriContainer(sc *simContainer) *api.Container {
	return kubepod.NRIContainer(sc.ctr, sc.ctr.Spec, kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_RUNNING})
}

// resize is the kubelet's in-place resize: the container's new CRI
// resources reach the plugin in UpdateContainer.
func (s *Simulator) resize(rs *Resize, r *StepReport, changes map[string]string) error {
	r.Pod, r.Container = rs.PodRef.String(), rs.Container
	sp, err := s.pod(rs.PodRef)
	if err != nil {
		return err
	}
	ctr := sp.pod.Container(rs.Container)
	if ctr == nil {
		return fmt.Errorf("%w: resize.container: pod %s has no container %q: expected one of %s",
			ErrInvalidWorkload, rs.PodRef, rs.Container, strings.Join(containerNames(sp.pod), ", "))
	}
	if ctr.Kind == kubepod.InitContainer {
		return fmt.Errorf("%w: resize.container: %q is an init container, which ran to completion: expected a running container", ErrInvalidWorkload, rs.Container)
	}
	sc, running := s.ctrs[ctr.ID]
	if !running {
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
		return fmt.Errorf("%w: resize.resources: %w", ErrInvalidWorkload, err)
	}
	req, _, err := s.requests(sc).Build(sp.nri, s.nriContainer(sc), kubepod.ToNRIResources(res))
	if err != nil {
		r.Rejected = append(r.Rejected, rejection(sp, ctr, err.Error()))
		return nil
	}
	pl, others, err := s.pol.Resize(req)
	if err != nil {
		r.Rejected = append(r.Rejected, rejection(sp, ctr, err.Error()))
		return nil
	}
	sp.pod.Manifest, ctr.Manifest, ctr.Resources = manifest, newCtr, res
	kubepod.WithResources(ctr.Spec, res)
	setCPUSet(ctr.Spec, pl)
	changes[ctr.ID] = changeResized
	s.apply(others, changes)
	return nil
}

// resizedManifest returns the pod with the container's new resources, or
// why the API server would refuse the resize: only CPU and memory can be
// resized in place, and the pod's QoS class must not change.
func resizedManifest(old *v1.Pod, rs *Resize) (*v1.Pod, *v1.Container, string) {
	pod := old.DeepCopy()
	var ctr *v1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == rs.Container {
			ctr = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == rs.Container {
			ctr = &pod.Spec.InitContainers[i]
		}
	}
	oldRes := ctr.Resources
	ctr.Resources = *rs.Resources.DeepCopy()
	kubepod.ApplyDefaults(pod)
	for _, lists := range [][2]v1.ResourceList{{oldRes.Requests, ctr.Resources.Requests}, {oldRes.Limits, ctr.Resources.Limits}} {
		for _, name := range resourceNames(lists[0], lists[1]) {
			if name == v1.ResourceCPU || name == v1.ResourceMemory {
				continue
			}
			a, b := lists[0][name], lists[1][name]
			if a.Cmp(b) != 0 {
				return nil, nil, fmt.Sprintf("resize refused: only cpu and memory can be resized in place, and %s changes", name)
			}
		}
	}
	pod.Status.QOSClass = ""
	if before, after := kubepod.QOSClass(old), kubepod.QOSClass(pod); before != after {
		return nil, nil, fmt.Sprintf("resize refused: it would change the pod's QoS class from %s to %s, which Kubernetes does not allow", before, after)
	}
	return pod, ctr, ""
}

func resourceNames(lists ...v1.ResourceList) []v1.ResourceName {
	var names []v1.ResourceName
	for _, l := range lists {
		for name := range l {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// delete is the kubelet's pod deletion: it stops the app containers, then
// the sidecars in reverse order (KEP-753), and the plugin releases each.
func (s *Simulator) delete(ref PodRef, r *StepReport, changes map[string]string) error {
	r.Pod = ref.String()
	sp, err := s.pod(ref)
	if err != nil {
		return err
	}
	var order []*kubepod.Container
	for _, ctr := range sp.pod.Containers {
		if ctr.Kind == kubepod.AppContainer {
			order = append(order, ctr)
		}
	}
	for i := len(sp.pod.Containers) - 1; i >= 0; i-- {
		if ctr := sp.pod.Containers[i]; ctr.Kind == kubepod.SidecarContainer {
			order = append(order, ctr)
		}
	}
	for _, ctr := range order {
		sc, running := s.ctrs[ctr.ID]
		if !running {
			continue
		}
		pl, _ := s.pol.Placement(ctr.ID)
		r.Released = append(r.Released, s.entry(sc, pl, ""))
		s.release(ctr.ID, changes)
	}
	// The runtime stops the sandbox: what the pod scope held for it goes.
	others, _ := s.pol.ReleasePod(string(sp.pod.Manifest.UID))
	s.apply(others, changes)
	delete(s.pods, ref)
	return nil
}

// restart is a plugin restart: the checkpoint (the policy's snapshot,
// through JSON as on disk) is restored into a fresh policy together with
// the containers as the runtime reports them at Synchronize.
func (s *Simulator) restart(r *StepReport, changes map[string]string) error {
	data, err := json.Marshal(s.pol.Snapshot())
	if err != nil {
		return fmt.Errorf("checkpoint the policy: %w", err)
	}
	var saved policy.Snapshot
	if err := json.Unmarshal(data, &saved); err != nil {
		return fmt.Errorf("read the checkpoint back: %w", err)
	}
	fresh, err := policy.New(s.machine.Topology, s.cfg)
	if err != nil {
		return fmt.Errorf("build the policy: %w", err)
	}
	before := map[string]policy.Placement{}
	running := make([]policy.Running, 0, len(s.live))
	for _, id := range s.live {
		sc := s.ctrs[id]
		before[id], _ = s.pol.Placement(id)
		// As Synchronize: a container whose request cannot be fully built
		// is still accounted, with defaults for the bad parts.
		req, _, _ := s.requests(sc).Build(sc.pod.nri, s.nriContainer(sc), nil)
		cpu := sc.ctr.Spec.Linux.Resources.CPU
		cpus, err := cpuset.Parse(cpu.Cpus)
		if err != nil {
			return fmt.Errorf("container %s: cpuset.cpus %q: %w", sc.ctr.Name, cpu.Cpus, err)
		}
		mems, err := cpuset.Parse(cpu.Mems)
		if err != nil {
			return fmt.Errorf("container %s: cpuset.mems %q: %w", sc.ctr.Name, cpu.Mems, err)
		}
		running = append(running, policy.Running{Request: req, CPUs: cpus, Mems: mems})
	}
	report := fresh.Restore(saved, running)
	s.pol = fresh
	for _, id := range report.Adopted {
		changes[id] = changeAdopted
	}
	for _, pl := range report.Replaced {
		changes[pl.ContainerID] = changeReplaced
	}
	s.apply(report.Updates, changes)
	rr := &RestartReport{
		Kept: s.names(report.Kept), Adopted: s.names(report.Adopted), Dropped: report.Dropped,
		Replaced: []string{}, Moved: []string{},
	}
	for _, pl := range report.Replaced {
		rr.Replaced = append(rr.Replaced, s.name(pl.ContainerID))
	}
	for _, id := range s.live {
		after, _ := s.pol.Placement(id)
		if !after.CPUs.Equal(before[id].CPUs) || !after.Mems.Equal(before[id].Mems) {
			rr.Moved = append(rr.Moved, s.name(id))
		}
	}
	if rr.Dropped == nil {
		rr.Dropped = []string{}
	}
	r.Restart = rr
	return nil
}

// pod returns the live pod named ref.
func (s *Simulator) pod(ref PodRef) (*simPod, error) {
	sp, ok := s.pods[ref]
	if !ok {
		return nil, fmt.Errorf("%w: pod %s does not exist: expected a pod created by an earlier step and not deleted since", ErrInvalidWorkload, ref)
	}
	return sp, nil
}

func containerNames(p *kubepod.Pod) []string {
	names := make([]string, len(p.Containers))
	for i, c := range p.Containers {
		names[i] = c.Name
	}
	return names
}

// checkRuntimeView verifies that every container runs where the policy
// placed it, i.e. that the runtime got every update it needed.
func (s *Simulator) checkRuntimeView() error {
	var errs []error
	for _, id := range s.live {
		sc := s.ctrs[id]
		pl, ok := s.pol.Placement(id)
		if !ok {
			errs = append(errs, fmt.Errorf("container %s runs but the policy has no placement for it", s.name(id)))
			continue
		}
		cpu := sc.ctr.Spec.Linux.Resources.CPU
		if cpu.Cpus != pl.CPUs.String() || (!pl.Mems.IsEmpty() && cpu.Mems != pl.Mems.String()) {
			errs = append(errs, fmt.Errorf("container %s runs on cpus %q mems %q but the policy placed it on cpus %q mems %q: an update was not returned",
				s.name(id), cpu.Cpus, cpu.Mems, pl.CPUs, pl.Mems))
		}
	}
	return errors.Join(errs...)
}

// placements lists every running container with its placement, in
// creation order.
func (s *Simulator) placements(changes map[string]string) []ContainerPlacement {
	out := make([]ContainerPlacement, 0, len(s.live))
	for _, id := range s.live {
		pl, _ := s.pol.Placement(id)
		out = append(out, s.entry(s.ctrs[id], pl, changes[id]))
	}
	return out
}

func (s *Simulator) entry(sc *simContainer, pl policy.Placement, change string) ContainerPlacement {
	m := sc.pod.pod.Manifest
	nodes := s.machine.Topology.NodesOfCPUs(pl.CPUs)
	if nodes == nil {
		nodes = []int{}
	}
	return ContainerPlacement{
		ID: sc.ctr.ID, Namespace: m.Namespace, Pod: m.Name, Container: sc.ctr.Name,
		Pool: string(pl.Pool), CPUs: pl.CPUs.String(), Mems: pl.Mems.String(),
		NUMANodes: nodes, Affinity: slices.Clone(pl.NUMANodes),
		MemoryBytes: pl.Memory, HugePages: s.pageSizeNames(pl.HugePages), Reason: pl.Reason, Change: change,
	}
}

func rejection(sp *simPod, ctr *kubepod.Container, why string) Rejection {
	m := sp.pod.Manifest
	return Rejection{ID: ctr.ID, Namespace: m.Namespace, Pod: m.Name, Container: ctr.Name, Error: why}
}

// name is "namespace/pod/container" of a running container.
func (s *Simulator) name(id string) string {
	sc, ok := s.ctrs[id]
	if !ok {
		return id
	}
	m := sc.pod.pod.Manifest
	return m.Namespace + "/" + m.Name + "/" + sc.ctr.Name
}

func (s *Simulator) names(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.name(id))
	}
	return out
}

// state is the final state: every container, the shared pool and the use
// of every pool on every NUMA node.
func (s *Simulator) state() State {
	st := State{
		SharedCPUs: s.pol.SharedCPUs().String(),
		Containers: s.placements(nil),
		Pools:      map[string]int{},
		Usage:      s.pol.Usage(),
	}
	for _, c := range st.Containers {
		st.Pools[c.Pool]++
	}
	return st
}
