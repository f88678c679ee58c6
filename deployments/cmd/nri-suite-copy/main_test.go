package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopyInto(t *testing.T) {
	src, dir := filepath.Join(t.TempDir(), "helper"), t.TempDir()
	require.NoError(t, os.WriteFile(src, []byte("new"), 0o755))
	dst := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(dst, []byte("old"), 0o644))
	old, err := os.Open(dst) // a container that mounted the old helper
	require.NoError(t, err)
	defer old.Close()

	require.NoError(t, copyInto(src, dir))
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "new", string(data))
	st, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	kept := make([]byte, 3)
	_, err = old.ReadAt(kept, 0)
	require.NoError(t, err)
	assert.Equal(t, "old", string(kept), "the replaced file's inode is untouched")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

func TestCopyIntoErrors(t *testing.T) {
	dir := t.TempDir()
	assert.ErrorContains(t, copyInto(filepath.Join(dir, "missing"), dir), "copying "+filepath.Join(dir, "missing"))
	assert.ErrorContains(t, copyInto(dir, t.TempDir()), "expected a regular file")
	src := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(src, nil, 0o644))
	assert.ErrorContains(t, copyInto(src, filepath.Join(dir, "nodir")), "copying "+src+" into")
}
