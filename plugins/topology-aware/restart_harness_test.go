package main_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// savedPlacements returns the placements in the checkpoint in stateDir, by
// container id.
func savedPlacements(t *testing.T, stateDir string) map[string]policy.Placement {
	t.Helper()
	out := map[string]policy.Placement{}
	saved, _ := loadCheckpoint(t, stateDir)
	for _, c := range saved.Containers {
		out[c.Placement.ContainerID] = c.Placement
	}
	return out
}

// savedPlacement waits, bounded, until the checkpoint in stateDir holds a
// placement of the container, which the writer behind the handlers saves,
// and returns it.
func savedPlacement(t *testing.T, stateDir string, c *harness.Container) policy.Placement {
	t.Helper()
	var pl policy.Placement
	require.Eventually(t, func() bool {
		var ok bool
		pl, ok = savedPlacements(t, stateDir)[c.ID()]
		return ok
	}, 10*time.Second, 5*time.Millisecond, "%s/%s is in the checkpoint", c.Pod.Name(), c.Name())
	return pl
}

// requireConsistent checks what must hold once the plugin has synchronized
// and its writer caught up (waited for, bounded): the checkpoint holds every
// container exactly as the runtime runs it, and, as the runtime runs them,
// exclusive grants are disjoint and shared containers run on the CPUs no
// grant holds.
func (n *node) requireConsistent(t *testing.T, ctrs []*harness.Container) {
	t.Helper()
	var saved map[string]policy.Placement
	require.Eventually(t, func() bool {
		saved = savedPlacements(t, n.stateDir)
		if len(saved) != len(ctrs) {
			return false
		}
		for _, c := range ctrs {
			if pl, ok := saved[c.ID()]; !ok || pl.CPUs.String() != c.Spec().CPUs() {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the checkpoint holds the live containers where they run")
	var granted cpuset.CPUSet
	var shared []*harness.Container
	for _, c := range ctrs {
		pl, ok := saved[c.ID()]
		require.True(t, ok, "%s/%s is in the checkpoint", c.Pod.Name(), c.Name())
		assert.Equal(t, pl.CPUs.String(), c.Spec().CPUs(), "%s/%s: the checkpoint's cpus are the runtime's", c.Pod.Name(), c.Name())
		assert.Equal(t, pl.Mems.String(), c.Spec().Mems(), "%s/%s: the checkpoint's mems are the runtime's", c.Pod.Name(), c.Name())
		switch pl.Pool {
		case policy.PoolExclusive, policy.PoolIsolated:
			set := cpus(t, c)
			require.True(t, granted.Intersection(set).IsEmpty(), "%s/%s: grant %s overlaps another", c.Pod.Name(), c.Name(), set)
			granted = granted.Union(set)
		case policy.PoolShared:
			shared = append(shared, c)
		}
	}
	for _, c := range shared {
		assert.Equal(t, n.shared(granted).String(), c.Spec().CPUs(), "%s/%s runs on the shared pool, without the grants", c.Pod.Name(), c.Name())
	}
}

// TestLostSynchronizeReplyIsSentAgain: a container created while the plugin
// was down gets its grant in the Synchronize at the plugin's start, which
// is also checkpointed; the reply never reaches the runtime (it came after
// NRI's deadline). The next Synchronize, of the same process or of a new
// one reading the checkpoint, sends the grant again: a checkpointed
// placement is not one the runtime applied.
func TestLostSynchronizeReplyIsSentAgain(t *testing.T) {
	for _, next := range []string{"the same process reconnects", "a new process restores the checkpoint"} {
		t.Run(next, func(t *testing.T) {
			n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
			idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
			n.plugin.Kill(t)
			app := n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml")).Container("app")
			require.Empty(t, app.Spec().CPUs(), "created while the plugin was down: on every CPU")

			n.rt.LoseSyncReplies(1)
			n.plugin.Restart(t)
			require.Empty(t, app.Spec().CPUs(), "the runtime never got the update")
			var grant policy.Placement
			if next == "the same process reconnects" {
				n.plugin.WaitSynchronized(t)
				grant = savedPlacement(t, n.stateDir, app)
			} else {
				n.rt.Stop() // so that the plugin cannot reconnect before it is killed
				grant = savedPlacement(t, n.stateDir, app)
				require.Empty(t, app.Spec().CPUs(), "the runtime never got the update")
				n.plugin.Kill(t)
				n.rt.Start(t)
				n.plugin.Restart(t)
			}
			require.Equal(t, policy.PoolExclusive, grant.Pool, "the plugin placed it and checkpointed that")
			require.Equal(t, 2, grant.CPUs.Size())
			assert.Equal(t, grant.CPUs.String(), app.Spec().CPUs(), "the grant is sent again")
			assert.Equal(t, grant.Mems.String(), app.Spec().Mems())
			n.requireConsistent(t, []*harness.Container{idle, app})
		})
	}
}

// TestUnplaceableContainersAreConfined: four 2-CPU Guaranteed pods created
// while the plugin was down, on the 12-CPU node where a 4-CPU grant and a
// shared container run: two fit. The two others are confined to the shared
// pool instead of running on every CPU over the grants, published as
// unplaced (record, metric, log line), and placed at a later Synchronize
// once CPUs are free.
func TestUnplaceableContainersAreConfined(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	ctrs := []*harness.Container{
		n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle"),
		n.rt.RunPod(t, pod(t, "guaranteed-4cpu.yaml")).Container("app"),
	}
	n.plugin.Kill(t)
	var late []*harness.Pod
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		p := n.rt.RunPod(t, guaranteedPod(t, name, "2", nil))
		require.Empty(t, p.Container("app").Spec().CPUs(), "created while the plugin was down: on every CPU")
		late = append(late, p)
		ctrs = append(ctrs, p.Container("app"))
	}
	n.plugin.Restart(t)
	n.requireConsistent(t, ctrs)

	recs, err := state.PlacementRecords(n.rt.SharedDir())
	require.NoError(t, err)
	saved := savedPlacements(t, n.stateDir)
	var placed, unplaced []*harness.Pod
	for _, p := range late {
		pl := saved[p.Container("app").ID()]
		if !pl.Unplaced {
			require.Equal(t, policy.PoolExclusive, pl.Pool)
			placed = append(placed, p)
			continue
		}
		unplaced = append(unplaced, p)
		assert.Equal(t, policy.PoolShared, pl.Pool)
		require.Eventually(t, func() bool {
			rec, found, err := recs.Read(p.Container("app").ID())
			return err == nil && found && rec.Unplaced && rec.Pool == "shared" && rec.PoolRecord == state.SharedPoolRecord
		}, 10*time.Second, 10*time.Millisecond, "%s is published as unplaced", p.Name())
	}
	require.Len(t, placed, 2)
	require.Len(t, unplaced, 2)
	assert.Contains(t, n.scrape(t), "nri_suite_topology_aware_unplaced_containers 2")
	assert.Equal(t, 2, strings.Count(n.plugin.Log(), "could not place container after a restart; confined to the shared pool and published as unplaced"))

	n.rt.RemovePod(t, placed[0])
	ctrs = slices.DeleteFunc(ctrs, func(c *harness.Container) bool { return c.Pod == placed[0] })
	n.rt.Restart(t)
	n.plugin.WaitSynchronized(t)
	n.requireConsistent(t, ctrs)
	saved = savedPlacements(t, n.stateDir)
	var still int
	for _, p := range unplaced {
		if saved[p.Container("app").ID()].Unplaced {
			still++
		}
	}
	assert.Equal(t, 1, still, "the freed CPUs place one of them")
	assert.Contains(t, n.scrape(t), "nri_suite_topology_aware_unplaced_containers 1")
}

// TestSynchronizeUpdateLostBeforeStartIsReapplied: a container created, not
// started, while the plugin was down gets its grant in the plugin's first
// Synchronize, which the runtime loses as containerd can before a start; the
// plugin pushes it again once the container started.
func TestSynchronizeUpdateLostBeforeStartIsReapplied(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{
		runtime: []harness.Option{harness.WithDroppedUpdatesUntilStart()},
	})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	n.plugin.Kill(t)
	p := n.rt.NewPod(t, pod(t, "guaranteed-2cpu.yaml"))
	require.NoError(t, n.rt.RunPodSandbox(p))
	app := p.Container("app")
	require.NoError(t, n.rt.CreateContainer(app))

	n.plugin.Restart(t)
	require.Positive(t, app.DroppedUpdates(), "the runtime lost the Synchronize's update of the created container")
	require.Empty(t, app.Spec().CPUs())
	grant := savedPlacement(t, n.stateDir, app)
	require.Equal(t, policy.PoolExclusive, grant.Pool)

	require.NoError(t, n.rt.StartContainer(app))
	require.Eventually(t, func() bool { return app.Spec().CPUs() == grant.CPUs.String() }, 10*time.Second, 10*time.Millisecond,
		"the grant %s is pushed again after the start", grant.CPUs)
	n.requireConsistent(t, []*harness.Container{idle, app})
	assert.Contains(t, n.plugin.Log(), "an update before its start may have been lost")
}
