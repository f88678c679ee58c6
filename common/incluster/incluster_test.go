package incluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseDaemonSetRef(t *testing.T) {
	ref, err := ParseDaemonSetRef("kube-system/nri-suite-stats")
	assert.NoError(t, err)
	assert.Equal(t, DaemonSetRef{Namespace: "kube-system", Name: "nri-suite-stats"}, ref)
	assert.Equal(t, "kube-system/nri-suite-stats", ref.String())
	for _, bad := range []string{"", "nri-suite-stats", "/nri-suite-stats", "kube-system/", "Kube-System/x", "ns/x/y", "ns/X_y"} {
		_, err := ParseDaemonSetRef(bad)
		assert.ErrorContains(t, err, "want namespace/name", "%q", bad)
	}
}
