package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOutermostMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "var", "log"), 0o755))
	assert.Equal(t, filepath.Join(dir, "var", "log", "containers"), outermostMissing(filepath.Join(dir, "var", "log", "containers")))
	assert.Equal(t, filepath.Join(dir, "var", "lib"), outermostMissing(filepath.Join(dir, "var", "lib", "kubelet", "device-plugins")))
	assert.Equal(t, "", outermostMissing(filepath.Join(dir, "var", "log")), "an existing dir is not created by the run")
}

func TestHostStateRoundTrip(t *testing.T) {
	runDir := t.TempDir()
	created := filepath.Join(t.TempDir(), "device-plugins")
	st := &hostState{Sysctls: map[string]string{"vm/overcommit_memory": "0"},
		CreatedDirs: []string{created}}
	require.NoError(t, st.save(runDir))
	loaded, err := loadHostState(runDir)
	require.NoError(t, err)
	assert.Equal(t, st, loaded)

	assert.Empty(t, (&hostState{CreatedDirs: []string{created}}).changes(), "nothing was created yet")
	require.NoError(t, os.MkdirAll(created, 0o755))
	assert.Equal(t, []string{"host directory " + created + " is left"}, (&hostState{CreatedDirs: []string{created}}).changes())

	require.NoError(t, os.WriteFile(filepath.Join(runDir, hostStateFile), []byte("{"), 0o644))
	_, err = loadHostState(runDir)
	assert.ErrorContains(t, err, "decoding sandbox state "+filepath.Join(runDir, hostStateFile))
}

// A second sandbox waits for the first one's lock and gives up with its context.
func TestLockHostExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := lockHost(context.Background(), path, func(string) {})
	require.NoError(t, err)

	var waited []string
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = lockHost(ctx, path, func(msg string) { waited = append(waited, msg) })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, waited, 1, "the wait is announced once")

	require.NoError(t, first.Close())
	second, err := lockHost(context.Background(), path, func(string) {})
	require.NoError(t, err, "the lock is free once its holder closed it")
	require.NoError(t, second.Close())
}

func TestNodeIPIsNotLoopback(t *testing.T) {
	ip, err := nodeIP()
	if err != nil {
		t.Skipf("no non-loopback address here: %v", err)
	}
	assert.NotContains(t, ip, "127.")
}
