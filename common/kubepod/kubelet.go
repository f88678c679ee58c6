package kubepod

// This file mirrors what the kubelet computes for a pod before it calls the
// CRI runtime. Each function names the kubelet (or API defaulting) function it
// follows, so that a change upstream can be tracked here. Only what reaches a
// runtime through CRI is modelled: QoS class, cgroup parent, CPU shares and
// CFS quota, memory limit, OOM score adjustment, hugepage limits and the
// sandbox-level resources.

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Constants of pkg/kubelet/cm/helpers_linux.go and pkg/kubelet/qos/policy.go.
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	MilliCPUToCPU  = 1000
	QuotaPeriod    = 100000
	MinQuotaPeriod = 1000

	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000

	systemNodeCritical = "system-node-critical"
	hugePagesPrefix    = "hugepages-"
)

// CgroupDriver is the kubelet's cgroupDriver setting; it decides how the
// cgroup parent of a pod is spelled.
type CgroupDriver string

const (
	// CgroupfsDriver spells cgroups as paths: /kubepods/burstable/pod<uid>.
	CgroupfsDriver CgroupDriver = "cgroupfs"
	// SystemdDriver spells cgroups as slices: /kubepods.slice/kubepods-burstable.slice/...
	SystemdDriver CgroupDriver = "systemd"
)

// LinuxContainerResources is the CRI LinuxContainerResources message that the
// kubelet sends in CreateContainer and UpdateContainerResources.
type LinuxContainerResources struct {
	CPUPeriod          int64
	CPUQuota           int64
	CPUShares          int64
	MemoryLimitInBytes int64
	OOMScoreAdj        int64
	CpusetCpus         string
	CpusetMems         string
	HugepageLimits     []HugepageLimit
}

// HugepageLimit is a CRI hugepage limit: a page size such as "2MB" and bytes.
type HugepageLimit struct {
	PageSize string
	Limit    uint64
}

// ApplyDefaults sets a request equal to the limit for every resource that has
// a limit and no request, in init and app containers, as the API server's
// SetDefaults_Pod (pkg/apis/core/v1/defaults.go) does and the kubelet repeats
// for static pods when it decodes them; then the pod-level requests
// (KEP-2837) as its defaultPodRequests does.
func ApplyDefaults(pod *v1.Pod) {
	if pod.Namespace == "" {
		pod.Namespace = v1.NamespaceDefault
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			defaultRequests(&list[i].Resources)
		}
	}
	defaultPodRequests(pod)
}

// defaultRequests sets a request equal to the limit where only a limit is set.
func defaultRequests(res *v1.ResourceRequirements) {
	for name, limit := range res.Limits {
		if _, ok := res.Requests[name]; ok {
			continue
		}
		if res.Requests == nil {
			res.Requests = v1.ResourceList{}
		}
		res.Requests[name] = limit.DeepCopy()
	}
}

// defaultPodRequests mirrors the API server's defaultPodRequests: with
// pod-level limits, a pod-level hugepages request defaults to what the
// containers request of it, and any other missing pod-level request to the
// pod-level limit.
func defaultPodRequests(pod *v1.Pod) {
	res := pod.Spec.Resources
	if res == nil || len(res.Limits) == 0 {
		return
	}
	if res.Requests == nil {
		res.Requests = v1.ResourceList{}
	}
	for name, q := range AggregateContainerResources(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }) {
		if _, ok := res.Requests[name]; !ok && strings.HasPrefix(string(name), hugePagesPrefix) {
			res.Requests[name] = q.DeepCopy()
		}
	}
	for name, limit := range res.Limits {
		if _, ok := res.Requests[name]; !ok && isSupportedPodLevelResource(name) {
			res.Requests[name] = limit.DeepCopy()
		}
	}
}

// isSupportedPodLevelResource mirrors the helper of the same name in
// k8s.io/component-helpers/resource: CPU, memory and hugepages.
func isSupportedPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), hugePagesPrefix)
}

// HasPodLevelResources mirrors IsPodLevelResourcesSet
// (k8s.io/component-helpers/resource): the pod sets a request or a limit of
// a supported resource in its spec.resources (KEP-2837).
func HasPodLevelResources(pod *v1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for _, l := range []v1.ResourceList{pod.Spec.Resources.Requests, pod.Spec.Resources.Limits} {
		for name := range l {
			if isSupportedPodLevelResource(name) {
				return true
			}
		}
	}
	return false
}

// isSupportedQoSComputeResource mirrors the helper of the same name in
// pkg/apis/core/v1/helper/qos: only CPU and memory decide the QoS class.
func isSupportedQoSComputeResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory
}

// QOSClass mirrors qos.GetPodQOS / ComputePodQOS
// (pkg/apis/core/v1/helper/qos/qos.go): with pod-level resources (KEP-2837)
// the pod's own requests and limits decide alone (podLevelQOS); else
// BestEffort when no container asks for CPU or memory, Guaranteed when
// every container has CPU and memory limits and the summed requests equal
// the summed limits, Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if HasPodLevelResources(pod) {
		return podLevelQOS(*pod.Spec.Resources)
	}
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	isGuaranteed := true
	all := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, c := range all {
		addPositive(requests, c.Resources.Requests)
		found := addPositive(limits, c.Resources.Limits)
		if !found[v1.ResourceCPU] || !found[v1.ResourceMemory] {
			isGuaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if isGuaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				isGuaranteed = false
				break
			}
		}
	}
	if isGuaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// podLevelQOS mirrors resourceQOS of ComputePodQOS for pod-level
// resources: Guaranteed when CPU and memory both have requests equal to
// their limits, BestEffort when neither is set, Burstable otherwise.
func podLevelQOS(res v1.ResourceRequirements) v1.PodQOSClass {
	guaranteed, bestEffort := true, true
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := res.Requests[name], res.Limits[name]
		if !req.Equal(lim) {
			return v1.PodQOSBurstable
		}
		if req.IsZero() {
			guaranteed = false
		} else {
			bestEffort = false
		}
	}
	switch {
	case guaranteed:
		return v1.PodQOSGuaranteed
	case bestEffort:
		return v1.PodQOSBestEffort
	}
	return v1.PodQOSBurstable
}

// addPositive adds the positive CPU and memory quantities of from into to and
// reports which resources it found.
func addPositive(to, from v1.ResourceList) map[v1.ResourceName]bool {
	found := map[v1.ResourceName]bool{}
	for name, q := range from {
		if !isSupportedQoSComputeResource(name) || q.Sign() <= 0 {
			continue
		}
		found[name] = true
		sum := q.DeepCopy()
		if prev, ok := to[name]; ok {
			sum.Add(prev)
		}
		to[name] = sum
	}
	return found
}

// MilliCPUToShares mirrors cm.MilliCPUToShares (pkg/kubelet/cm/helpers_linux.go).
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		// The kubelet maps "no request" to the kernel minimum, not to the
		// cgroup default of 1024.
		return MinShares
	}
	shares := (milliCPU * SharesPerCPU) / MilliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	if shares > MaxShares {
		return MaxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota mirrors milliCPUToQuota (pkg/kubelet/cm/helpers_linux.go):
// 0 (no quota) without a limit, else the limit scaled to the period with a
// 1 ms minimum.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := (milliCPU * period) / MilliCPUToCPU
	if quota < MinQuotaPeriod {
		quota = MinQuotaPeriod
	}
	return quota
}

// CalculateLinuxResources mirrors kubeGenericRuntimeManager.calculateLinuxResources
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go) with the CFS quota
// enabled and the default 100ms period. cpuRequest nil means "not set".
func CalculateLinuxResources(cpuRequest, cpuLimit, memoryLimit *resource.Quantity) LinuxContainerResources {
	var r LinuxContainerResources
	switch {
	case cpuRequest == nil && cpuLimit != nil && !cpuLimit.IsZero():
		r.CPUShares = int64(MilliCPUToShares(cpuLimit.MilliValue()))
	case cpuRequest == nil:
		r.CPUShares = int64(MilliCPUToShares(0))
	default:
		r.CPUShares = int64(MilliCPUToShares(cpuRequest.MilliValue()))
	}
	if memoryLimit != nil {
		r.MemoryLimitInBytes = memoryLimit.Value()
	}
	var milliLimit int64
	if cpuLimit != nil {
		milliLimit = cpuLimit.MilliValue()
	}
	r.CPUQuota = MilliCPUToQuota(milliLimit, QuotaPeriod)
	r.CPUPeriod = QuotaPeriod
	return r
}

// ContainerResources mirrors generateLinuxContainerResources
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go): shares, quota and
// memory limit from the container's resources, the OOM score adjustment of
// its QoS class and a limit for every hugepage size of the node. In a pod
// with pod-level resources a container without a CPU or memory limit of
// its own gets the pod's (getCPULimit, getMemoryLimit).
func ContainerResources(pod *v1.Pod, c *v1.Container, memoryCapacity int64, hugePageSizes []string) (LinuxContainerResources, error) {
	var cpuRequest *resource.Quantity
	if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = &q
	}
	cpuLimit, memoryLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if HasPodLevelResources(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memoryLimit.IsZero() {
			memoryLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := CalculateLinuxResources(cpuRequest, cpuLimit, memoryLimit)
	r.OOMScoreAdj = int64(OOMScoreAdj(pod, c, memoryCapacity))
	hp, err := HugepageLimits(c.Resources, hugePageSizes)
	if err != nil {
		return LinuxContainerResources{}, fmt.Errorf("computing resources of container %q: %w", c.Name, err)
	}
	r.HugepageLimits = hp
	return r, nil
}

// OOMScoreAdj mirrors qos.GetContainerOOMScoreAdjust (pkg/kubelet/qos/policy.go).
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int {
	if pod.Spec.PriorityClassName == systemNodeCritical {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		memoryCapacity = 1
	}
	// With a pod-level memory request, what the containers do not request
	// of it is shared out equally among them (KEP-2837).
	remaining := remainingPodMemoryPerContainer(pod)
	memoryRequest := c.Resources.Requests.Memory().Value()
	adj := 1000 - (1000*(memoryRequest+remaining))/memoryCapacity
	// A sidecar should not outlive the containers it serves under OOM: it gets
	// at most the score of the regular container with the smallest request.
	if IsSidecar(pod, c) && len(pod.Spec.Containers) > 0 {
		minAdj := 1000 - (1000*(minRegularContainerMemory(pod)+remaining))/memoryCapacity
		adj = min(adj, minAdj)
	}
	if int(adj) < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if int(adj) == BestEffortOOMScoreAdj {
		return int(adj - 1)
	}
	return int(adj)
}

// remainingPodMemoryPerContainer mirrors remainingPodMemReqPerContainer
// (pkg/kubelet/qos/policy.go): the pod-level memory request less what the
// containers request, divided among all of them, init containers included;
// 0 without a pod-level memory request.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil {
		return 0
	}
	podRequest := pod.Spec.Resources.Requests.Memory().Value()
	count := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if podRequest == 0 || count == 0 {
		return 0
	}
	containers := AggregateContainerResources(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests })
	return (podRequest - containers.Memory().Value()) / count
}

// minRegularContainerMemory mirrors the helper of the same name in
// pkg/kubelet/qos/policy.go.
func minRegularContainerMemory(pod *v1.Pod) int64 {
	least := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for _, c := range pod.Spec.Containers[1:] {
		least = min(least, c.Resources.Requests.Memory().Value())
	}
	return least
}

// IsSidecar reports whether c is a native sidecar: an init container with
// restartPolicy Always (KEP-753).
func IsSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// HugepageLimits mirrors GetHugepageLimitsFromResources
// (pkg/kubelet/kuberuntime/helpers_linux.go): every page size of the node
// gets a limit, 0 unless the container's limits name that size.
func HugepageLimits(res v1.ResourceRequirements, nodePageSizes []string) ([]HugepageLimit, error) {
	required := map[string]uint64{}
	for name, amount := range res.Limits {
		if !strings.HasPrefix(string(name), hugePagesPrefix) {
			continue
		}
		size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), hugePagesPrefix))
		if err != nil {
			return nil, fmt.Errorf("parsing hugepage resource %q: %w", name, err)
		}
		unit, err := HugePageUnitSize(size.Value())
		if err != nil {
			return nil, fmt.Errorf("parsing hugepage resource %q: %w", name, err)
		}
		required[unit] = uint64(amount.Value())
	}
	limits := make([]HugepageLimit, 0, len(nodePageSizes))
	for _, size := range nodePageSizes {
		limits = append(limits, HugepageLimit{PageSize: size, Limit: required[size]})
	}
	return limits, nil
}

// HugePageUnitSize mirrors v1helper.HugePageUnitSizeFromByteSize: 2097152 is
// "2MB", 1073741824 is "1GB" (binary units spelled as the cgroup files are).
func HugePageUnitSize(size int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	if size <= 0 {
		return "", fmt.Errorf("hugepage size %d: expected a positive number of bytes", size)
	}
	idx := 0
	for size%1024 == 0 && idx < len(units)-1 {
		size /= 1024
		idx++
	}
	if size > 1024 && idx < len(units)-1 {
		return "", fmt.Errorf("hugepage size %d%s: expected a size divisible into the largest unit", size, units[idx])
	}
	return fmt.Sprintf("%d%s", size, units[idx]), nil
}

// CgroupParent mirrors podContainerManagerImpl.GetPodContainerName
// (pkg/kubelet/cm/pod_container_manager_linux.go) followed by the cgroup
// manager's Name(): Guaranteed pods directly under kubepods, the others under
// kubepods/<qos>; cgroupfs spells it as a path, systemd as nested slices with
// the uid's dashes escaped to underscores.
func CgroupParent(pod *v1.Pod, driver CgroupDriver) (string, error) {
	parts := []string{"kubepods"}
	switch QOSClass(pod) {
	case v1.PodQOSBurstable:
		parts = append(parts, "burstable")
	case v1.PodQOSBestEffort:
		parts = append(parts, "besteffort")
	}
	parts = append(parts, "pod"+string(pod.UID))
	switch driver {
	case CgroupfsDriver, "":
		return "/" + strings.Join(parts, "/"), nil
	case SystemdDriver:
		// cgroupName.ToSystemd + libcontainer's ExpandSlice.
		var path, prefix string
		for _, p := range parts {
			p = strings.ReplaceAll(p, "-", "_")
			if prefix != "" {
				p = prefix + "-" + p
			}
			path += "/" + p + ".slice"
			prefix = p
		}
		return path, nil
	}
	return "", fmt.Errorf("cgroup driver %q: expected %q or %q", driver, CgroupfsDriver, SystemdDriver)
}

// SandboxResources mirrors calculateSandboxResources
// (pkg/kubelet/kuberuntime/kuberuntime_sandbox_linux.go): the CPU and memory
// of the whole pod, as the pod requests and limits of
// k8s.io/component-helpers/resource (PodRequests, PodLimits, without
// overhead): each resource's pod-level value where the pod sets one
// (KEP-2837), else the containers' aggregate.
func SandboxResources(pod *v1.Pod) LinuxContainerResources {
	req := AggregateContainerResources(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests })
	lim := AggregateContainerResources(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits })
	if HasPodLevelResources(pod) {
		for name, q := range pod.Spec.Resources.Requests {
			req[name] = q.DeepCopy()
		}
		for name, q := range pod.Spec.Resources.Limits {
			lim[name] = q.DeepCopy()
		}
	}
	var cpuRequest *resource.Quantity
	if q, ok := req[v1.ResourceCPU]; ok {
		cpuRequest = &q
	}
	return CalculateLinuxResources(cpuRequest, lim.Cpu(), lim.Memory())
}

// AggregateContainerResources mirrors AggregateContainerRequests and
// AggregateContainerLimits (k8s.io/component-helpers/resource/helpers.go):
// app containers and sidecars add up; each regular init container runs beside
// the sidecars started before it; the pod needs the larger of the two.
func AggregateContainerResources(pod *v1.Pod, of func(*v1.Container) v1.ResourceList) v1.ResourceList {
	total := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		addList(total, of(&pod.Spec.Containers[i]))
	}
	sidecars := v1.ResourceList{}
	initMax := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var effective v1.ResourceList
		if IsSidecar(pod, c) {
			addList(total, of(c))
			addList(sidecars, of(c))
			effective = sidecars
		} else {
			effective = v1.ResourceList{}
			addList(effective, of(c))
			addList(effective, sidecars)
		}
		maxList(initMax, effective)
	}
	maxList(total, initMax)
	return total
}

func addList(to, from v1.ResourceList) {
	for name, q := range from {
		sum := q.DeepCopy()
		if prev, ok := to[name]; ok {
			sum.Add(prev)
		}
		to[name] = sum
	}
}

func maxList(to, from v1.ResourceList) {
	for name, q := range from {
		if prev, ok := to[name]; !ok || q.Cmp(prev) > 0 {
			to[name] = q.DeepCopy()
		}
	}
}
