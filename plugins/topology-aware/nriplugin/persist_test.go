package nriplugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// fakeState is a policy state the persister collects, changed by the test.
type fakeState struct {
	mu        sync.Mutex
	snap      policy.Snapshot
	collected int
	savedTo   []string // the checkpoints the persister said it saved
}

func (f *fakeState) saved(cp *state.Checkpoint[Saved]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.savedTo = append(f.savedTo, cp.Path())
}

func (f *fakeState) set(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = policy.Snapshot{}
	for i, id := range ids {
		f.snap.Containers = append(f.snap.Containers, policy.SavedContainer{
			Request:   policy.Request{ContainerID: id, Namespace: "default", Pod: "pod-" + id, Container: "c"},
			Placement: policy.Placement{ContainerID: id, Pool: policy.PoolExclusive, CPUs: cpuset.New(i), Mems: cpuset.New(0), NUMANodes: []int{0}},
		})
	}
}

func (f *fakeState) collect() (persistedState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.collected++
	return persistedState{
		saved: Saved{Snapshot: f.snap},
		pools: map[string]state.PoolRecord{state.SharedPoolRecord: {Pool: "shared", CPUs: "8-15", Mems: "0", MemsWithCPULess: "0,2"}},
	}, true
}

type persisterEnv struct {
	cp    *state.Checkpoint[Saved]
	pools *state.Records[state.PoolRecord]
	recs  *state.Records[state.PlacementRecord]
	state *fakeState
}

func newPersisterEnv(t *testing.T) persisterEnv {
	t.Helper()
	cp, err := state.NewCheckpoint[Saved](filepath.Join(t.TempDir(), CheckpointFile), CheckpointVersion)
	require.NoError(t, err)
	shared := t.TempDir()
	pools, err := state.PoolRecords(shared)
	require.NoError(t, err)
	recs, err := state.PlacementRecords(shared)
	require.NoError(t, err)
	return persisterEnv{cp: cp, pools: pools, recs: recs, state: &fakeState{}}
}

func (e persisterEnv) start(t *testing.T) *persister {
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	s := newPersister(e.cp, e.pools, e.recs, e.state.collect, e.state.saved, logrus.NewEntry(logger), newMetrics("test"))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e persisterEnv) requireOnDisk(t *testing.T, ids ...string) {
	t.Helper()
	saved, found, err := e.cp.Load()
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, e.state.snap, saved.Snapshot, "the checkpoint equals the live state")
	keys, err := e.recs.Keys()
	require.NoError(t, err)
	assert.ElementsMatch(t, ids, keys)
	for i, id := range ids {
		rec, found, err := e.recs.Read(id)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, cpuset.New(i).String(), rec.CPUs)
		assert.Equal(t, "pod-"+id, rec.Pod)
	}
	pool, found, err := e.pools.Read(state.SharedPoolRecord)
	require.NoError(t, err)
	require.True(t, found, "the shared pool's record")
	assert.Equal(t, "8-15", pool.CPUs)
}

func TestPersisterWritesCheckpointAndRecords(t *testing.T) {
	env := newPersisterEnv(t)
	s := env.start(t)

	env.state.set("a", "b", "c")
	s.Changed()
	require.NoError(t, s.Flush())
	env.requireOnDisk(t, "a", "b", "c")

	// b is gone, d is new, c moved to CPU 1 (the index in set).
	env.state.set("a", "c", "d")
	s.Changed()
	require.NoError(t, s.Flush())
	env.requireOnDisk(t, "a", "c", "d")
}

func TestPersisterFlushWithoutChangesWritesNothing(t *testing.T) {
	env := newPersisterEnv(t)
	s := env.start(t)
	require.NoError(t, s.Flush())
	_, found, err := env.cp.Load()
	require.NoError(t, err)
	assert.False(t, found)
	assert.Zero(t, env.state.collected)
}

func TestPersisterCoalescesChanges(t *testing.T) {
	env := newPersisterEnv(t)
	s := env.start(t)
	const changes = 200
	for i := range changes {
		env.state.set(fmt.Sprintf("c%03d", i))
		s.Changed()
	}
	require.NoError(t, s.Flush())
	env.requireOnDisk(t, fmt.Sprintf("c%03d", changes-1))
	assert.Less(t, env.state.collected, changes, "changes that arrive during a write share the next one")
}

func TestPersisterReplacesWhatAnEarlierProcessLeft(t *testing.T) {
	env := newPersisterEnv(t)
	// From before a restart: a dead container's record, one of an older
	// schema, and files that are no records, one in a wanted record's place.
	require.NoError(t, env.recs.Publish("gone", state.PlacementRecord{ContainerID: "gone"}))
	older, err := state.NewRecords[state.PlacementRecord](filepath.Dir(env.recs.Dir()), state.PlacementKind, state.PlacementVersion-1)
	require.NoError(t, err)
	require.NoError(t, older.Publish("older", state.PlacementRecord{ContainerID: "older"}))
	require.NoError(t, os.WriteFile(filepath.Join(env.recs.Dir(), "a.json"), []byte("{"), 0o644))
	notes := filepath.Join(env.recs.Dir(), "notes.json")
	require.NoError(t, os.WriteFile(notes, []byte("{"), 0o644))

	s := env.start(t)
	env.state.set("a", "b")
	s.Changed()
	require.NoError(t, s.Flush(), "a file that is no record is left, not retried")
	data, err := os.ReadFile(notes)
	require.NoError(t, err, "nothing removes what state did not write")
	assert.Equal(t, "{", string(data))
	require.NoError(t, os.Remove(notes))
	env.requireOnDisk(t, "a", "b")
}

func TestPersisterReportsAndRetriesFailedWrites(t *testing.T) {
	env := newPersisterEnv(t)
	// A file where the checkpoint's directory should be: every save fails.
	blocker := filepath.Join(t.TempDir(), "blocker")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	cp, err := state.NewCheckpoint[Saved](filepath.Join(blocker, CheckpointFile), CheckpointVersion)
	require.NoError(t, err)
	env.cp = cp
	s := env.start(t)

	env.state.set("a")
	s.Changed()
	err = s.Flush()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "blocker")

	// Once the cause is gone, the writer's own retry catches up.
	require.NoError(t, os.Remove(blocker))
	require.Eventually(t, func() bool {
		_, found, err := cp.Load()
		return err == nil && found
	}, retryDelay*20, retryDelay/10)
	require.NoError(t, s.Flush())
}

func TestPersisterCloseFlushesAndRefusesLaterFlushes(t *testing.T) {
	env := newPersisterEnv(t)
	s := env.start(t)
	env.state.set("a")
	s.Changed()
	require.NoError(t, s.Close())
	env.requireOnDisk(t, "a")

	s.Changed()
	err := s.Flush()
	require.Error(t, err)
	assert.True(t, errors.Is(err, errPersisterClosed))
}

func TestPersisterTellsEverySavedCheckpoint(t *testing.T) {
	env := newPersisterEnv(t)
	s := env.start(t)
	env.state.set("a")
	s.Changed()
	require.NoError(t, s.Flush())
	assert.Equal(t, []string{env.cp.Path()}, env.state.savedTo, "told once the checkpoint is saved")
	require.NoError(t, s.Flush())
	assert.Len(t, env.state.savedTo, 1, "nothing changed, nothing saved")
}

func TestWriteWaitDebouncesWithABound(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name string
		now  time.Time
		want time.Duration
	}{
		{"first change", start, writeDelay},
		{"changes keep coming", start.Add(maxWriteDelay / 2), writeDelay},
		{"close to the bound", start.Add(maxWriteDelay - writeDelay/4), writeDelay / 4},
		{"past the bound", start.Add(2 * maxWriteDelay), 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, writeWait(tc.now, start), tc.name)
	}
}
