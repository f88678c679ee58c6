package state

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginStatusKey(t *testing.T) {
	tests := []struct {
		status PluginStatus
		want   string
	}{
		{PluginStatus{Name: "device-injector", Index: 10}, "10-device-injector"},
		{PluginStatus{Name: "test", Index: 5}, "05-test"},
		{PluginStatus{Name: "stats", Index: 90}, "90-stats"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.status.Key())
			assert.NoError(t, validateName("key", tt.status.Key()))
		})
	}
}

func TestPluginStatusPublishedAndRead(t *testing.T) {
	root := t.TempDir()
	publisher, err := PluginStatuses(root)
	require.NoError(t, err)
	reader, err := PluginStatuses(root)
	require.NoError(t, err)

	synced := time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC)
	statuses := []PluginStatus{
		{Name: "topology-aware", Index: 30, PID: 4242, Version: "v0.1.0", Connected: true, Ready: true,
			LastSynchronize: synced, Updated: synced.Add(time.Second)},
		{Name: "stats", Index: 90, PID: 77, Version: "v0.1.0", Updated: synced},
	}
	for _, s := range statuses {
		require.NoError(t, publisher.Publish(s.Key(), s))
	}
	assert.FileExists(t, filepath.Join(root, PluginStatusKind, "30-topology-aware.json"))

	all, err := reader.List()
	require.NoError(t, err)
	assert.Equal(t, map[string]PluginStatus{
		"30-topology-aware": statuses[0],
		"90-stats":          statuses[1],
	}, all)

	raw, err := os.ReadFile(filepath.Join(reader.Dir(), "30-topology-aware.json"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"lastSynchronize": "2025-03-01T12:30:00Z"`)
	raw, err = os.ReadFile(filepath.Join(reader.Dir(), "90-stats.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "lastSynchronize", "a plugin never synchronized has no time")
}
