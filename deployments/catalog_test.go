package deployments

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/internal/catalog"
)

// The chart's values name every plugin with the index and port its own
// binary defaults to (internal/catalog): the chart's tests hold the
// rendered DaemonSets to these values, in their own module.
func TestChartValuesFollowTheCatalog(t *testing.T) {
	data, err := os.ReadFile("helm/nri-suite/values.yaml")
	require.NoError(t, err)
	var values struct {
		Plugins map[string]struct {
			Index string `yaml:"index"`
			Port  int    `yaml:"port"`
		} `yaml:"plugins"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	assert.Len(t, values.Plugins, len(catalog.All), "a values entry per plugin")
	for _, p := range catalog.All {
		got, ok := values.Plugins[p.Name]
		if assert.True(t, ok, "values.yaml has plugin %s", p.Name) {
			assert.Equal(t, p.Index, got.Index, "plugins.%s.index", p.Name)
			assert.Equal(t, p.Port, got.Port, "plugins.%s.port", p.Name)
		}
	}
}
