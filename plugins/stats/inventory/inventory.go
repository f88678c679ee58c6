// Package inventory is the stats plugin's view of the node: every pod and
// container NRI has told it about, with the cgroup each one's usage is read
// from. It is rebuilt from scratch by every Synchronize, so it is right
// again after a restart of the plugin or of the runtime.
package inventory

import (
	"sort"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/kubepod"
)

// Pod is a pod sandbox.
type Pod struct {
	ID        string // the runtime's sandbox id
	UID       string
	Namespace string
	Name      string
	// CgroupParent is the pod's cgroup as the runtime got it from the
	// kubelet (cgroupfs path or systemd slice); empty when unknown.
	CgroupParent string
	// SandboxCgroupsPath is the sandbox (pause) container's cgroups path,
	// as CgroupsPath of a container; empty when unknown.
	SandboxCgroupsPath string
	// Pid is the sandbox's process, in the pod's network namespace; 0 when
	// unknown or stopped.
	Pid uint32
}

// Container is a container of a pod.
type Container struct {
	ID    string
	PodID string
	Name  string
	// Image is NRI's image name (containerd >= 2.2); else the CRI plugin's
	// io.kubernetes.cri.image-name annotation; else empty.
	Image string
	// CgroupsPath is the OCI spec's cgroups path (cgroupfs or
	// slice:prefix:name).
	CgroupsPath string
	// Started is when the container started; its creation until it has.
	Started time.Time
	// Created is when the runtime created it; zero if it did not say.
	Created time.Time
	// Running is set from StartContainer to StopContainer: only then does
	// the container have a cgroup to read.
	Running bool
}

// Inventory is safe for concurrent use.
type Inventory struct {
	mu         sync.RWMutex
	pods       map[string]Pod
	containers map[string]Container
}

// New returns an empty inventory.
func New() *Inventory {
	return &Inventory{pods: map[string]Pod{}, containers: map[string]Container{}}
}

// PodFromNRI describes an NRI pod sandbox.
func PodFromNRI(p *api.PodSandbox) Pod {
	id := k8s.IdentityOf(p, nil)
	return Pod{ID: p.GetId(), UID: id.PodUID, Namespace: id.Namespace, Name: id.Pod,
		CgroupParent: p.GetLinux().GetCgroupParent(), SandboxCgroupsPath: p.GetLinux().GetCgroupsPath(), Pid: p.GetPid()}
}

// ContainerFromNRI describes an NRI container.
func ContainerFromNRI(pod *api.PodSandbox, c *api.Container) Container {
	// Unix nanoseconds, as containerd fills them in; NRI's GetStartedAtTime
	// adds them to year 1 instead of the Unix epoch.
	created, started := time.Time{}, time.Time{}
	if c.GetCreatedAt() != 0 {
		created, started = time.Unix(0, c.GetCreatedAt()), time.Unix(0, c.GetCreatedAt())
	}
	if c.GetStartedAt() != 0 {
		started = time.Unix(0, c.GetStartedAt())
	}
	image := c.GetImage().GetName()
	if image == "" {
		image = c.GetAnnotations()[kubepod.AnnotationImageName]
	}
	return Container{
		ID: c.GetId(), PodID: c.GetPodSandboxId(), Name: k8s.IdentityOf(pod, c).Container,
		Image: image, CgroupsPath: c.GetLinux().GetCgroupsPath(), Started: started, Created: created,
		Running: c.GetState() == api.ContainerState_CONTAINER_RUNNING,
	}
}

// Replace makes the inventory exactly pods and containers, as Synchronize
// reports them.
func (inv *Inventory) Replace(pods []*api.PodSandbox, containers []*api.Container) {
	byID := make(map[string]*api.PodSandbox, len(pods))
	newPods := make(map[string]Pod, len(pods))
	for _, p := range pods {
		byID[p.GetId()] = p
		newPods[p.GetId()] = PodFromNRI(p)
	}
	newContainers := make(map[string]Container, len(containers))
	for _, c := range containers {
		newContainers[c.GetId()] = ContainerFromNRI(byID[c.GetPodSandboxId()], c)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.pods, inv.containers = newPods, newContainers
}

// SetPod adds or updates a pod.
func (inv *Inventory) SetPod(p *api.PodSandbox) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.pods[p.GetId()] = PodFromNRI(p)
}

// StopPod forgets a pod's sandbox process, which has exited: its pid may
// be another process's soon.
func (inv *Inventory) StopPod(id string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if p, ok := inv.pods[id]; ok {
		p.Pid = 0
		inv.pods[id] = p
	}
}

// RemovePod forgets a pod and any container of it still known.
func (inv *Inventory) RemovePod(id string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.pods, id)
	for cid, c := range inv.containers {
		if c.PodID == id {
			delete(inv.containers, cid)
		}
	}
}

// SetContainer adds or updates a container (and its pod).
func (inv *Inventory) SetContainer(pod *api.PodSandbox, c *api.Container) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if pod != nil {
		inv.pods[pod.GetId()] = PodFromNRI(pod)
	}
	inv.containers[c.GetId()] = ContainerFromNRI(pod, c)
}

// SetRunning marks a container as running (its cgroup exists and is read)
// or stopped (its cgroup goes away with it and is no longer read).
func (inv *Inventory) SetRunning(id string, running bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if c, ok := inv.containers[id]; ok {
		c.Running = running
		inv.containers[id] = c
	}
}

// RemoveContainer forgets a container.
func (inv *Inventory) RemoveContainer(id string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.containers, id)
}

// PodView is a pod with its containers, sorted by name.
type PodView struct {
	Pod
	Containers []Container
}

// Snapshot returns every pod with its containers, sorted by namespace and
// name. A container whose pod is unknown gets a pod with its id only.
func (inv *Inventory) Snapshot() []PodView {
	inv.mu.RLock()
	views := make(map[string]*PodView, len(inv.pods))
	for id, p := range inv.pods {
		views[id] = &PodView{Pod: p}
	}
	for _, c := range inv.containers {
		v, ok := views[c.PodID]
		if !ok {
			v = &PodView{Pod: Pod{ID: c.PodID}}
			views[c.PodID] = v
		}
		v.Containers = append(v.Containers, c)
	}
	inv.mu.RUnlock()

	out := make([]PodView, 0, len(views))
	for _, v := range views {
		sort.Slice(v.Containers, func(i, j int) bool { return v.Containers[i].Name < v.Containers[j].Name })
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}
