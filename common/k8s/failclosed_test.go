package k8s

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTolerateMissingPluginsKeys(t *testing.T) {
	keys := TolerateMissingPluginsKeys(map[string]string{
		TolerateMissingPluginsAnnotation: "true", TolerateMissingPluginsAnnotation + "/container.app": "false",
		"tolerate-missing-plugins.nri-suite.io.evil": "true", "other": "x"})
	slices.Sort(keys)
	assert.Equal(t, []string{TolerateMissingPluginsAnnotation, TolerateMissingPluginsAnnotation + "/container.app"}, keys)
	assert.Empty(t, TolerateMissingPluginsKeys(nil))
}

func TestStaticPod(t *testing.T) {
	for source, want := range map[string]bool{"file": true, "http": true, "api": false, "": false, "File": false} {
		assert.Equal(t, want, StaticPod(map[string]string{ConfigSourceAnnotation: source}), source)
	}
}
