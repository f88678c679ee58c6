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
