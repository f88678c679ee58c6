package cgstats

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"/kubepods/burstable/pod0d3e/abc", "/kubepods/burstable/pod0d3e/abc"},
		{"/kubepods/besteffort/pod0d3e/crio-abc", "/kubepods/besteffort/pod0d3e/crio-abc"},
		{"/nri-sandbox-1/kubepods/pod0d3e/", "/nri-sandbox-1/kubepods/pod0d3e"},
		{"kubepods/pod0d3e/abc", "/kubepods/pod0d3e/abc"},
		{"/", "/"},
		{"kubepods-burstable-pod0d3e_1.slice:cri-containerd:abc",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d3e_1.slice/cri-containerd-abc.scope"},
		{"kubepods-pod0d3e.slice:crio:abc", "/kubepods.slice/kubepods-pod0d3e.slice/crio-abc.scope"},
		{"kubepods-besteffort-pod0d3e.slice", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0d3e.slice"},
		{"/kubepods.slice/kubepods-pod0d3e.slice", "/kubepods.slice/kubepods-pod0d3e.slice"},
		{":cri-containerd:abc", "/system.slice/cri-containerd-abc.scope"},
		{"-.slice:x:y", "/x-y.scope"},
		{"machine.slice::abc.slice", "/machine.slice/abc.slice"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Name(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNameRejects(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "empty"},
		{"/kubepods/../etc", "'..'"},
		{"a:b", "expected slice:prefix:name"},
		{"kube/pods.slice:p:n", "without '/'"},
		{"kubepods--x.slice:p:n", "dash-separated"},
		{"kubepods.slice:p:", "unit name"},
		{"kubepods:p:n", "ending in .slice"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Name(tc.in)
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzName: any input resolves to a clean absolute path without "..", or
// is refused; nothing panics.
func FuzzName(f *testing.F) {
	for _, s := range []string{"/kubepods/pod1/abc", "kubepods-pod1.slice:crio:abc", "-.slice:x:y", "a-b-c.slice", "", ":::", "/a/../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Name(in)
		if err != nil {
			return
		}
		if !strings.HasPrefix(got, "/") || strings.Contains(got, "/../") || strings.HasSuffix(got, "/..") {
			t.Fatalf("Name(%q) = %q: expected a clean absolute path", in, got)
		}
	})
}
