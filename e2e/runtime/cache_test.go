package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheLayout(t *testing.T) {
	t.Setenv("NRI_SUITE_CACHE", "/cache")
	c := DefaultCache()
	assert.Equal(t, "/cache/bin/runc", c.Bin("runc"))
	assert.Equal(t, "/usr/bin/conmon", c.Bin("/usr/bin/conmon"), "a binary from the distribution keeps its path")
	assert.Equal(t, []Image{
		{Ref: BusyboxImage, Archive: "/cache/images/busybox.tar"},
		{Ref: PauseImage, Archive: "/cache/images/pause.tar"},
	}, c.Images())
	t.Setenv("NRI_SUITE_CACHE", "")
	assert.Equal(t, DefaultCacheDir, DefaultCache().Root)
}

func TestCheckPrereqsNamesWhatIsMissing(t *testing.T) {
	cache := Cache{Root: t.TempDir()}
	err := CheckPrereqs(NewContainerd(), cache)
	if os.Geteuid() != 0 {
		require.ErrorIs(t, err, ErrNotRoot)
		assert.Equal(t, "needs root; run as root or in CI", err.Error())
		return
	}
	require.ErrorIs(t, err, ErrCacheIncomplete)
	assert.ErrorContains(t, err, filepath.Join(cache.Root, "bin", "kubelet"))
	assert.ErrorContains(t, err, filepath.Join(cache.Root, "images", "pause.tar"))
	assert.ErrorContains(t, err, "run `bash e2e/runtime/tools/install.sh`")

	// A file that is there but not executable still counts as missing.
	require.NoError(t, os.MkdirAll(filepath.Join(cache.Root, "bin"), 0o755))
	require.NoError(t, os.WriteFile(cache.Bin("runc"), []byte("x"), 0o644))
	assert.ErrorContains(t, CheckPrereqs(NewContainerd(), cache), cache.Bin("runc"))
}

func TestNewRuntime(t *testing.T) {
	assert.Contains(t, RuntimeNames(), "containerd")
	rt, err := NewRuntime("containerd")
	require.NoError(t, err)
	assert.Equal(t, "containerd", rt.Name())
	_, err = NewRuntime("docker")
	assert.ErrorContains(t, err, `unknown runtime "docker": expected one of containerd`)
}

// requireBinary returns the default cache when it holds the named binary; a
// test that needs only the binary (not root) skips without it, except in CI.
func requireBinary(t *testing.T, name string) Cache {
	t.Helper()
	cache := DefaultCache()
	if _, err := os.Stat(cache.Bin(name)); err != nil {
		if InCI() {
			t.Fatalf("%s missing in CI: %v", name, err)
		}
		t.Skipf("%s binary missing (%v): %s", name, err, installHint)
	}
	return cache
}
