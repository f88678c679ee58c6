package nriplugin

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

// Uninstalled, the plugin takes its device and health records with it;
// another plugin's records stay.
func TestRemoveNodeState(t *testing.T) {
	f := newFixture(t, "")
	_, err := f.create(t, pod("default", map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=env-only"}), container("c1"))
	require.NoError(t, err)
	keys, err := f.records.Keys()
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, keys)
	health, err := state.DeviceHealthRecords(f.shared)
	require.NoError(t, err)
	require.NoError(t, health.Publish("node", state.DeviceHealthSet{}))
	statuses, err := state.PluginStatuses(f.shared)
	require.NoError(t, err)
	require.NoError(t, statuses.Publish("40-security", state.PluginStatus{Name: "security", Index: 40}))
	require.NoError(t, f.p.Close())

	require.NoError(t, f.p.RemoveNodeState())
	entries, err := os.ReadDir(f.shared)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only another plugin's records are left")
	assert.Equal(t, "plugins", entries[0].Name())
}
