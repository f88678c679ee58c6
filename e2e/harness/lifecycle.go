package harness

import (
	"context"
	"fmt"
	"github.com/intel/goresctrl/pkg/blockio"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrigen "github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	rgen "github.com/opencontainers/runtime-tools/generate"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
)

// This file follows the order of NRI calls that the kubelet's CRI requests
// cause in containerd (internal/cri/server and internal/nri/nri.go).

// NewPod converts a manifest into a pod of this runtime without running it.
func (rt *Runtime) NewPod(t testing.TB, manifest *v1.Pod) *Pod {
	t.Helper()
	def, err := rt.opts.node.Convert(manifest)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := &Pod{Def: def, rt: rt}
	for _, c := range def.Containers {
		p.containers = append(p.containers, &Container{Def: c, Pod: p, manifest: *c.Manifest.DeepCopy()})
	}
	return p
}

// RunPod runs a pod as the kubelet does: the sandbox, then every init
// container to completion (created, started, exited) with native sidecars
// started and left running in their place, then the app containers. Any
// error fails the test; use NewPod and StartPod to assert on one.
func (rt *Runtime) RunPod(t testing.TB, manifest *v1.Pod) *Pod {
	t.Helper()
	p := rt.NewPod(t, manifest)
	if err := rt.StartPod(p); err != nil {
		t.Fatalf("running pod %s/%s: %v", p.Namespace(), p.Name(), err)
	}
	return p
}

// StartPod runs the sandbox and containers of a pod made by NewPod in the
// kubelet's order, stopping at the first error.
func (rt *Runtime) StartPod(p *Pod) error {
	if err := rt.RunPodSandbox(p); err != nil {
		return err
	}
	for _, c := range p.containers {
		if err := rt.CreateContainer(c); err != nil {
			return err
		}
		if err := rt.StartContainer(c); err != nil {
			return err
		}
		if c.Kind() == kubepod.InitContainer {
			if err := rt.StopContainer(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemovePod tears a pod down as the kubelet and containerd do: app containers
// stopped, then sidecars in reverse order, then the sandbox stopped, every
// container removed and the sandbox removed. Errors fail the test.
func (rt *Runtime) RemovePod(t testing.TB, p *Pod) {
	t.Helper()
	var sidecars []*Container
	for _, c := range p.containers {
		switch c.Kind() {
		case kubepod.AppContainer:
			if err := rt.StopContainer(c); err != nil {
				t.Fatalf("removing pod %s/%s: %v", p.Namespace(), p.Name(), err)
			}
		case kubepod.SidecarContainer:
			sidecars = append(sidecars, c)
		}
	}
	slices.Reverse(sidecars)
	for _, c := range sidecars {
		if err := rt.StopContainer(c); err != nil {
			t.Fatalf("removing pod %s/%s: %v", p.Namespace(), p.Name(), err)
		}
	}
	if err := rt.StopPodSandbox(p); err != nil {
		t.Fatalf("removing pod %s/%s: %v", p.Namespace(), p.Name(), err)
	}
	if err := rt.RemovePodSandbox(p); err != nil {
		t.Fatalf("removing pod %s/%s: %v", p.Namespace(), p.Name(), err)
	}
}

// RunPodSandbox creates the pod's sandbox. A plugin error fails it, and then,
// as in containerd, the sandbox is stopped and removed for the plugins.
func (rt *Runtime) RunPodSandbox(p *Pod) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if p.ready || p.removed {
		return fmt.Errorf("running sandbox of pod %s/%s: it was already run", p.Namespace(), p.Name())
	}
	ctx := context.Background()
	pod := p.NRI()
	if err := nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		rt.logErr(nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod}))
		rt.logErr(nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}))
		return fmt.Errorf("running sandbox of pod %s/%s: %w", p.Namespace(), p.Name(), err)
	}
	p.ready = true
	rt.pods = append(rt.pods, p)
	return nil
}

// CreateContainer creates a container: the plugins adjust its spec and may
// update other containers. A plugin error is returned (wrapped), and then, as
// in containerd, the plugins see the container stopped and removed.
func (rt *Runtime) CreateContainer(c *Container) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if !c.Pod.ready {
		return fmt.Errorf("creating container %s: pod %s/%s is not running", c.Name(), c.Pod.Namespace(), c.Pod.Name())
	}
	if c.created {
		return fmt.Errorf("creating container %s: it was already created", c.Name())
	}
	ctx := context.Background()
	spec := cloneSpec(c.Def.Spec)
	// containerd has not stored the container yet: plugins see it as unknown.
	status := kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_UNKNOWN}
	pod := c.Pod.NRI()
	req := &api.CreateContainerRequest{Pod: pod, Container: kubepod.NRIContainer(c.Def, spec, status)}
	rsp, err := nri.CreateContainer(ctx, req)
	if err != nil {
		rt.undoCreateLocked(nri, pod, c, spec)
		return fmt.Errorf("creating container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	// containerd logs and ignores failures of these updates.
	rt.applyUpdatesLocked(rsp.GetUpdate())
	if err := rt.adjustLocked(c, spec, rsp.GetAdjust()); err != nil {
		rt.undoCreateLocked(nri, pod, c, spec)
		return fmt.Errorf("creating container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	c.spec = spec
	c.adjustment = rsp.GetAdjust()
	c.created = true
	c.status = kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_CREATED, CreatedAt: rt.tick()}
	rt.addContainerLocked(c)
	// containerd only logs a failed post-create notification.
	rt.logErr(nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: c.nriLocked()}))
	return nil
}

// adjustLocked applies an adjustment to a spec with NRI's generator, the
// code containerd's WithContainerAdjustment uses, with its resolvers of
// classes: an RDT class is the CLOS id, a block I/O class what the
// runtime's goresctrl configuration says (WithBlockIOConfig).
func (rt *Runtime) adjustLocked(c *Container, spec *rspec.Spec, adjust *api.ContainerAdjustment) error {
	gen := nrigen.SpecGenerator(&rgen.Generator{Config: spec},
		nrigen.WithRdtResolver(func(class string) (*rspec.LinuxIntelRdt, error) {
			if class == "" {
				return nil, nil
			}
			return &rspec.LinuxIntelRdt{ClosID: class}, nil
		}),
		nrigen.WithBlockIOResolver(func(class string) (*rspec.LinuxBlockIO, error) {
			if class == "" {
				return nil, nil
			}
			return blockio.OciLinuxBlockIO(class)
		}),
		nrigen.WithCDIDeviceInjector(func(s *rspec.Spec, devices []string) error {
			c.cdi = append(c.cdi, devices...)
			if rt.opts.cdi != nil {
				return rt.opts.cdi(s, devices)
			}
			return nil
		}))
	if err := gen.Adjust(adjust); err != nil {
		return fmt.Errorf("applying the NRI adjustment to the spec: %w", err)
	}
	return nil
}

// undoCreateLocked mirrors containerd's UndoCreateContainer.
func (rt *Runtime) undoCreateLocked(nri *adaptation.Adaptation, pod *api.PodSandbox, c *Container, spec *rspec.Spec) {
	ctx := context.Background()
	ctr := kubepod.NRIContainer(c.Def, spec, kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_UNKNOWN})
	_, err := nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
	rt.logErr(err)
	rt.logErr(nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}))
}

// StartContainer starts a created container. A plugin error fails the start.
func (rt *Runtime) StartContainer(c *Container) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if c.removed || c.status.State != api.ContainerState_CONTAINER_CREATED {
		return fmt.Errorf("starting container %s: it is %s, expected CONTAINER_CREATED", c.Name(), c.status.State)
	}
	ctx := context.Background()
	pod := c.Pod.NRI()
	if err := nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: c.nriLocked()}); err != nil {
		return fmt.Errorf("starting container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	c.status.State = api.ContainerState_CONTAINER_RUNNING
	c.status.StartedAt = rt.tick()
	rt.logErr(nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: c.nriLocked()}))
	return nil
}

// UpdateContainerResources is the kubelet's UpdateContainerResources (an
// in-place resize): the plugins see the new resources and may change them
// and update other containers; the result is written into the spec.
func (rt *Runtime) UpdateContainerResources(c *Container, res kubepod.LinuxContainerResources) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if !c.created || c.removed {
		return fmt.Errorf("updating container %s: it does not exist", c.Name())
	}
	ctx := context.Background()
	pod := c.Pod.NRI()
	req := &api.UpdateContainerRequest{Pod: pod, Container: c.nriLocked(), LinuxResources: kubepod.ToNRIResources(res)}
	rsp, err := nri.UpdateContainer(ctx, req)
	if err != nil {
		return fmt.Errorf("updating container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	// The last update is the one for this container (nil if no plugin
	// changed it); the others are for other containers.
	final := kubepod.ToNRIResources(res)
	if n := len(rsp.GetUpdate()); n > 0 {
		rt.applyUpdatesLocked(rsp.GetUpdate()[:n-1])
		if r := rsp.GetUpdate()[n-1].GetLinux().GetResources(); r != nil {
			final = r
		}
	}
	c.applyUpdateLocked(final)
	rt.logErr(nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: c.nriLocked()}))
	return nil
}

// ResizeContainer resizes a container in place to new requests and limits,
// with the CRI resources the kubelet computes for them.
func (rt *Runtime) ResizeContainer(c *Container, resources v1.ResourceRequirements) error {
	rt.mu.Lock()
	manifest := c.Pod.Def.Manifest.DeepCopy()
	ctr := c.manifest.DeepCopy()
	rt.mu.Unlock()
	ctr.Resources = resources
	for _, list := range [][]v1.Container{manifest.Spec.InitContainers, manifest.Spec.Containers} {
		for i := range list {
			if list[i].Name == ctr.Name {
				list[i] = *ctr
			}
		}
	}
	kubepod.ApplyDefaults(manifest)
	ctr = findContainer(manifest, ctr.Name)
	cfg := rt.opts.node.WithDefaults()
	res, err := kubepod.ContainerResources(manifest, ctr, cfg.MemoryCapacity, cfg.HugePageSizes)
	if err != nil {
		return fmt.Errorf("resizing container %s: %w", c.Name(), err)
	}
	if err := rt.UpdateContainerResources(c, res); err != nil {
		return err
	}
	rt.mu.Lock()
	c.manifest = *ctr
	rt.mu.Unlock()
	return nil
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// StopContainer stops (or, for an init container, records the exit of) a
// container; the plugins may update other containers in response. Stopping
// a container that is not created or running does nothing, as in containerd.
func (rt *Runtime) StopContainer(c *Container) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.stopLocked(c)
}

func (rt *Runtime) stopLocked(c *Container) error {
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if !c.created || c.removed || c.status.State == api.ContainerState_CONTAINER_STOPPED {
		return nil
	}
	c.status.State = api.ContainerState_CONTAINER_STOPPED
	c.status.FinishedAt = rt.tick()
	rsp, err := nri.StopContainer(context.Background(), &api.StopContainerRequest{Pod: c.Pod.NRI(), Container: c.nriLocked()})
	if err != nil {
		return fmt.Errorf("stopping container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	rt.applyUpdatesLocked(rsp.GetUpdate())
	return nil
}

// RemoveContainer removes a container, stopping it first if needed.
func (rt *Runtime) RemoveContainer(c *Container) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.removeLocked(c)
}

func (rt *Runtime) removeLocked(c *Container) error {
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if !c.created || c.removed {
		return nil
	}
	if err := rt.stopLocked(c); err != nil {
		return err
	}
	err = nri.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: c.Pod.NRI(), Container: c.nriLocked()})
	c.removed = true
	rt.removeContainerLocked(c)
	if err != nil {
		return fmt.Errorf("removing container %s of pod %s/%s: %w", c.Name(), c.Pod.Namespace(), c.Pod.Name(), err)
	}
	return nil
}

// StopPodSandbox stops every container of the pod still running, then the sandbox.
func (rt *Runtime) StopPodSandbox(p *Pod) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if !p.ready {
		return nil
	}
	for _, c := range p.containers {
		if err := rt.stopLocked(c); err != nil {
			return err
		}
	}
	p.ready = false
	if err := nri.StopPodSandbox(context.Background(), &api.StopPodSandboxRequest{Pod: p.NRI()}); err != nil {
		return fmt.Errorf("stopping sandbox of pod %s/%s: %w", p.Namespace(), p.Name(), err)
	}
	return nil
}

// RemovePodSandbox removes the pod's containers, newest first, then the sandbox.
func (rt *Runtime) RemovePodSandbox(p *Pod) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	nri, err := rt.adaptation()
	if err != nil {
		return err
	}
	if p.removed {
		return nil
	}
	for _, c := range slices.Backward(p.containers) {
		if err := rt.removeLocked(c); err != nil {
			return err
		}
	}
	p.ready = false
	p.removed = true
	rt.pods = slices.DeleteFunc(rt.pods, func(x *Pod) bool { return x == p })
	if err := nri.RemovePodSandbox(context.Background(), &api.RemovePodSandboxRequest{Pod: p.NRI()}); err != nil {
		return fmt.Errorf("removing sandbox of pod %s/%s: %w", p.Namespace(), p.Name(), err)
	}
	return nil
}

// logErr logs an error the runtime, like containerd, goes on after.
func (rt *Runtime) logErr(err error) {
	if err != nil {
		rt.t.Logf("harness: ignored as containerd does: %v", err)
	}
}
