package policy

// Pods with pod-level resources (KEP-2837). The runtime never shows a pod's
// spec, only what the kubelet derives from it: the sandbox's resources are
// the pod's (pod-level where set), and a container that sets no CPU or
// memory limit of its own gets the pod's, its cpu shares then following the
// pod's CPU limit too. So a container without resources of its own in a
// Guaranteed pod with pod-level resources reads exactly as one requesting
// the whole pod, as the only container of a Guaranteed pod without them
// does. The kubelet 1.37 (KEP-5526) gives the first no exclusive CPUs (the
// shared pool, or under the pod scope the pod's shared pool) and the second
// its exclusive CPUs. A pod shows that it has pod-level resources when:
//
//   - a container of it is Guaranteed by its pod only: no CPU request of its
//     own (the minimum shares), or a CPU limit other than its request; or
//   - its containers request more CPUs together than the pod when one of
//     them is created: a container requesting the whole pod beside another
//     one. Only at a creation: a resize changes a container's resources but
//     the runtime may still show the sandbox's old sums.
//
// Until then a container requesting the whole pod is taken for the only
// container of a pod without pod-level resources and gets its exclusive CPUs
// (under the pod scope, all of the pod's). From then on it is not one: the
// pod's containers requesting the whole pod are placed again, on the shared
// pool or the pod's, in the same call.

import (
	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// wholePod reports whether a Guaranteed container requests its whole pod:
// its pod's CPUs and, where known, its pod's memory.
func wholePod(req Request) bool {
	return req.QOS == k8s.QOSGuaranteed && req.PodCPURequest > 0 && req.CPURequest == req.PodCPURequest &&
		(req.PodMemory == 0 || req.Memory == req.PodMemory)
}

// guaranteedByPod reports whether a container of a Guaranteed pod is not
// Guaranteed on its own, which only pod-level resources allow.
func guaranteedByPod(req Request) bool {
	return req.QOS == k8s.QOSGuaranteed && (req.CPURequest == 0 || req.CPULimit != 0 && req.CPULimit != req.CPURequest)
}

// hasPodLevelResources reports whether req's pod has shown, or with req
// shows, that it has pod-level resources. req must not be placed.
func (p *Policy) hasPodLevelResources(req Request) bool {
	if guaranteedByPod(req) {
		return true
	}
	pod := p.pods[req.PodUID]
	if pod == nil {
		return false
	}
	return pod.podLevel || req.ContainerID == p.creating && overPod(req, pod.cpuRequests+req.CPURequest)
}

// overPod reports whether a pod's containers request more CPUs together
// (sum) than its sandbox says the pod does.
func overPod(req Request, sum int64) bool {
	return req.PodCPURequest > 0 && sum > req.PodCPURequest
}

// settlePodLevel records that the pod of a container just placed has
// pod-level resources when it shows it, and then places its containers that
// request the whole pod, which were taken for the pod's only one, again.
// It returns their new placements. A container that cannot be placed again
// keeps its placement.
func (p *Policy) settlePodLevel(placed Request) []Placement {
	pod := p.pods[placed.PodUID]
	if pod == nil || pod.podLevel || !guaranteedByPod(placed) && !(placed.ContainerID == p.creating && overPod(placed, pod.cpuRequests)) {
		return nil
	}
	pod.podLevel = true
	var moved []Placement
	for _, id := range p.sortedIDs() {
		old := p.containers[id]
		if old.pl.PodUID != placed.PodUID || id == placed.ContainerID || old.pl.Pool != PoolExclusive || !wholePod(old.req) {
			continue
		}
		p.unassign(old)
		e, err := p.place(old.req, cpuset.CPUSet{})
		if err != nil {
			p.assign(old)
			continue
		}
		e.pl.Reason += " (its pod showed that it has pod-level resources: it reads as requesting the whole pod because it has no resources of its own)"
		p.assign(e)
		moved = append(moved, clonePlacement(e.pl))
	}
	return moved
}
