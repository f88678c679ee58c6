package state

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoveOnlyWhatStateWrote: a record or a checkpoint is removed only if
// this package wrote it, whatever its schema version; a file of someone
// else's in its place, a FIFO included, stays and is reported.
func TestRemoveOnlyWhatStateWrote(t *testing.T) {
	root := t.TempDir()
	old := newSamples(t, root, 1)
	require.NoError(t, old.Publish("older", sample{Name: "v1"}))
	r := newSamples(t, root, 2)
	require.NoError(t, r.Remove("older"), "a record of an older schema is still this package's")
	assert.NoFileExists(t, filepath.Join(r.Dir(), "older.json"))

	for name, write := range map[string]func(path string) error{
		"not json":   func(p string) error { return os.WriteFile(p, []byte("not a record\n"), 0o644) },
		"other json": func(p string) error { return os.WriteFile(p, []byte(`{"name": "mine"}`), 0o644) },
		"no checksum": func(p string) error {
			return os.WriteFile(p, []byte(`{"format": 1, "version": 1, "checksum": "", "data": {}}`), 0o644)
		},
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(r.Dir(), "k.json")
			require.NoError(t, write(path))
			t.Cleanup(func() { os.Remove(path) })
			err := r.Remove("k")
			require.ErrorIs(t, err, ErrNotOwned)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "left in place")
			_, err = os.Lstat(path)
			assert.NoError(t, err, "left in place")
		})
	}

	cp, err := NewCheckpoint[sample](filepath.Join(root, "plugin", "checkpoint.json"), 1)
	require.NoError(t, err)
	require.NoError(t, cp.Remove(), "nothing to remove")
	require.NoError(t, cp.Save(sample{Name: "a"}))
	require.NoError(t, cp.Remove())
	assert.NoFileExists(t, cp.Path())
	require.NoError(t, os.WriteFile(cp.Path(), []byte("someone's\n"), 0o600))
	require.ErrorIs(t, cp.Remove(), ErrNotOwned)
	assert.FileExists(t, cp.Path())
}
