package collect

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/nodefs"
)

// withFilesystems gives n a node with two filesystems: a disk /dev/vda1
// and a tmpfs, both temporary directories of the test (so that statfs
// answers), the disk's counters in /proc/diskstats. hostRoot "" reads no
// usage. It returns the /proc.
func withFilesystems(t *testing.T, n *node, hostRoot string) string {
	t.Helper()
	proc, sys, disk, tmp := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, proc, "1/mountinfo", "22 27 0:21 / /proc rw - proc proc rw\n"+
		"27 1 254:1 / "+disk+" rw - ext4 /dev/vda1 rw\n"+
		"28 1 0:40 / "+tmp+" rw - tmpfs tmpfs rw\n")
	writeFile(t, proc, "diskstats", " 254 0 vda 1 1 1 1 1 1 1 1 0 1 1 0 0 0 0 0 0\n"+
		" 254 1 vda1 2081619 155647 63510218 2716690 955730 996954 143380432 1710156 3 381088 4567971 0 0 0 0 0 0\n")
	r, err := nodefs.NewReader(nodefs.Paths{Proc: proc, Sys: sys, HostRoot: hostRoot})
	require.NoError(t, err)
	n.c.opts.Filesystems = r
	return proc
}

var filesystemFamilies = []string{"container_fs_inodes_free", "container_fs_inodes_total", "container_fs_io_current",
	"container_fs_io_time_seconds_total", "container_fs_io_time_weighted_seconds_total", "container_fs_limit_bytes",
	"container_fs_read_seconds_total", "container_fs_reads_merged_total", "container_fs_reads_total",
	"container_fs_sector_reads_total", "container_fs_sector_writes_total", "container_fs_usage_bytes",
	"container_fs_write_seconds_total", "container_fs_writes_merged_total", "container_fs_writes_total"}

// The node's filesystems on the root's series, as the kubelet's cAdvisor
// serves them: the disk's /proc/diskstats counters (times in its unit
// quirk: milliseconds divided by 1e9), zeros for a tmpfs, and statfs'
// capacity, usage and inodes; the blkio series of the root (device "")
// stay beside them in the families they share.
func TestNodeFilesystemMetrics(t *testing.T) {
	n := newNode(t)
	writeBlkioV1(t, n.root, "/")
	withFilesystems(t, n, "/")
	fss := n.c.Snapshot().Filesystems // the reading the scrapes below serve
	require.Len(t, fss, 2)
	disk, tmp := fss[0].Device, fss[1].Device
	assert.Equal(t, "/dev/vda1", disk)

	root := func(device string) string {
		return `{container="",device="` + device + `",id="/",image="",name="",namespace="",pod=""}`
	}
	var want strings.Builder
	family := func(name, kind string, help string, lines ...string) {
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, l := range lines {
			want.WriteString(name + l + " 1700000000000\n")
		}
	}
	usage := func(f func(u *nodefs.Usage) uint64) []string {
		return []string{root(disk) + " " + fmt.Sprint(f(fss[0].Usage)), root(tmp) + " " + fmt.Sprint(f(fss[1].Usage))}
	}
	family("container_fs_inodes_free", "gauge", "Number of available Inodes", usage(func(u *nodefs.Usage) uint64 { return u.InodesFree })...)
	family("container_fs_inodes_total", "gauge", "Number of Inodes", usage(func(u *nodefs.Usage) uint64 { return u.Inodes })...)
	family("container_fs_io_current", "gauge", "Number of I/Os currently in progress", root(disk)+" 3", root(tmp)+" 0")
	family("container_fs_io_time_seconds_total", "counter", "Cumulative count of seconds spent doing I/Os", root(disk)+" 0.000381088", root(tmp)+" 0")
	family("container_fs_io_time_weighted_seconds_total", "counter", "Cumulative weighted I/O time in seconds", root(disk)+" 0.004567971", root(tmp)+" 0")
	family("container_fs_limit_bytes", "gauge", "Number of bytes that can be consumed by the container on this filesystem.", usage(func(u *nodefs.Usage) uint64 { return u.Capacity })...)
	family("container_fs_read_seconds_total", "counter", "Cumulative count of seconds spent reading", root(disk)+" 0.00271669", root(tmp)+" 0")
	family("container_fs_reads_merged_total", "counter", "Cumulative count of reads merged", root(disk)+" 155647", root(tmp)+" 0")
	family("container_fs_reads_total", "counter", "Cumulative count of reads completed", root("/dev/sda")+" 1", root("")+" 1", root(disk)+" 2.081619e+06", root(tmp)+" 0")
	family("container_fs_sector_reads_total", "counter", "Cumulative count of sector reads completed", root(disk)+" 6.3510218e+07", root(tmp)+" 0")
	family("container_fs_sector_writes_total", "counter", "Cumulative count of sector writes completed", root(disk)+" 1.43380432e+08", root(tmp)+" 0")
	family("container_fs_usage_bytes", "gauge", "Number of bytes that are consumed by the container on this filesystem.", usage((*nodefs.Usage).Used)...)
	family("container_fs_write_seconds_total", "counter", "Cumulative count of seconds spent writing", root(disk)+" 0.001710156", root(tmp)+" 0")
	family("container_fs_writes_merged_total", "counter", "Cumulative count of writes merged", root(disk)+" 996954", root(tmp)+" 0")
	family("container_fs_writes_total", "counter", "Cumulative count of writes completed", root("/dev/sda")+" 2", root("")+" 0", root(disk)+" 955730", root(tmp)+" 0")
	assertCAdvisor(t, n, want.String(), filesystemFamilies...)
}

// Without the host's root filesystem, the disks' counters are served and
// the usage families are not.
func TestNodeFilesystemsWithoutHostRoot(t *testing.T) {
	n := newNode(t)
	withFilesystems(t, n, "")
	m := NewCAdvisor(n.c)
	var direct strings.Builder
	require.NoError(t, m.WriteText(&direct))
	got := parsed(t, direct.String())
	for _, name := range []string{"container_fs_inodes_free", "container_fs_inodes_total", "container_fs_limit_bytes", "container_fs_usage_bytes"} {
		assert.NotContains(t, got, name)
	}
	assert.Len(t, got["container_fs_sector_reads_total"], 2+2, "help, type and the two filesystems' series")
	assert.Equal(t, 2, testutil.CollectAndCount(m, "container_fs_sector_reads_total"))
}

// A failed reading of /proc/diskstats is counted, and the filesystems'
// usage is still served.
func TestNodeFilesystemFailureIsCounted(t *testing.T) {
	n := newNode(t)
	proc := withFilesystems(t, n, "/")
	require.NoError(t, os.Remove(filepath.Join(proc, "diskstats")))
	snap := n.c.Snapshot()
	assert.Len(t, snap.Filesystems, 2)
	assert.Equal(t, 1.0, testutil.ToFloat64(n.c.errors.WithLabelValues(ReasonFilesystem)))
}
