package devnode

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStat(t *testing.T) {
	null, err := Stat("/dev/null")
	require.NoError(t, err)
	assert.Equal(t, Node{Type: "c", Major: 1, Minor: 3, Perm: null.Perm}, null)
	info, err := os.Stat("/dev/null")
	require.NoError(t, err)
	assert.Equal(t, info.Mode().Perm(), null.Perm)

	file := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = Stat(file)
	assert.ErrorIs(t, err, ErrNotDevice)

	_, err = Stat(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
