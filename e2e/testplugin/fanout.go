package main

import (
	"github.com/containerd/nri/pkg/api"
)

// FanoutAnnotation, on a pod, makes the creation of its containers update
// every other live container's cpuset.cpus to the annotation's value: the
// least a plugin does when a new exclusive grant shrinks the shared pool
// (topology-aware's case). Benchmarks use it to measure what NRI and the
// runtime cost for such a call whatever the plugin's own work.
const FanoutAnnotation = "fanout.e2e.nri-suite.io/cpus"

// liveSet tracks the containers that a fan-out updates: those the runtime
// synchronized or created and has not removed.
type liveSet map[string]struct{}

// fanout returns the updates the creation of ctr in pod makes.
func (l liveSet) fanout(pod *api.PodSandbox, ctr *api.Container) []*api.ContainerUpdate {
	cpus, ok := pod.GetAnnotations()[FanoutAnnotation]
	if !ok {
		return nil
	}
	updates := make([]*api.ContainerUpdate, 0, len(l))
	for id := range l {
		if id == ctr.GetId() {
			continue
		}
		u := &api.ContainerUpdate{}
		u.SetContainerId(id)
		u.SetLinuxCPUSetCPUs(cpus)
		updates = append(updates, u)
	}
	return updates
}
