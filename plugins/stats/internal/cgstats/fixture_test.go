package cgstats

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// files are a fixture tree: path below the cgroup root -> content.
type files map[string]string

func (f files) write(t *testing.T, root string) {
	t.Helper()
	for path, content := range f {
		full := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

func (f files) with(changes files, without ...string) files {
	out := maps.Clone(f)
	maps.Copy(out, changes)
	for _, k := range without {
		delete(out, k)
	}
	return out
}

// readTime is when the fixture readers read.
var readTime = time.Unix(1_700_000_000, 0)

const container = "/kubepods/burstable/pod0d3e/ctr1"

// The v1 files of container, in the kernel's formats, as recorded on a
// hybrid 6.x host. Values: 5 s of CPU (3.5 s user, 1.5 s system at 100
// ticks/s), 200 MiB used of which 50 MiB inactive file, memsw 210 MiB.
func v1Files(name string) files {
	return files{
		"cpuacct/cpuacct.usage":                              "0\n", // the hierarchy marker Detect looks for
		"memory/memory.memsw.usage_in_bytes":                 "0\n", // swap accounting on (OptionalSwap looks at the root)
		"cpuacct" + name + "/cpuacct.usage":                  "5000000000\n",
		"cpuacct" + name + "/cpuacct.stat":                   "user 350\nsystem 150\n",
		"cpuacct" + name + "/cpuacct.usage_percpu":           "2500000000 2500000000 \n",
		"cpu" + name + "/cpu.stat":                           "nr_periods 40\nnr_throttled 7\nthrottled_time 123000000\nnr_bursts 0\nburst_time 0\n",
		"cpu" + name + "/cpu.shares":                         "512\n",
		"cpu" + name + "/cpu.cfs_quota_us":                   "50000\n",
		"cpu" + name + "/cpu.cfs_period_us":                  "100000\n",
		"memory" + name + "/memory.stat":                     v1MemoryStat,
		"memory" + name + "/memory.oom_control":              "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
		"memory" + name + "/memory.usage_in_bytes":           "209715200\n",
		"memory" + name + "/memory.max_usage_in_bytes":       "262144000\n",
		"memory" + name + "/memory.failcnt":                  "9\n",
		"memory" + name + "/memory.limit_in_bytes":           "268435456\n",
		"memory" + name + "/memory.memsw.usage_in_bytes":     "220200960\n",
		"memory" + name + "/memory.memsw.max_usage_in_bytes": "220200960\n",
		"memory" + name + "/memory.memsw.failcnt":            "0\n",
		"memory" + name + "/memory.memsw.limit_in_bytes":     "536870912\n",
		"memory" + name + "/memory.soft_limit_in_bytes":      "134217728\n",
		"memory" + name + "/memory.kmem.usage_in_bytes":      "3145728\n",
		"memory" + name + "/cgroup.procs":                    "101\n102\n",
		"pids" + name + "/pids.current":                      "5\n",
		"pids" + name + "/pids.max":                          "max\n",
		"cpuset" + name + "/cpuset.cpus":                     "0-1\n",
		"cpuset" + name + "/cpuset.mems":                     "0\n",
		// BFQ's files count nothing (no device uses BFQ), so the throttling
		// layer's count, as on these hosts.
		"blkio" + name + "/blkio.bfq.io_serviced_recursive":           "Total 0\n",
		"blkio" + name + "/blkio.bfq.io_service_bytes_recursive":      "Total 0\n",
		"blkio" + name + "/blkio.throttle.io_serviced_recursive":      v1Serviced,
		"blkio" + name + "/blkio.throttle.io_service_bytes_recursive": v1ServiceBytes,
	}
}

// A disk (8:0) and a loop device (7:0): 4000 KiB read in 100 reads and
// 1 MiB written in 20 writes on the disk, 8 KiB read twice on the loop.
const (
	v1Serviced = `8:0 Read 100
8:0 Write 20
8:0 Sync 120
8:0 Async 0
8:0 Discard 0
8:0 Total 120
7:0 Read 2
7:0 Write 0
7:0 Sync 2
7:0 Async 0
7:0 Discard 0
7:0 Total 2
Total 122
`
	v1ServiceBytes = `8:0 Read 4096000
8:0 Write 1048576
8:0 Sync 5144576
8:0 Async 0
8:0 Discard 0
8:0 Total 5144576
7:0 Read 8192
7:0 Write 0
7:0 Sync 8192
7:0 Async 0
7:0 Discard 0
7:0 Total 8192
Total 5152768
`
)

// sysBlock is the fixture host's /sys/block: a disk, a loop device and a
// hidden NVMe path, which cAdvisor leaves unnamed.
var sysBlock = files{
	"sda/dev":          "8:0\n",
	"loop0/dev":        "7:0\n",
	"nvme0c0n1/dev":    "259:1\n",
	"nvme0c0n1/hidden": "1\n",
}

const v1MemoryStat = `cache 62914560
rss 136314880
rss_huge 0
shmem 0
mapped_file 4194304
dirty 0
writeback 0
pgpgin 100
pgpgout 10
pgfault 1000
pgmajfault 1
inactive_anon 0
active_anon 136314880
inactive_file 52428800
active_file 10485760
unevictable 0
hierarchical_memory_limit 268435456
hierarchical_memsw_limit 9223372036854771712
total_cache 62914560
total_rss 136314880
total_rss_huge 0
total_shmem 0
total_mapped_file 4194304
total_dirty 0
total_writeback 0
total_pgpgin 100
total_pgpgout 10
total_pgfault 1000
total_pgmajfault 1
total_inactive_anon 0
total_active_anon 136314880
total_inactive_file 52428800
total_active_file 10485760
total_unevictable 0
workingset_refault_anon 7
workingset_refault_file 70
total_workingset_refault_anon 17
total_workingset_refault_file 170
`

// The hybrid host's controller-less v2 side: PSI only.
func unifiedFiles(name string) files {
	return files{
		"unified/cgroup.controllers":          "",
		"unified" + name + "/cpu.stat":        "usage_usec 5000000\nuser_usec 3500000\nsystem_usec 1500000\n",
		"unified" + name + "/cpu.pressure":    "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
		"unified" + name + "/memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=300\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200\n",
		"unified" + name + "/io.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=40000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30000\n",
	}
}

// The v2 files of container with the same usage as v1Files.
func v2Files(name string) files {
	d := name[1:] + "/"
	return files{
		"cgroup.controllers":        "cpuset cpu io memory pids\n",
		d + "cpu.stat":              "usage_usec 5000000\nuser_usec 3500000\nsystem_usec 1500000\nnr_periods 40\nnr_throttled 7\nthrottled_usec 123000\nnr_bursts 6\nburst_usec 7000\n",
		d + "cpu.max":               "50000 100000\n",
		d + "cpu.weight":            "20\n",
		d + "cpu.pressure":          "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
		d + "memory.current":        "209715200\n",
		d + "memory.max":            "268435456\n",
		d + "memory.peak":           "262144000\n",
		d + "memory.swap.current":   "10485760\n",
		d + "memory.stat":           v2MemoryStatFile,
		d + "memory.events":         "low 0\nhigh 2\nmax 9\noom 4\noom_kill 3\noom_group_kill 0\n",
		d + "memory.pressure":       "some avg10=0.00 avg60=0.00 avg300=0.00 total=300\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200\n",
		d + "io.pressure":           "some avg10=0.00 avg60=0.00 avg300=0.00 total=40000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30000\n",
		d + "io.stat":               "8:0 rbytes=4096000 wbytes=1048576 rios=100 wios=20 dbytes=0 dios=0\n7:0 rbytes=8192 wbytes=0 rios=2 wios=0 dbytes=0 dios=0\n",
		d + "memory.swap.max":       "536870912\n",
		d + "memory.min":            "134217728\n",
		d + "pids.current":          "5\n",
		d + "pids.max":              "max\n",
		d + "cgroup.procs":          "101\n102\n",
		d + "cpuset.cpus.effective": "0-1\n",
		d + "cpuset.mems.effective": "0\n",
	}
}

// v2MemoryStatFile holds what v1MemoryStat does, and v2's own keys.
const v2MemoryStatFile = `anon 136314880
file 62914560
file_mapped 4194304
file_dirty 8192
file_writeback 4096
inactive_file 52428800
active_file 10485760
pgscan 300
pgsteal 200
pgfault 1000
pgmajfault 1
workingset_refault 77
workingset_refault_anon 7
workingset_refault_file 70
`

// The root cgroup of a v2 host: no memory.current, memory.max,
// memory.events, pids.* or cpu.max there; memory.stat and PSI are.
// inactive_file is 512 MiB.
func v2RootFiles() files {
	return files{
		"cgroup.controllers":    "cpuset cpu io memory pids\n",
		"cpu.stat":              "usage_usec 100000000\nuser_usec 60000000\nsystem_usec 40000000\n",
		"memory.stat":           "anon 1073741824\nfile 805306368\nfile_mapped 67108864\ninactive_file 536870912\nactive_file 268435456\nworkingset_refault_anon 3\nworkingset_refault_file 30\n",
		"cpu.pressure":          "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
		"memory.pressure":       "some avg10=0.00 avg60=0.00 avg300=0.00 total=300\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=200\n",
		"io.pressure":           "some avg10=0.00 avg60=0.00 avg300=0.00 total=40000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30000\n",
		"cgroup.procs":          "1\n",
		"cpuset.cpus.effective": "0-3\n",
		"cpuset.mems.effective": "0\n",
	}
}

// hostMeminfo is the fixture host's /proc/meminfo: 8 GiB of which 6 GiB
// free (2 GiB used), 1 GiB of swap of which 768 MiB free.
const hostMeminfo = `MemTotal:        8388608 kB
MemFree:         6291456 kB
MemAvailable:    7340032 kB
Buffers:           10240 kB
Cached:           786432 kB
SwapCached:            0 kB
SwapTotal:       1048576 kB
SwapFree:         786432 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`

// readerFor reads tree through a Reader whose host meminfo is hostMeminfo,
// in a file of its own (the returned reader's opts.Meminfo).
func readerFor(t *testing.T, tree files) (*Reader, string) {
	t.Helper()
	root := t.TempDir()
	tree.write(t, root)
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	require.NoError(t, os.WriteFile(meminfo, []byte(hostMeminfo), 0o644))
	blocks := t.TempDir()
	sysBlock.write(t, blocks)
	layout, err := Detect(root)
	require.NoError(t, err)
	r, err := NewReader(layout, Options{Swap: true, SpecMaxAge: DefaultSpecMaxAge, Meminfo: meminfo, SysBlock: blocks})
	require.NoError(t, err)
	r.now = func() time.Time { return readTime }
	return r, root
}
