package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRuntimeAtLeast(t *testing.T) {
	minimum := map[string]string{"containerd": "v2.2.0", "cri-o": ""}
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"containerd", "v2.2.0", true}, {"containerd", "2.4.2", true}, {"containerd", "v2.1.9", false},
		{"containerd", "garbage", false}, {"CRI-O", "1.34.0", false}, {"cri-o", "9.0.0", false},
		{"nri-suite-harness", "v0.0.0-harness", true},
	} {
		assert.Equal(t, tc.want, RuntimeAtLeast(tc.name, tc.version, minimum), "%s %s", tc.name, tc.version)
	}
}
