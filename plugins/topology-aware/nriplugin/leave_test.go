package nriplugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

// Uninstalled, the plugin takes its checkpoint, with its directory, and its
// placement and pool records with it; another plugin's records stay.
func TestRemoveNodeState(t *testing.T) {
	stateDir, shared := filepath.Join(t.TempDir(), "topology-aware"), t.TempDir()
	p := newTestPluginIn(t, "smt-2s-12c-interleaved", nil, stateDir, shared)
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	id, err := v.create(t, p.Plugin, "guaranteed-2cpu.yaml", "app")
	require.NoError(t, err)
	statuses, err := state.PluginStatuses(shared)
	require.NoError(t, err)
	require.NoError(t, statuses.Publish("40-security", state.PluginStatus{Name: "security", Index: 40}))
	require.NoError(t, p.Close())
	require.FileExists(t, filepath.Join(stateDir, CheckpointFile))
	require.FileExists(t, filepath.Join(shared, "placements", id+".json"))

	require.NoError(t, p.RemoveNodeState())
	assert.NoDirExists(t, stateDir)
	entries, err := os.ReadDir(shared)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only another plugin's records are left")
	assert.Equal(t, "plugins", entries[0].Name())
}
