package kubepod

// This file mirrors what containerd's CRI plugin (containerd v2.4,
// internal/cri/server and internal/cri/nri) builds from the kubelet's CRI
// requests: the sandbox and container OCI specs with their annotations and
// labels, and the NRI views of both (nri_api_linux.go: criPodSandbox and
// criContainer getters).

import (
	"maps"
	"strconv"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

// Labels the kubelet puts on sandboxes and containers (pkg/kubelet/types/labels.go).
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Annotations the kubelet puts on containers (pkg/kubelet/kuberuntime/labels.go).
const (
	AnnotationContainerHash          = "io.kubernetes.container.hash"
	AnnotationRestartCount           = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessage     = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationPolicy      = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
)

// Annotations containerd's CRI plugin puts into OCI specs
// (internal/cri/annotations/annotations.go) and its container kind label.
const (
	AnnotationContainerType    = "io.kubernetes.cri.container-type"
	ContainerTypeSandbox       = "sandbox"
	ContainerTypeContainer     = "container"
	AnnotationSandboxID        = "io.kubernetes.cri.sandbox-id"
	AnnotationSandboxName      = "io.kubernetes.cri.sandbox-name"
	AnnotationSandboxNamespace = "io.kubernetes.cri.sandbox-namespace"
	AnnotationSandboxUID       = "io.kubernetes.cri.sandbox-uid"
	AnnotationSandboxLogDir    = "io.kubernetes.cri.sandbox-log-directory"
	AnnotationSandboxCPUPeriod = "io.kubernetes.cri.sandbox-cpu-period"
	AnnotationSandboxCPUQuota  = "io.kubernetes.cri.sandbox-cpu-quota"
	AnnotationSandboxCPUShares = "io.kubernetes.cri.sandbox-cpu-shares"
	AnnotationSandboxMemory    = "io.kubernetes.cri.sandbox-memory"
	AnnotationRuntimeHandler   = "io.kubernetes.cri.runtime-handler"
	AnnotationContainerName    = "io.kubernetes.cri.container-name"
	AnnotationImageName        = "io.kubernetes.cri.image-name"
	LabelContainerdKind        = "io.cri-containerd.kind"

	// DefaultPathEnv is containerd's oci.DefaultPathEnv, used when the image has no PATH.
	DefaultPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// CgroupsPath mirrors containerd's getCgroupsPath (internal/cri/server):
// <parent>/<id> for cgroupfs, <parent slice>:cri-containerd:<id> for systemd.
func CgroupsPath(parent, id string, driver CgroupDriver) string {
	if driver == SystemdDriver {
		base := parent
		for i := len(parent) - 1; i >= 0; i-- {
			if parent[i] == '/' {
				base = parent[i+1:]
				break
			}
		}
		return base + ":cri-containerd:" + id
	}
	if parent == "" || parent[len(parent)-1] != '/' {
		return parent + "/" + id
	}
	return parent + id
}

// WithResources mirrors containerd's opts.WithResources
// (internal/cri/opts/spec_linux_opts.go): it writes CRI resources into an OCI
// spec, skipping zero values, with swap equal to the memory limit.
func WithResources(spec *rspec.Spec, r LinuxContainerResources) {
	if spec.Linux == nil {
		spec.Linux = &rspec.Linux{}
	}
	res := spec.Linux.Resources
	if res == nil {
		res = &rspec.LinuxResources{}
		spec.Linux.Resources = res
	}
	if res.CPU == nil {
		res.CPU = &rspec.LinuxCPU{}
	}
	if res.Memory == nil {
		res.Memory = &rspec.LinuxMemory{}
	}
	if r.CPUPeriod != 0 {
		p := uint64(r.CPUPeriod)
		res.CPU.Period = &p
	}
	if r.CPUQuota != 0 {
		q := r.CPUQuota
		res.CPU.Quota = &q
	}
	if r.CPUShares != 0 {
		s := uint64(r.CPUShares)
		res.CPU.Shares = &s
	}
	if r.CpusetCpus != "" {
		res.CPU.Cpus = r.CpusetCpus
	}
	if r.CpusetMems != "" {
		res.CPU.Mems = r.CpusetMems
	}
	if r.MemoryLimitInBytes != 0 {
		limit, swap := r.MemoryLimitInBytes, r.MemoryLimitInBytes
		res.Memory.Limit = &limit
		res.Memory.Swap = &swap
	}
	if len(r.HugepageLimits) > 0 {
		res.HugepageLimits = res.HugepageLimits[:0]
		for _, l := range r.HugepageLimits {
			res.HugepageLimits = append(res.HugepageLimits, rspec.LinuxHugepageLimit{Pagesize: l.PageSize, Limit: l.Limit})
		}
	}
}

// ToNRIResources mirrors fromCRILinuxResources (internal/cri/nri/nri_api_linux.go):
// the CRI resources of an UpdateContainerResources request as NRI sees them.
func ToNRIResources(r LinuxContainerResources) *api.LinuxResources {
	shares, quota, period, limit := uint64(r.CPUShares), r.CPUQuota, uint64(r.CPUPeriod), r.MemoryLimitInBytes
	out := &api.LinuxResources{
		Cpu: &api.LinuxCPU{
			Shares: api.UInt64(&shares),
			Quota:  api.Int64(&quota),
			Period: api.UInt64(&period),
			Cpus:   r.CpusetCpus,
			Mems:   r.CpusetMems,
		},
		Memory: &api.LinuxMemory{Limit: api.Int64(&limit)},
	}
	for _, l := range r.HugepageLimits {
		out.HugepageLimits = append(out.HugepageLimits, &api.HugepageLimit{PageSize: l.PageSize, Limit: l.Limit})
	}
	return out
}

// FromNRIResources mirrors toCRIResources (internal/cri/nri/nri_api_linux.go):
// what containerd makes of the resources NRI returns for an update.
func FromNRIResources(r *api.LinuxResources) LinuxContainerResources {
	var o LinuxContainerResources
	if r == nil {
		return o
	}
	if r.Memory != nil {
		o.MemoryLimitInBytes = r.Memory.GetLimit().GetValue()
	}
	if r.Cpu != nil {
		o.CPUShares = int64(r.Cpu.GetShares().GetValue())
		o.CPUPeriod = int64(r.Cpu.GetPeriod().GetValue())
		o.CPUQuota = r.Cpu.GetQuota().GetValue()
		o.CpusetCpus = r.Cpu.Cpus
		o.CpusetMems = r.Cpu.Mems
	}
	for _, l := range r.HugepageLimits {
		o.HugepageLimits = append(o.HugepageLimits, HugepageLimit{PageSize: l.PageSize, Limit: l.Limit})
	}
	return o
}

// NRIPodSandbox mirrors containerd's criPodSandbox getters: the NRI view of a
// sandbox from its CRI config and its (pause container's) OCI spec.
func NRIPodSandbox(p *Pod) *api.PodSandbox {
	annotations := maps.Clone(p.Annotations)
	maps.Copy(annotations, p.Spec.Annotations)
	return &api.PodSandbox{
		Id:             p.ID,
		Name:           p.Manifest.Name,
		Uid:            string(p.Manifest.UID),
		Namespace:      p.Manifest.Namespace,
		Labels:         maps.Clone(p.Labels),
		Annotations:    annotations,
		RuntimeHandler: p.RuntimeHandler,
		Linux: &api.LinuxPodSandbox{
			PodOverhead:  ToNRIResources(LinuxContainerResources{}),
			PodResources: ToNRIResources(p.Resources),
			CgroupParent: p.CgroupParent,
			CgroupsPath:  p.Spec.Linux.CgroupsPath,
			Namespaces:   api.FromOCILinuxNamespaces(p.Spec.Linux.Namespaces),
			Resources:    api.FromOCILinuxResources(p.Spec.Linux.Resources, nil),
		},
	}
}

// ContainerStatus is the runtime status NRI reports beside the spec.
type ContainerStatus struct {
	State      api.ContainerState
	Pid        uint32
	CreatedAt  int64
	StartedAt  int64
	FinishedAt int64
	ExitCode   int32
}

// NRIContainer mirrors containerd's criContainer getters and
// commonContainerToNRI: the NRI view of a container from its CRI config and
// its current OCI spec (which NRI adjustments and updates have changed).
func NRIContainer(c *Container, spec *rspec.Spec, status ContainerStatus) *api.Container {
	labels := maps.Clone(c.Labels)
	annotations := maps.Clone(spec.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, c.Annotations)
	out := &api.Container{
		Id:           c.ID,
		PodSandboxId: spec.Annotations[AnnotationSandboxID],
		Name:         spec.Annotations[AnnotationContainerName],
		State:        status.State,
		Labels:       labels,
		Annotations:  annotations,
		Mounts:       api.FromOCIMounts(spec.Mounts),
		Hooks:        api.FromOCIHooks(spec.Hooks),
		Pid:          status.Pid,
		CreatedAt:    status.CreatedAt,
		StartedAt:    status.StartedAt,
		FinishedAt:   status.FinishedAt,
		ExitCode:     status.ExitCode,
		Linux:        &api.LinuxContainer{SeccompProfile: c.SeccompProfile},
	}
	for _, name := range c.CDIDevices {
		out.CDIDevices = append(out.CDIDevices, &api.CDIDevice{Name: name})
	}
	if p := spec.Process; p != nil {
		out.Args = api.DupStringSlice(p.Args)
		out.Env = api.DupStringSlice(p.Env)
		out.Linux.OomScoreAdj = api.Int(p.OOMScoreAdj)
		out.Linux.IoPriority = api.FromOCILinuxIOPriority(p.IOPriority)
		if p.Scheduler != nil {
			out.Linux.Scheduler = api.FromOCILinuxScheduler(p.Scheduler)
		}
		out.User = &api.User{Uid: p.User.UID, Gid: p.User.GID, AdditionalGids: p.User.AdditionalGids}
	}
	if l := spec.Linux; l != nil {
		out.Linux.Namespaces = api.FromOCILinuxNamespaces(l.Namespaces)
		out.Linux.Devices = api.FromOCILinuxDevices(l.Devices)
		out.Linux.Resources = api.FromOCILinuxResources(l.Resources, spec.Annotations)
		out.Linux.CgroupsPath = l.CgroupsPath
		out.Linux.NetDevices = api.FromOCILinuxNetDevices(l.NetDevices)
		if len(l.Sysctl) > 0 {
			out.Linux.Sysctl = maps.Clone(l.Sysctl)
		}
		if l.IntelRdt != nil {
			out.Linux.Rdt = &api.LinuxRdt{
				ClosId:           api.String(l.IntelRdt.ClosID),
				Schemata:         api.RepeatedString(l.IntelRdt.Schemata),
				EnableMonitoring: api.Bool(l.IntelRdt.EnableMonitoring),
			}
		}
	}
	return out
}

func sandboxResourceAnnotations(r LinuxContainerResources) map[string]string {
	return map[string]string{
		AnnotationSandboxCPUPeriod: strconv.FormatInt(r.CPUPeriod, 10),
		AnnotationSandboxCPUQuota:  strconv.FormatInt(r.CPUQuota, 10),
		AnnotationSandboxCPUShares: strconv.FormatInt(r.CPUShares, 10),
		AnnotationSandboxMemory:    strconv.FormatInt(r.MemoryLimitInBytes, 10),
	}
}
