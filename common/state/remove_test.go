package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RemoveAll takes the kind's records, its writers' lock and its directory;
// the other kinds and the root stay. Absent records are no error.
func TestRecordsRemoveAll(t *testing.T) {
	root := t.TempDir()
	r := newSamples(t, root, 1)
	require.NoError(t, r.RemoveAll(), "nothing published yet")
	require.NoError(t, r.Publish("a", sample{Name: "a"}))
	require.NoError(t, r.Publish("b", sample{Name: "b"}))
	other, err := NewRecords[sample](root, "others", 1)
	require.NoError(t, err)
	require.NoError(t, other.Publish("c", sample{Name: "c"}))
	require.FileExists(t, filepath.Join(r.Dir(), lockName))

	require.NoError(t, r.RemoveAll())
	assert.NoDirExists(t, r.Dir())
	_, found, err := other.Read("c")
	require.NoError(t, err)
	assert.True(t, found, "another kind's record stays")
	assert.DirExists(t, root)
}

// A file that is not a record of the package's (a directory in a record's
// place, another program's file) stays, and with it the directory: the
// error names what stayed.
func TestRecordsRemoveAllLeavesForeignFiles(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	require.NoError(t, r.Publish("a", sample{Name: "a"}))
	require.NoError(t, os.Mkdir(filepath.Join(r.Dir(), "dir.json"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.Dir(), "README"), nil, 0o644))

	err := r.RemoveAll()
	assert.ErrorIs(t, err, ErrNotOwned)
	assert.ErrorContains(t, err, "dir.json")
	assert.NoFileExists(t, filepath.Join(r.Dir(), "a.json"))
	assert.FileExists(t, filepath.Join(r.Dir(), "README"))
	assert.FileExists(t, filepath.Join(r.Dir(), lockName), "the lock stays while the directory does")
}

// Prune removes the directory only when no record is left in it.
func TestRecordsPrune(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	require.NoError(t, r.Prune(), "no directory yet")
	require.NoError(t, r.Publish("a", sample{Name: "a"}))
	require.NoError(t, r.Prune())
	assert.FileExists(t, filepath.Join(r.Dir(), "a.json"), "a record keeps the directory")
	require.NoError(t, r.Remove("a"))
	require.NoError(t, r.Prune())
	assert.NoDirExists(t, r.Dir())
}

// A checkpoint's RemoveAll takes its directory when nothing else is in it.
func TestCheckpointRemoveAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topology-aware")
	c, err := NewCheckpoint[sample](filepath.Join(dir, "checkpoint.json"), 1)
	require.NoError(t, err)
	require.NoError(t, c.Save(sample{Name: "a"}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes"), nil, 0o644))
	require.NoError(t, c.RemoveAll())
	assert.NoFileExists(t, c.Path())
	assert.DirExists(t, dir, "another file keeps the directory")

	require.NoError(t, os.Remove(filepath.Join(dir, "notes")))
	require.NoError(t, c.Save(sample{Name: "a"}))
	require.NoError(t, c.RemoveAll())
	assert.NoDirExists(t, dir)
	require.NoError(t, c.RemoveAll(), "removing it again is no error")
}

// RemoveDirIfEmpty leaves a directory that holds something, and one that
// is absent, without an error; it refuses what is not a directory.
func TestRemoveDirIfEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, RemoveDirIfEmpty(dir), "absent")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, RemoveDirIfEmpty(dir))
	assert.DirExists(t, dir, "not empty")
	require.NoError(t, RemoveDirIfEmpty(filepath.Join(dir, "sub")))
	require.NoError(t, RemoveDirIfEmpty(dir))
	assert.NoDirExists(t, dir)

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	assert.ErrorContains(t, RemoveDirIfEmpty(file), "removing directory "+file)
}
