package deployments

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	injectorconfig "github.com/nri-suite/nri-suite/plugins/device-injector/config"
	securityconfig "github.com/nri-suite/nri-suite/plugins/security/config"
	statsconfig "github.com/nri-suite/nri-suite/plugins/stats/config"
	topologyconfig "github.com/nri-suite/nri-suite/plugins/topology-aware/config"
)

// The shipped configurations are what each plugin's own strict parser
// accepts, templates (.conf.in) as install.sh fills them in. sidecar-order's
// checks its helper on disk: the real-node test (e2e/runtime/deploy) loads it
// into the plugin.
func TestShippedConfigsParse(t *testing.T) {
	parsers := map[string]func(data []byte, source string) error{
		"10-device-injector.conf": func(d []byte, s string) error { _, err := injectorconfig.Parse(d, s); return err },
		"30-topology-aware.conf":  func(d []byte, s string) error { _, err := topologyconfig.Parse(d, s); return err },
		"40-security.conf.in":     func(d []byte, s string) error { _, err := securityconfig.Parse(d, s); return err },
		"90-stats.conf":           func(d []byte, s string) error { _, err := statsconfig.Parse(d, s); return err },
	}
	for name, parse := range parsers {
		path := filepath.Join("preregistered/conf.d", name)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		data = bytes.ReplaceAll(data, []byte("@LIBEXECDIR@"), []byte("/usr/local/libexec/nri-suite"))
		assert.NoError(t, parse(data, path), path)
	}
	// The parsers do refuse: a key the plugin does not know.
	assert.ErrorContains(t, parsers["40-security.conf.in"]([]byte("validators: {}\n"), "x.conf"), `unknown key "validators"`)
}
