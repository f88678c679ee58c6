package nriplugin

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

// publishedRecords reads back what the plugin published.
func publishedRecords(t *testing.T, shared string) (map[string]state.PlacementRecord, map[string]state.PoolRecord) {
	t.Helper()
	placements, err := state.PlacementRecords(shared)
	require.NoError(t, err)
	pools, err := state.PoolRecords(shared)
	require.NoError(t, err)
	recs, err := placements.List()
	require.NoError(t, err)
	poolRecs, err := pools.List()
	require.NoError(t, err)
	return recs, poolRecs
}

// inode identifies a file's current version: a record is replaced by a
// rename, so a rewritten record has a new inode.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	st, ok := info.Sys().(*syscall.Stat_t)
	require.True(t, ok, "stat of %s", path)
	return st.Ino
}

func TestRecordsResolveToWhatContainersRun(t *testing.T) {
	p := newTestPlugin(t, "snc-2s-4n-80c", nil)
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	var sharedIDs []string
	for _, f := range [][2]string{{"besteffort.yaml", "idle"}, {"burstable.yaml", "web"}, {"guaranteed-fractional.yaml", "app"}} {
		id, err := v.create(t, p.Plugin, f[0], f[1])
		require.NoError(t, err)
		sharedIDs = append(sharedIDs, id)
	}
	require.NoError(t, p.persist.Flush())
	recs, _ := publishedRecords(t, p.shared)
	require.Len(t, recs, len(sharedIDs))
	dir := filepath.Join(p.shared, state.PlacementKind)
	before := map[string]uint64{}
	for _, id := range sharedIDs {
		before[id] = inode(t, filepath.Join(dir, id+".json"))
	}
	poolBefore := inode(t, filepath.Join(p.shared, state.PoolRecordKind, state.SharedPoolRecord+".json"))

	app, err := v.create(t, p.Plugin, "guaranteed-2cpu.yaml", "app")
	require.NoError(t, err)
	require.NoError(t, p.persist.Flush())
	recs, pools := publishedRecords(t, p.shared)
	require.Len(t, recs, len(sharedIDs)+1)
	for id, rec := range recs {
		cpus, mems, err := rec.Resolve(pools)
		require.NoError(t, err)
		assert.Equal(t, v.cpus(t, id).String(), cpus, "%s resolves to the cpus it runs on", id)
		assert.Equal(t, v.ctrs[id].GetLinux().GetResources().GetCpu().GetMems(), mems, "%s resolves to its mems", id)
	}
	assert.Equal(t, "exclusive", recs[app].Pool)
	assert.NotEmpty(t, recs[app].CPUs, "a grant's record has its own cpusets")
	for _, id := range sharedIDs {
		assert.Equal(t, state.SharedPoolRecord, recs[id].PoolRecord)
		assert.Empty(t, recs[id].CPUs, "a shared container's cpusets are the pool's")
		assert.Equal(t, before[id], inode(t, filepath.Join(dir, id+".json")), "the grant did not rewrite %s's record", id)
	}
	assert.NotEqual(t, poolBefore, inode(t, filepath.Join(p.shared, state.PoolRecordKind, state.SharedPoolRecord+".json")), "the grant rewrote the pool's record")
}

func TestOutdatedRecordsAreReplaced(t *testing.T) {
	env := newPersisterEnv(t)
	// A record of schema version 1, as the plugin published before pool records.
	v1, err := state.NewRecords[state.PlacementRecord](filepath.Dir(env.recs.Dir()), state.PlacementKind, 1)
	require.NoError(t, err)
	require.NoError(t, v1.Publish("a", state.PlacementRecord{ContainerID: "a", Pool: "shared", CPUs: "0-7"}))
	_, _, err = env.recs.Read("a")
	require.ErrorIs(t, err, state.ErrCorrupt, "a version 1 record is not read as version 2")

	s := env.start(t)
	env.state.set("a")
	s.Changed()
	require.NoError(t, s.Flush())
	env.requireOnDisk(t, "a")
}
