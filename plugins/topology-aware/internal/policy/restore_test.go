package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// A placement counts as applied only when the runtime shows it: a
// checkpointed container the runtime reports elsewhere, or on no cpuset at
// all (its update never arrived), gets its placement again; one that runs
// where it was placed gets nothing.
func TestRestoreResendsWhatTheRuntimeDoesNotShow(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved")
	before := newPolicy(t, inter, Config{})
	_, _, err := before.Allocate(burstable("shared", 100))
	require.NoError(t, err)
	grant, _, err := before.Allocate(guaranteed("grant", 2000, gib))
	require.NoError(t, err)
	shared, _ := before.Placement("shared")
	saved := before.Snapshot()

	tests := []struct {
		name          string
		cpus, mems    cpuset.CPUSet // what the runtime shows of the grant
		sharedUpdated bool
		want          []string // updated containers
	}{
		{name: "both as placed", cpus: grant.CPUs, mems: grant.Mems},
		{name: "the grant's update never arrived: no cpuset", want: []string{"grant"}},
		{name: "its cpus without its mems", cpus: grant.CPUs, want: []string{"grant"}},
		{name: "its mems without its cpus", mems: grant.Mems, want: []string{"grant"}},
		{name: "the shared pool before the grant", cpus: grant.CPUs, mems: grant.Mems, sharedUpdated: true, want: []string{"shared"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sharedCPUs := shared.CPUs
			if tc.sharedUpdated {
				sharedCPUs = inter.CPUs().Difference(inter.Isolated())
			}
			p := newPolicy(t, inter, Config{})
			report := p.Restore(saved, []Running{
				{Request: guaranteed("grant", 2000, gib), CPUs: tc.cpus, Mems: tc.mems},
				{Request: burstable("shared", 100), CPUs: sharedCPUs, Mems: shared.Mems},
			})
			assert.Equal(t, []string{"grant", "shared"}, report.Kept, "the checkpoint holds: nothing moves")
			var updated []string
			for _, u := range report.Updates {
				updated = append(updated, u.ContainerID)
				want, _ := p.Placement(u.ContainerID)
				assert.Equal(t, want, u, "the update carries the placement")
			}
			assert.Equal(t, tc.want, updated)
			kept, _ := p.Placement("grant")
			assert.Equal(t, grant.CPUs, kept.CPUs)
			require.NoError(t, p.Check())
		})
	}
}

// Containers that can be neither kept, adopted nor placed at a restore (four
// 2-CPU Guaranteed containers created while the plugin was down, on a node
// where two fit) are confined to the shared pool, marked unplaced, and
// updated there; a later restore places them when CPUs are free again.
func TestRestoreConfinesWhatCannotBePlaced(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved")
	before := newPolicy(t, inter, Config{})
	_, _, err := before.Allocate(burstable("idle", 100))
	require.NoError(t, err)
	big, _, err := before.Allocate(guaranteed("big", 4000, gib))
	require.NoError(t, err)
	idle, _ := before.Placement("idle")
	running := []Running{
		{Request: burstable("idle", 100), CPUs: idle.CPUs, Mems: idle.Mems},
		{Request: guaranteed("big", 4000, gib), CPUs: big.CPUs, Mems: big.Mems},
	}
	for _, id := range []string{"p0", "p1", "p2", "p3"} { // on no cpuset: every CPU
		running = append(running, Running{Request: guaranteed(id, 2000, gib)})
	}

	p := newPolicy(t, inter, Config{})
	report := p.Restore(before.Snapshot(), running)
	require.NoError(t, p.Check())
	var placed, unplaced []string
	grants := big.CPUs
	for _, pl := range report.Replaced {
		now, ok := p.Placement(pl.ContainerID)
		require.True(t, ok, "%s is in the state", pl.ContainerID)
		assert.Equal(t, now.Unplaced, pl.Unplaced)
		if !pl.Unplaced {
			placed = append(placed, pl.ContainerID)
			assert.True(t, grants.Intersection(pl.CPUs).IsEmpty(), "%s's grant %s overlaps another", pl.ContainerID, pl.CPUs)
			grants = grants.Union(pl.CPUs)
			continue
		}
		unplaced = append(unplaced, pl.ContainerID)
		assert.Equal(t, PoolShared, pl.Pool)
		assert.Equal(t, p.SharedCPUs(), pl.CPUs, "%s is confined to the shared pool", pl.ContainerID)
		assert.Contains(t, pl.Reason, "cannot be placed: insufficient CPUs")
		assert.Contains(t, pl.Reason, "confined to the shared pool")
	}
	assert.Equal(t, []string{"p0", "p1"}, placed)
	assert.Equal(t, []string{"p2", "p3"}, unplaced)
	assert.True(t, p.SharedCPUs().Intersection(grants).IsEmpty())
	var updated []string
	for _, u := range report.Updates {
		updated = append(updated, u.ContainerID)
	}
	assert.ElementsMatch(t, []string{"idle", "p0", "p1", "p2", "p3"}, updated, "all of them run elsewhere than placed")

	// p0 goes; at the next restore p2 gets its grant, p3 stays confined.
	p.Release("p0")
	var now []Running
	for _, r := range running {
		if pl, ok := p.Placement(r.Request.ContainerID); ok {
			now = append(now, Running{Request: r.Request, CPUs: pl.CPUs, Mems: pl.Mems})
		}
	}
	report = p.Restore(p.Snapshot(), now)
	require.NoError(t, p.Check())
	p2, _ := p.Placement("p2")
	p3, _ := p.Placement("p3")
	assert.Equal(t, PoolExclusive, p2.Pool)
	assert.False(t, p2.Unplaced)
	assert.True(t, p3.Unplaced)
	assert.Equal(t, p.SharedCPUs(), p3.CPUs)
}

// A restore does not let a grant made anew take the last shared CPU while
// other containers wait to be placed: those that fail go there.
func TestRestoreKeepsASharedPoolForWhatItCannotPlace(t *testing.T) {
	small := fixture(t, "smt-1s-8c")
	before := newPolicy(t, small, Config{})
	held, _, err := before.Allocate(guaranteed("held", 6000, gib))
	require.NoError(t, err)
	running := []Running{
		{Request: guaranteed("held", 6000, gib), CPUs: held.CPUs, Mems: held.Mems},
		{Request: guaranteed("a", 2000, gib)},
		{Request: guaranteed("b", 2000, gib)},
	}
	p := newPolicy(t, small, Config{})
	report := p.Restore(before.Snapshot(), running)
	require.NoError(t, p.Check())
	require.Len(t, report.Replaced, 2)
	for _, pl := range report.Replaced {
		assert.True(t, pl.Unplaced, "%s: one grant would leave the other on no CPU", pl.ContainerID)
		assert.Equal(t, small.CPUs().Difference(held.CPUs), pl.CPUs)
	}

	// With every CPU held, what cannot be placed cannot be confined.
	before = newPolicy(t, small, Config{})
	held, _, err = before.Allocate(guaranteed("held", 8000, gib))
	require.NoError(t, err)
	p = newPolicy(t, small, Config{})
	report = p.Restore(before.Snapshot(), []Running{
		{Request: guaranteed("held", 8000, gib), CPUs: held.CPUs, Mems: held.Mems},
		{Request: guaranteed("a", 2000, gib)},
	})
	require.NoError(t, p.Check())
	require.Len(t, report.Replaced, 1)
	assert.True(t, report.Replaced[0].Unplaced)
	assert.True(t, report.Replaced[0].CPUs.IsEmpty())
	assert.Contains(t, report.Replaced[0].Reason, "cannot be confined either")
	_, inState := p.Placement("a")
	assert.False(t, inState)
}

// A checkpoint written behind the handlers can be older than what the
// runtime runs: a container resized after the last write runs, consistently,
// on more CPUs than the checkpoint records. It is adopted where it runs, not
// placed anew, so a checkpoint behind the runtime moves nothing.
func TestRestoreAdoptsWhatTheCheckpointRecordsElsewhere(t *testing.T) {
	inter := fixture(t, "smt-2s-12c-interleaved")
	before := newPolicy(t, inter, Config{})
	_, _, err := before.Allocate(burstable("shared", 100))
	require.NoError(t, err)
	_, _, err = before.Allocate(guaranteed("grant", 2000, gib))
	require.NoError(t, err)
	saved := before.Snapshot() // the last write, before the resize
	grown, _, err := before.Resize(guaranteed("grant", 4000, gib))
	require.NoError(t, err)
	shared, _ := before.Placement("shared")

	p := newPolicy(t, inter, Config{})
	report := p.Restore(saved, []Running{
		{Request: guaranteed("grant", 4000, gib), CPUs: grown.CPUs, Mems: grown.Mems},
		{Request: burstable("shared", 100), CPUs: shared.CPUs, Mems: shared.Mems},
	})
	assert.Equal(t, []string{"shared"}, report.Kept)
	assert.Equal(t, []string{"grant"}, report.Adopted, "adopted where it runs")
	assert.Empty(t, report.Replaced)
	assert.Empty(t, report.Updates, "nothing moves")
	got, _ := p.Placement("grant")
	assert.Equal(t, grown.CPUs, got.CPUs)
	require.NoError(t, p.Check())
}
