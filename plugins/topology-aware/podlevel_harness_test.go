package main_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPodLevelResources runs a Guaranteed pod with pod-level resources
// (KEP-2837) through the real plugin: its sandbox carries the pod's 4 CPUs
// and 2Gi, its app asks 2 CPUs of its own, and its sidecar and helper have
// no resources of their own, which the kubelet 1.37 (KEP-5526) places on the
// shared pool under the Topology Manager's container scope and on the pod's
// shared pool (the pod's CPUs its app does not hold) under the pod scope.
// The sidecar starts first and reads as requesting the whole pod: it is
// moved when the app shows that the pod has pod-level resources.
func TestPodLevelResources(t *testing.T) {
	t.Run("container scope", func(t *testing.T) {
		n := startNode(t, "snc-2s-4n-80c", nodeOptions{})
		p := n.rt.RunPod(t, pod(t, "pod-level.yaml"))
		app, log, helper := p.Container("app"), p.Container("log"), p.Container("helper")
		grant := cpus(t, app)
		assert.Equal(t, 2, grant.Size())
		n.requireWholeCores(t, grant)
		assert.Equal(t, 1, n.nodesOf(grant).Size(), "%s", grant)
		for _, c := range []string{"log", "helper"} {
			ctr := p.Container(c)
			assert.Equal(t, n.shared(grant).String(), cpus(t, ctr).String(), "%s runs on the shared pool", c)
			assert.Equal(t, n.nodesOf(n.shared(grant)).String(), mems(t, ctr).String(), c)
		}
		assert.NotEmpty(t, log.Updates(), "the sidecar was moved off the CPUs it had first")
		assert.Contains(t, n.plugin.Log(), "its pod showed that it has pod-level resources")
		n.rt.RemovePod(t, p)
		assert.Equal(t, n.shared().String(), cpus(t, helper).String())
	})
	t.Run("pod scope", func(t *testing.T) {
		n := startNode(t, "snc-2s-4n-80c", nodeOptions{config: "topology-policy: single-numa-node\ntopology-scope: pod\n"})
		p := n.rt.RunPod(t, pod(t, "pod-level.yaml"))
		app, log, helper := p.Container("app"), p.Container("log"), p.Container("helper")
		grant := cpus(t, app)
		assert.Equal(t, 2, grant.Size())
		podShared := cpus(t, log)
		assert.Equal(t, 2, podShared.Size(), "the pod's 4 CPUs less the app's: %s", podShared)
		assert.True(t, podShared.Intersection(grant).IsEmpty())
		assert.Equal(t, podShared.String(), cpus(t, helper).String(), "the pod's shared pool")
		all := grant.Union(podShared)
		require.Equal(t, 1, n.nodesOf(all).Size(), "the whole pod on one NUMA node: %s", all)
		for _, c := range []string{"app", "log", "helper"} {
			assert.Equal(t, n.nodesOf(all).String(), mems(t, p.Container(c)).String(), "%s: the pod's memory node", c)
		}
		assert.Equal(t, n.shared(all).String(), cpus(t, n.rt.RunPod(t, pod(t, "burstable.yaml")).Container("web")).String(),
			"the pod's CPUs are out of the node's shared pool")
	})
}
