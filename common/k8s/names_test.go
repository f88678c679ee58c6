package k8s

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns string
		ok bool
	}{
		{"kube-system", true},
		{"a", true},
		{"0team", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"Kube-System", false},
		{"-team", false},
		{"team-", false},
		{"team.a", false},
		{"team_a", false},
		{"tëam", false},
		{" kube-system", false},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			assert.Equal(t, tc.ok, IsDNSLabel(tc.ns))
			err := CheckNamespace("reserved-namespaces", tc.ns)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, "reserved-namespaces: ")
			assert.ErrorContains(t, err, "expected a Kubernetes namespace name (at most 63 lowercase letters, digits and '-')")
		})
	}
	err := CheckNamespace("policy.namespaces", strings.Repeat("X", 1<<20))
	assert.Less(t, len(err.Error()), 1024, "the error quotes a bounded prefix")
}

func TestIsDNSSubdomain(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"cdi.k8s.io", true},
		{"cdi-devices.nri-suite.io", true},
		{"localhost", true},
		{strings.Repeat("a.", 126) + "a", true}, // 253
		{strings.Repeat("a.", 126) + "ab", false},
		{"", false},
		{"cdi.k8s.io/", false},
		{".cdi.k8s.io", false},
		{"cdi..io", false},
		{"cdi.k8s.io.", false},
		{"CDI.k8s.io", false},
		{"cdi_devices.io", false},
		{"-cdi.io", false},
		{strings.Repeat("a", 64) + ".io", false},
	} {
		assert.Equal(t, tc.ok, IsDNSSubdomain(tc.s), "%q", tc.s)
	}
}
