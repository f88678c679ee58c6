package runtime

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcCgroups(t *testing.T) {
	got := parseProcCgroups(`#subsys_name	hierarchy	num_cgroups	enabled
cpuset	3	1	1
memory	4	183	1
hugetlb	0	1	1
net_cls	0	1	0
broken	x	1	1
short	1
`)
	assert.Equal(t, map[string]procCgroup{
		"cpuset":  {Hierarchy: 3, Cgroups: 1, Enabled: true},
		"memory":  {Hierarchy: 4, Cgroups: 183, Enabled: true},
		"hugetlb": {Hierarchy: 0, Cgroups: 1, Enabled: true},
		"net_cls": {Hierarchy: 0, Cgroups: 1, Enabled: false},
	}, got)
	assert.Empty(t, parseProcCgroups(""))
}

// On a host whose hugetlb controller has no v1 hierarchy, the sandbox mounts
// one and its teardown gives the controller back to v2, even when an earlier
// unmount left the hierarchy alive and hidden.
func TestMountCgroupsV1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting cgroup hierarchies needs root")
	}
	lock, err := lockHost(TestContext(t), hostLockPath, func(msg string) { t.Log(msg) })
	require.NoError(t, err, "sandboxes must not see the hierarchy come and go")
	defer lock.Close()
	ctrls, err := kernelCgroupControllers()
	require.NoError(t, err)
	if ctrls["hugetlb"].Hierarchy != 0 || !ctrls["hugetlb"].Enabled {
		t.Skipf("hugetlb already has a v1 hierarchy or is disabled here: %+v", ctrls["hugetlb"])
	}
	base := t.TempDir()

	mounted, err := mountCgroupsV1(base, []string{"hugetlb", "no-such-controller"})
	require.NoError(t, err)
	m := cgroupMount{Controller: "hugetlb", Path: filepath.Join(base, "hugetlb"), CreatedDir: true}
	require.Equal(t, []cgroupMount{m}, mounted, "only the kernel's controllers are mounted")
	t.Cleanup(func() {
		_ = syscall.Unmount(m.Path, 0) // a net for a failed assertion below
	})
	assert.True(t, m.isMounted())
	again, err := mountCgroupsV1(base, []string{"hugetlb"})
	require.NoError(t, err)
	assert.Empty(t, again, "a controller with a hierarchy is not mounted twice")

	// Unmounted with a child cgroup in it, the hierarchy stays alive, hidden.
	child := filepath.Join(m.Path, "child")
	require.NoError(t, os.Mkdir(child, 0o755))
	require.NoError(t, syscall.Unmount(m.Path, 0))
	assert.True(t, m.isHidden(), "the hierarchy outlives its unmount")
	st := &hostState{CgroupMounts: []cgroupMount{m}}
	assert.Contains(t, st.changes(), "cgroup hugetlb hierarchy still alive after its unmount from "+m.Path)

	// unmount mounts it again, and refuses while the child is there.
	err = m.unmount()
	require.ErrorContains(t, err, "cgroup child is left in it")
	require.True(t, m.isMounted())
	require.NoError(t, syscall.Rmdir(child))

	require.NoError(t, st.restore())
	assert.Empty(t, st.changes())
	assert.NoDirExists(t, m.Path)
	ctrls, err = kernelCgroupControllers()
	require.NoError(t, err)
	assert.Zero(t, ctrls["hugetlb"].Hierarchy, "hugetlb is back on the v2 side")
}
