package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestV1Controllers(t *testing.T) {
	tests := []struct {
		superOptions string
		want         []string
	}{
		{"rw,cpuset", []string{"cpuset"}},
		{"rw,cpu,cpuacct", []string{"cpu", "cpuacct"}},
		{"rw,xattr,name=systemd", []string{"name=systemd"}},
		{"rw,noprefix,release_agent=/sbin/agent,cpuset,clone_children", []string{"cpuset"}},
		{"ro,memory", []string{"memory"}},
		{"rw", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, v1Controllers(tt.superOptions), "v1Controllers(%q)", tt.superOptions)
	}
}

// rmdirTree removes deepest first; on a plain filesystem it works on empty
// directories just like on cgroupfs, and it refuses a directory with files.
func TestRmdirTree(t *testing.T) {
	top := filepath.Join(t.TempDir(), "kubepods")
	for _, d := range []string{"besteffort/pod1/c1", "besteffort/pod1/c2", "burstable/pod2", "pod3"} {
		require.NoError(t, os.MkdirAll(filepath.Join(top, d), 0o755))
	}
	require.NoError(t, rmdirTree(top))
	assert.NoDirExists(t, top)
	assert.NoError(t, rmdirTree(top), "a missing tree is already removed")

	require.NoError(t, os.MkdirAll(filepath.Join(top, "pod4"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(top, "pod4", "tasks"), nil, 0o644))
	err := rmdirTree(top)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(top, "pod4"))
}

func TestCgroupHierarchiesOnThisHost(t *testing.T) {
	hierarchies, err := cgroupHierarchies()
	require.NoError(t, err)
	if len(hierarchies) == 0 {
		t.Skip("no cgroup filesystem mounted here")
	}
	for _, h := range hierarchies {
		assert.DirExists(t, h.Mount)
		if !h.V2 {
			assert.NotEmpty(t, h.Controllers, "a v1 hierarchy at %s names its controllers", h.Mount)
		}
	}
	_, err = CgroupDir("no-such-controller", "/x")
	assert.ErrorContains(t, err, `controller "no-such-controller": not mounted`)
}
