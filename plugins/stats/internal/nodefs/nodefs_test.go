package nodefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs/blockdevice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A host's mountinfo: this VM's (two /dev/shm mounts, a bind mount of the
// root disk, cgroup and proc mounts), plus a data disk, an overlay of the
// node, a pod's secret volume and a container's root filesystem.
const mountinfoText = `22 27 0:21 / /proc rw,relatime - proc proc rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334192k
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683584k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683584k
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
45 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard
46 27 8:17 / /data\040disk rw,relatime - xfs /dev/sdb1 rw
47 27 0:50 / /opt/layers rw,relatime - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c
48 27 0:51 / /var/lib/kubelet/pods/uid/volumes/kubernetes.io~projected/token rw - tmpfs tmpfs rw
49 27 0:52 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay overlay rw,lowerdir=/d
`

func TestPartitions(t *testing.T) {
	got, err := Partitions(strings.NewReader(mountinfoText))
	require.NoError(t, err)
	assert.Equal(t, []Partition{
		{Device: "/dev/sdb1", Mountpoint: "/data disk", FSType: "xfs", Major: 8, Minor: 17},
		// The later of the two mounts of /dev/shm.
		{Device: "/dev/shm", Mountpoint: "/dev/shm", FSType: "tmpfs", Major: 0, Minor: 27},
		// The root disk once: /run/netns is a bind mount of it.
		{Device: "/dev/vda", Mountpoint: "/", FSType: "ext4", Major: 254, Minor: 0},
		{Device: "/sys/fs/cgroup", Mountpoint: "/sys/fs/cgroup", FSType: "tmpfs", Major: 0, Minor: 28},
		{Device: "overlay_0-50", Mountpoint: "/opt/layers", FSType: "overlay", Major: 0, Minor: 50},
	}, got, "no proc, devtmpfs or cgroup mounts, no pod volume, no container root filesystem")
}

func TestPartitionsRejectsABrokenMountinfo(t *testing.T) {
	_, err := Partitions(strings.NewReader("27 1 254:0 / / rw,relatime ext4 /dev/vda rw\n"))
	assert.Error(t, err)
}

// hostFiles makes a host's /proc (1/mountinfo, diskstats) and /sys in a
// temporary directory; mountinfo names real directories of the test's.
func hostFiles(t *testing.T, mountinfo, diskstats string) Paths {
	t.Helper()
	dir := t.TempDir()
	proc, sys := filepath.Join(dir, "proc"), filepath.Join(dir, "sys")
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "1"), 0o755))
	require.NoError(t, os.MkdirAll(sys, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "mountinfo"), []byte(mountinfo), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "diskstats"), []byte(diskstats), 0o644))
	return Paths{Proc: proc, Sys: sys, HostRoot: "/"}
}

func TestReadJoinsStatfsAndDiskstats(t *testing.T) {
	data, scratch := t.TempDir(), t.TempDir()
	gone := filepath.Join(t.TempDir(), "unmounted")
	mountinfo := "27 1 254:1 / " + data + " rw - ext4 /dev/vda1 rw\n" +
		"28 1 0:40 / " + scratch + " rw - tmpfs tmpfs rw\n" +
		"29 1 0:41 / " + gone + " rw - tmpfs tmpfs rw\n"
	diskstats := " 254       0 vda 10 1 100 7 20 2 200 9 0 30 40 0 0 0 0 0 0\n" +
		" 254       1 vda1 2081619 155647 63510218 2716690 955730 996954 143380432 1710156 3 381088 4567971 0 0 0 0 0 0\n"
	paths := hostFiles(t, mountinfo, diskstats)

	r, err := NewReader(paths)
	require.NoError(t, err)
	require.Len(t, r.Partitions(), 3)
	got, err := r.Read()
	require.NoError(t, err, "a mount point that is gone is no error")
	require.Len(t, got, 2, "the unmounted tmpfs is left out")

	assert.Equal(t, "/dev/vda1", got[0].Device)
	assert.Equal(t, blockdevice.IOStats{ReadIOs: 2081619, ReadMerges: 155647, ReadSectors: 63510218, ReadTicks: 2716690,
		WriteIOs: 955730, WriteMerges: 996954, WriteSectors: 143380432, WriteTicks: 1710156, IOsInProgress: 3,
		IOsTotalTicks: 381088, WeightedIOTicks: 4567971}, got[0].Disk, "the partition's own line, by device number")
	assert.Equal(t, scratch, got[1].Device)
	assert.Zero(t, got[1].Disk, "a tmpfs has no disk")

	for i, dir := range []string{data, scratch} {
		var st unix.Statfs_t
		require.NoError(t, unix.Statfs(dir, &st))
		u := got[i].Usage
		require.NotNil(t, u)
		assert.Equal(t, uint64(st.Frsize)*st.Blocks, u.Capacity, dir)
		assert.Equal(t, st.Files, u.Inodes, dir)
		assert.LessOrEqual(t, u.Used(), u.Capacity, dir)
		assert.Positive(t, u.Used(), "%s: the filesystem of the test's temporary directory holds something", dir)
	}
}

func TestReadWithoutHostRootHasNoUsage(t *testing.T) {
	paths := hostFiles(t, "27 1 254:0 / / rw - ext4 /dev/vda rw\n", " 254 0 vda 1 2 3 4 5 6 7 8 9 10 11 0 0 0 0 0 0\n")
	paths.HostRoot = ""
	r, err := NewReader(paths)
	require.NoError(t, err)
	got, err := r.Read()
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Nil(t, got[0].Usage)
	assert.Equal(t, uint64(1), got[0].Disk.ReadIOs)
}

func TestReadNamesWhatFailed(t *testing.T) {
	paths := hostFiles(t, "27 1 254:0 / / rw - ext4 /dev/vda rw\n", "")
	require.NoError(t, os.Remove(filepath.Join(paths.Proc, "diskstats")))
	r, err := NewReader(paths)
	require.NoError(t, err)
	got, err := r.Read()
	require.ErrorContains(t, err, "diskstats")
	require.Len(t, got, 1, "the filesystem's usage is still served")
	assert.Zero(t, got[0].Disk)

	_, err = NewReader(Paths{Proc: t.TempDir(), Sys: t.TempDir()})
	assert.ErrorContains(t, err, "mountinfo")
}

func TestUsedNeverWrapsAround(t *testing.T) {
	assert.Equal(t, uint64(0), (&Usage{Capacity: 10, Free: 12}).Used())
	assert.Equal(t, uint64(4), (&Usage{Capacity: 10, Free: 6}).Used())
}

// BenchmarkReadHost is one reading of this host's filesystems, as each
// reading of the collector adds it.
func BenchmarkReadHost(b *testing.B) {
	r, err := NewReader(Paths{Proc: "/proc", Sys: "/sys", HostRoot: "/"})
	require.NoError(b, err)
	b.Logf("%d filesystems", len(r.Partitions()))
	for b.Loop() {
		if _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}
