package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// TestRecordsThatAreNotFiles: a record that someone replaced with a FIFO,
// a link, or a file above MaxRecordSize is a corrupt record naming what it
// is, and reading it returns at once (a FIFO without a writer would block
// os.ReadFile for good); the other records are still listed.
func TestRecordsThatAreNotFiles(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	good := sample{Name: "good"}
	require.NoError(t, r.Publish("good", good))
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	require.NoError(t, os.WriteFile(target, mustEncode(t, 1, good), 0o644))

	for _, tc := range []struct {
		key, want string
		make      func(path string) error
	}{
		{"fifo", "it is a named pipe (FIFO): not a regular file", func(path string) error { return syscall.Mkfifo(path, 0o644) }},
		{"link", "it is a symbolic link: not a regular file", func(path string) error { return os.Symlink(target, path) }},
		{"huge", "larger than the limit of 4 MiB", func(path string) error {
			return os.WriteFile(path, make([]byte, MaxRecordSize+1), 0o644)
		}},
	} {
		path := filepath.Join(r.Dir(), tc.key+".json")
		require.NoError(t, tc.make(path))
		_, found, err := r.Read(tc.key)
		assert.False(t, found, tc.key)
		assert.ErrorIs(t, err, ErrCorrupt, tc.key)
		assert.ErrorIs(t, err, ErrUnreadable, tc.key)
		assert.ErrorContains(t, err, path, tc.key)
		assert.ErrorContains(t, err, tc.want, tc.key)
	}
	all, err := r.List()
	assert.Equal(t, map[string]sample{"good": good}, all)
	assert.ErrorIs(t, err, ErrCorrupt)
}

// TestCheckpointThatIsAFIFO: Load returns at once and moves the FIFO aside,
// like any corrupt checkpoint, and the next Save works.
func TestCheckpointThatIsAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	c, err := NewCheckpoint[sample](path, 1)
	require.NoError(t, err)
	_, found, err := c.Load()
	assert.False(t, found)
	assert.ErrorIs(t, err, ErrUnreadable)
	assert.ErrorContains(t, err, "reading "+path+": it is a named pipe (FIFO)")
	assert.ErrorContains(t, err, "moved aside to "+path+".corrupt-")
	require.NoError(t, c.Save(sample{Name: "next"}))
}

// TestWritesAboveTheLimitAreRefused: what readers would refuse is not
// written.
func TestWritesAboveTheLimitAreRefused(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	err := r.Publish("big", sample{Name: strings.Repeat("x", MaxRecordSize)})
	assert.ErrorContains(t, err, "above the limit of "+fsread.Size(MaxRecordSize)+" that readers accept")
	keys, err := r.Keys()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// holdLock takes dir's writers' lock as another writer would, and returns
// its release.
func holdLock(t *testing.T, dir string) func() {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() { f.Close() })
	return func() { require.NoError(t, f.Close()) }
}

// TestHeldLock: a lock that another writer keeps is given up on, with an
// error naming the lock file and its holder (this test process), by every
// writer: Publish, Remove and Save; Load reads the checkpoint all the same,
// and leaves a bad one where it is. Once it is free, writes work again.
func TestHeldLock(t *testing.T) {
	root := t.TempDir()
	r := newSamples(t, root, 1)
	require.NoError(t, r.Publish("a", sample{Name: "a"}))
	c, err := NewCheckpoint[sample](filepath.Join(r.Dir(), "ckpt.json"), 1)
	require.NoError(t, err)
	require.NoError(t, c.Save(sample{Name: "saved"}))
	bad, err := NewCheckpoint[sample](filepath.Join(r.Dir(), "bad.json"), 1)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad.Path(), []byte("{"), 0o600))
	release := holdLock(t, r.Dir())

	saved, found, err := c.Load()
	require.NoError(t, err, "a held lock does not cost the checkpoint")
	assert.True(t, found)
	assert.Equal(t, "saved", saved.Name)
	_, _, err = bad.Load()
	assert.ErrorIs(t, err, ErrCorrupt)
	assert.FileExists(t, bad.Path(), "not moved aside without the lock")

	lock := filepath.Join(r.Dir(), lockName)
	holder := fmt.Sprintf("is held by pid %d (", os.Getpid())
	for name, write := range map[string]func() error{
		"publish": func() error { return r.Publish("b", sample{Name: "b"}) },
		"remove":  func() error { return r.Remove("a") },
		"save":    func() error { return c.Save(sample{Name: "c"}) },
	} {
		err := write()
		assert.ErrorIs(t, err, ErrLockHeld, name)
		assert.ErrorContains(t, err, lock+" "+holder, name)
		assert.ErrorContains(t, err, "the lock of the writers of "+r.Dir(), name)
	}
	got, found, err := r.Read("a")
	require.NoError(t, err, "readers take no lock")
	assert.True(t, found)
	assert.Equal(t, "a", got.Name)

	release()
	require.NoError(t, r.Publish("b", sample{Name: "b"}))
	require.NoError(t, r.Remove("a"))
	require.NoError(t, c.Save(sample{Name: "c"}))
}
