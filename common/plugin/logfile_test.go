package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogOutput(t *testing.T) {
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer regular.Close()

	t.Run("external plugins keep stderr", func(t *testing.T) {
		t.Setenv(api.PluginSocketEnvVar, "")
		assert.Same(t, null, logOutput(null, t.TempDir()))
	})
	t.Run("a pre-registered plugin given a stderr keeps it", func(t *testing.T) {
		launchedByRuntime(t)
		assert.Same(t, regular, logOutput(regular, t.TempDir()))
	})
	t.Run("a pre-registered plugin whose output is discarded logs to a file", func(t *testing.T) {
		launchedByRuntime(t)
		dir := filepath.Join(t.TempDir(), "log")
		out := logOutput(null, dir)
		_, err := out.Write([]byte("registered\n"))
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(dir, "30-topology-aware.log"))
		require.NoError(t, err, "the log is named after the plugin's NRI id")
		assert.Equal(t, "registered\n", string(data))
	})
}

// launchedByRuntime sets the environment NRI gives a plugin it launches.
func launchedByRuntime(t *testing.T) {
	t.Setenv(api.PluginSocketEnvVar, "3")
	t.Setenv(api.PluginNameEnvVar, "topology-aware")
	t.Setenv(api.PluginIdxEnvVar, "30")
}
