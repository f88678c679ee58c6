package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

// A shared container created, but not started, when a Guaranteed one is
// granted CPUs misses the update that takes them from it (containerd drops
// it); the plugin pushes its placement again once it started.
func TestUpdateLostBeforeStartIsReapplied(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{
		runtime: []harness.Option{harness.WithDroppedUpdatesUntilStart()},
	})
	besteffort := n.rt.NewPod(t, pod(t, "besteffort.yaml"))
	require.NoError(t, n.rt.RunPodSandbox(besteffort))
	idle := besteffort.Container("idle")
	require.NoError(t, n.rt.CreateContainer(idle))
	assert.Equal(t, n.shared().String(), cpus(t, idle).String())

	grant := cpus(t, n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml")).Container("app"))
	require.Equal(t, 2, grant.Size())
	require.Positive(t, idle.DroppedUpdates(), "the runtime dropped the update of the created container")
	require.Equal(t, n.shared().String(), cpus(t, idle).String(), "the dropped update left it on the whole pool")

	require.NoError(t, n.rt.StartContainer(idle))
	want := n.shared(grant).String()
	require.Eventually(t, func() bool { return idle.Spec().CPUs() == want }, 10*time.Second, 10*time.Millisecond,
		"idle ends up on the shared pool without the grant %s", grant)
	assert.Equal(t, n.nodesOf(n.shared(grant)).String(), mems(t, idle).String())
	// The plugin counts and logs the update once the runtime answered it,
	// which can be after the runtime applied it.
	require.Eventually(t, func() bool {
		return strings.Contains(n.scrape(t), `nri_suite_topology_aware_reapplied_updates_total{outcome="applied"} 1`)
	}, 10*time.Second, 10*time.Millisecond, "the re-applied update is counted")
	assert.Contains(t, n.plugin.Log(), "re-applied the placement of a container")

	// A container started with nothing lost gets no second update.
	web := n.rt.RunPod(t, pod(t, "burstable.yaml")).Container("web")
	assert.Equal(t, want, cpus(t, web).String())
	assert.Empty(t, web.Updates())
	assert.Contains(t, n.scrape(t), `nri_suite_topology_aware_reapplied_updates_total{outcome="applied"} 1`)
}
