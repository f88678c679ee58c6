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

// The real containerd merges the main config and the NRI/CDI drop-in into
// what the sandbox needs; `containerd config dump` shows the merged result.
func TestContainerdConfigMergesDropIn(t *testing.T) {
	cache := requireBinary(t, "containerd")
	dir := filepath.Join(t.TempDir(), "containerd")
	p := containerdPaths(dir, cache, PauseImage)
	require.NoError(t, os.MkdirAll(p.DropInDir, 0o755))
	require.NoError(t, os.WriteFile(p.Config, []byte(ContainerdConfig(p)), 0o644))
	nri := NRIConfig{Socket: "/sb/nri/nri.sock", PluginPath: "/sb/nri/plugins", PluginConfigPath: "/sb/nri/conf.d",
		RegistrationTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second}
	dropIn, err := ContainerdNRIDropIn(nri, []string{"/sb/cdi", "/sb/cdi2"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.DropInDir, "50-nri-cdi.toml"), []byte(dropIn), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := runTool(ctx, nil, cache.Bin("containerd"), "--config", p.Config, "config", "dump")
	require.NoError(t, err)
	dump := string(out)
	for _, want := range []string{
		"root = '" + p.Root + "'",
		"state = '" + p.State + "'",
		"address = '" + p.Socket + "'",
		"restrict_oom_score_adj = true",
		"cdi_spec_dirs = ['/sb/cdi', '/sb/cdi2']",
		"BinaryName = '" + cache.Bin("runc") + "'",
		"Root = '" + p.RuncRoot + "'",
		"SystemdCgroup = false",
		"sandbox = '" + PauseImage + "'",
		"socket_dir = '" + p.ShimSock + "'",
		"path = '" + p.Opt + "'",
		"socket_path = '/sb/nri/nri.sock'",
		"plugin_path = '/sb/nri/plugins'",
		"plugin_config_path = '/sb/nri/conf.d'",
		"plugin_registration_timeout = '5s'",
		"plugin_request_timeout = '2s'",
		"disable_connections = false",
		// Only the keys containerd knows appear: a misspelt one would not.
		"[plugins.'io.containerd.nri.v1.nri'.default_validator]\n      enable = true\n",
		"required_plugins = ['security']",
		"tolerate_missing_plugins_annotation = 'tolerate-missing-plugins.nri-suite.io'",
	} {
		assert.Contains(t, dump, want)
	}
}
