package harness

import (
	"encoding/json"
	"testing"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
)

// Pod is a pod the runtime knows: its sandbox and containers.
type Pod struct {
	// Def is the pod as the kubelet and containerd's CRI plugin made it.
	Def        *kubepod.Pod
	rt         *Runtime
	containers []*Container
	ready      bool
	removed    bool
}

// Name is the pod's name.
func (p *Pod) Name() string { return p.Def.Manifest.Name }

// Namespace is the pod's namespace.
func (p *Pod) Namespace() string { return p.Def.Manifest.Namespace }

// ID is the sandbox id.
func (p *Pod) ID() string { return p.Def.ID }

// QOS is the pod's QoS class.
func (p *Pod) QOS() v1.PodQOSClass { return p.Def.QOS }

// Containers are the pod's containers in the kubelet's start order.
func (p *Pod) Containers() []*Container { return append([]*Container(nil), p.containers...) }

// Container returns the container named name, or nil.
func (p *Pod) Container(name string) *Container {
	for _, c := range p.containers {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// NRI is the pod as NRI plugins see it.
func (p *Pod) NRI() *api.PodSandbox { return kubepod.NRIPodSandbox(p.Def) }

// Container is a container with its live OCI spec.
type Container struct {
	// Def is the container as containerd created it, before NRI.
	Def *kubepod.Container
	Pod *Pod

	// Guarded by Pod.rt.mu.
	spec       *rspec.Spec
	status     kubepod.ContainerStatus
	created    bool
	removed    bool
	manifest   v1.Container
	adjustment *api.ContainerAdjustment
	updates    []*api.LinuxResources
	dropped    int
	cdi        []string
}

// Name is the container's name.
func (c *Container) Name() string { return c.Def.Name }

// ID is the container's id.
func (c *Container) ID() string { return c.Def.ID }

// Kind tells an init, sidecar or app container apart.
func (c *Container) Kind() kubepod.Kind { return c.Def.Kind }

// State is the container's NRI state; CONTAINER_UNKNOWN before creation and
// after removal.
func (c *Container) State() api.ContainerState {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	if c.removed {
		return api.ContainerState_CONTAINER_UNKNOWN
	}
	return c.status.State
}

// Spec is a snapshot of the container's OCI spec: what containerd created,
// adjusted by the plugins at creation and updated since.
func (c *Container) Spec() Spec {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return Spec{Spec: cloneSpec(c.specLocked())}
}

// Cpuset is the container's cpuset.cpus and cpuset.mems now, as Spec says
// them, without the copy of the whole spec: for tests that read every
// container at every step.
func (c *Container) Cpuset() (cpus, mems string) {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	spec := Spec{Spec: c.specLocked()}
	return spec.CPUs(), spec.Mems()
}

// NRI is the container as NRI plugins see it now.
func (c *Container) NRI() *api.Container {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return c.nriLocked()
}

// Adjustment is what the plugins returned for this container at creation
// (nil before creation or when no plugin adjusted it).
func (c *Container) Adjustment() *api.ContainerAdjustment {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return c.adjustment
}

// updateHistory is how many updates a container remembers: tests look at
// the last few, while a benchmark makes thousands per container, which
// containerd does not keep either (and a growing heap would slow down the
// runtime it measures).
const updateHistory = 32

// Updates are the resources of the updates the plugins applied to this
// container after its creation (in-place resizes included), oldest first:
// the last 32.
func (c *Container) Updates() []*api.LinuxResources {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return append([]*api.LinuxResources(nil), c.updates[max(0, len(c.updates)-updateHistory):]...)
}

// DroppedUpdates is how many updates of this container the runtime lost
// before its start (WithDroppedUpdatesUntilStart).
func (c *Container) DroppedUpdates() int {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return c.dropped
}

// CDIDevices are the CDI device names the plugins asked the runtime to inject.
func (c *Container) CDIDevices() []string {
	c.Pod.rt.mu.Lock()
	defer c.Pod.rt.mu.Unlock()
	return append([]string(nil), c.cdi...)
}

func (c *Container) specLocked() *rspec.Spec {
	if c.spec != nil {
		return c.spec
	}
	return c.Def.Spec
}

func (c *Container) nriLocked() *api.Container {
	return kubepod.NRIContainer(c.Def, c.specLocked(), c.status)
}

// applyUpdateLocked mirrors containerd's domain UpdateContainer: NRI
// resources become CRI resources and are written into the spec with
// containerd's WithResources.
func (c *Container) applyUpdateLocked(r *api.LinuxResources) {
	if r == nil {
		return
	}
	kubepod.WithResources(c.spec, kubepod.FromNRIResources(r))
	// Up to twice the history, then the older half goes: amortized O(1).
	if len(c.updates) == 2*updateHistory {
		c.updates = append(c.updates[:0], c.updates[updateHistory:]...)
		clear(c.updates[updateHistory:cap(c.updates)])
	}
	c.updates = append(c.updates, r)
}

// cloneSpec deep-copies a spec with a JSON round trip, which cannot fail: an
// OCI spec holds only strings, integers, bools, pointers, maps and slices.
func cloneSpec(s *rspec.Spec) *rspec.Spec {
	data, _ := json.Marshal(s)
	out := &rspec.Spec{}
	_ = json.Unmarshal(data, out)
	return out
}

// LoadPod reads a kubelet-style pod manifest, failing the test on error.
func LoadPod(t testing.TB, path string) *v1.Pod {
	t.Helper()
	pod, err := kubepod.LoadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pod
}

// ParsePod parses a kubelet-style pod manifest, failing the test on error.
func ParsePod(t testing.TB, manifest string) *v1.Pod {
	t.Helper()
	pod, err := kubepod.Parse([]byte(manifest))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pod
}
