package simulate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

// Validate checks the whole workload against the machine before any step
// runs, and reports every problem, each with its file and position: a pod
// the kubelet could not convert, an object created twice, a step naming
// a pod, container or controller that does not exist at that point, a
// device the machine lacks, a resize the kubelet could not compute. What
// the plugin, the scheduler or the API server refuses is not a problem of
// the workload but a result of the run.
func (s *Simulator) Validate(w *Workload) error {
	v := &validation{s: s, pods: map[PodRef]validPod{}, owners: map[Delete]int{}}
	for i := range w.Steps {
		step := &w.Steps[i]
		switch step.Kind {
		case StepCreate:
			v.create(step)
		case StepResize:
			v.resize(step)
		case StepDelete:
			v.delete(step)
		}
	}
	return errors.Join(v.errs...)
}

// validation is the workload's objects as the steps leave them.
type validation struct {
	s    *Simulator
	errs []error
	pods map[PodRef]validPod
	// owners are the objects that exist, with the step that created them.
	owners map[Delete]int
}

type validPod struct {
	created int
	owner   Delete
	pod     *kubepod.Pod
}

func (v *validation) fail(pos Position, step *Step, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s: %s", pos, step, fmt.Sprintf(format, args...)))
}

func (v *validation) create(step *Step) {
	c := step.Create
	for name, devices := range c.Devices {
		for i, d := range devices {
			if err := v.s.checkDevice(d); err != nil {
				v.fail(step.Pos, step, "create.devices.%s[%d]: %v", name, i, err)
			}
		}
	}
	for _, o := range c.Objects {
		key := Delete{Kind: o.Kind, PodRef: PodRef{Namespace: o.Namespace, Name: o.Name}}
		if o.Kind != KindPod {
			if by, exists := v.owners[key]; exists {
				v.fail(o.Pos, step, "%s already exists (created by step %d): expected a new name, or a delete step first", o, by)
				continue
			}
			v.owners[key] = step.Number
		}
		for _, manifest := range o.Pods() {
			ref := PodRef{Namespace: manifest.Namespace, Name: manifest.Name}
			if old, exists := v.pods[ref]; exists {
				v.fail(o.Pos, step, "%s: pod %s already exists (created by step %d): expected a new pod, or a delete step first", o, ref, old.created)
				continue
			}
			pod, err := v.s.node.Convert(manifest)
			if err != nil {
				v.fail(o.Pos, step, "%s: %v", o, err)
				continue
			}
			v.pods[ref] = validPod{created: step.Number, owner: key, pod: pod}
		}
	}
}

func (v *validation) resize(step *Step) {
	rs := step.Resize
	p, exists := v.pods[rs.PodRef]
	if !exists {
		v.fail(step.Pos, step, "pod %s does not exist: expected a pod created by an earlier step and not deleted since", rs.PodRef)
		return
	}
	ctr := p.pod.Container(rs.Container)
	switch {
	case ctr == nil:
		v.fail(step.Pos, step, "resize.container: pod %s has no container %q: expected one of %s",
			rs.PodRef, rs.Container, strings.Join(containerNames(p.pod), ", "))
	case ctr.Kind == kubepod.InitContainer:
		v.fail(step.Pos, step, "resize.container: %q is an init container, which ran to completion: expected a running container", rs.Container)
	default:
		manifest, newCtr, why := resizedManifest(p.pod.Manifest, rs)
		if why != "" {
			return // refused by the API server: a result
		}
		if _, err := kubepod.ContainerResources(manifest, newCtr, v.s.node.MemoryCapacity, v.s.node.HugePageSizes); err != nil {
			v.fail(step.Pos, step, "resize.resources: %v", err)
			return
		}
		// Later resizes start from these resources, as the run's do.
		p.pod.Manifest = manifest
	}
}

func (v *validation) delete(step *Step) {
	d := *step.Delete
	if d.Kind == KindPod {
		if _, exists := v.pods[d.PodRef]; !exists {
			v.fail(step.Pos, step, "pod %s does not exist: expected a pod created by an earlier step and not deleted since", d.PodRef)
		}
		delete(v.pods, d.PodRef)
		return
	}
	if _, exists := v.owners[d]; !exists {
		v.fail(step.Pos, step, "%s does not exist: expected one created by an earlier step and not deleted since", d)
		return
	}
	delete(v.owners, d)
	for ref, p := range v.pods {
		if p.owner == d {
			delete(v.pods, ref)
		}
	}
}

func containerNames(p *kubepod.Pod) []string {
	names := make([]string, len(p.Containers))
	for i, c := range p.Containers {
		names[i] = c.Name
	}
	return names
}

// checkDevice checks that the machine has the device.
func (s *Simulator) checkDevice(d DeviceSpec) error {
	if d.NUMANode != nil {
		if _, ok := s.machine.Topology.Node(*d.NUMANode); !ok {
			return fmt.Errorf("numa-node %d: expected one of the machine's nodes %s", *d.NUMANode, cpuset.New(s.machine.Topology.Nodes()...))
		}
		return nil
	}
	if s.machine.SysfsRoot == "" {
		return fmt.Errorf("%s: the machine (%s) has no devices: expected --sysfs, a --topology description with devices, or a numa-node device", d, s.machine.Source)
	}
	if _, err := locality.OfDevice(s.machine.SysfsRoot, d.Kind, d.Major, d.Minor); err != nil {
		return err
	}
	return nil
}

// linuxDevice is the device node as the runtime puts it in the spec.
func (d DeviceSpec) linuxDevice() rspec.LinuxDevice {
	typ := "c"
	if d.Kind == locality.Block {
		typ = "b"
	}
	return rspec.LinuxDevice{Path: fmt.Sprintf("/dev/simulated/%s-%d-%d", d.Kind, d.Major, d.Minor), Type: typ, Major: d.Major, Minor: d.Minor}
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
						ctr.Name, name, orNone(strings.Join(s.node.HugePageSizes, ", ")))
				}
			}
		}
	}
	return ""
}

// resizedManifest returns the pod with the container's new resources, or
// why the API server would refuse the resize: only CPU and memory can be
// resized in place, and the pod's QoS class must not change.
func resizedManifest(old *v1.Pod, rs *Resize) (*v1.Pod, *v1.Container, string) {
	pod := old.DeepCopy()
	var ctr *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == rs.Container {
				ctr = &list[i]
			}
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
