package cgstats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wantSample is what both v1Files and v2Files hold.
func wantSample(shares uint64) Sample {
	return Sample{
		CPU: &CPU{UsageNs: 5e9, UserNs: 3.5e9, SystemNs: 1.5e9, Periods: 40, ThrottledPeriods: 7, ThrottledNs: 123e6},
		Memory: &Memory{Usage: 200 << 20, MaxUsage: 250 << 20, WorkingSet: 150 << 20, RSS: 130 << 20, Cache: 60 << 20,
			MappedFile: 4 << 20, Swap: 10 << 20, Failcnt: 9, OOMKills: 3,
			ActiveFile: 10 << 20, InactiveFile: 50 << 20, Pgfault: 1000, Pgmajfault: 1, Refaults: Refaults{Anon: 7, File: 70}},
		Pids: &Pids{Processes: 2, Threads: 5, ThreadsMax: 0},
		Spec: Spec{HasCPU: true, CPUShares: shares, CPUQuota: 50000, CPUPeriod: 100000, HasMemory: true, MemoryLimit: 256 << 20,
			MemorySwapLimit: 512 << 20, MemoryReservation: 128 << 20, MemorySwapLimited: true},
		CPUSet: &CPUSet{CPUs: "0-1", Mems: "0"},
		SpecAt: readTime,
	}
}

// wantV1BlkIO is what v1Files' blkio files hold: every operation the
// kernel counts, the disk named, the loop device not (as cAdvisor).
var wantV1BlkIO = []DeviceIO{
	{Major: 8, Minor: 0, Device: "/dev/sda",
		Bytes: []OpCount{{"Read", 4096000}, {"Write", 1048576}, {"Sync", 5144576}, {"Async", 0}, {"Discard", 0}, {"Total", 5144576}},
		IOs:   []OpCount{{"Read", 100}, {"Write", 20}, {"Sync", 120}, {"Async", 0}, {"Discard", 0}, {"Total", 120}}},
	{Major: 7, Minor: 0,
		Bytes: []OpCount{{"Read", 8192}, {"Write", 0}, {"Sync", 8192}, {"Async", 0}, {"Discard", 0}, {"Total", 8192}},
		IOs:   []OpCount{{"Read", 2}, {"Write", 0}, {"Sync", 2}, {"Async", 0}, {"Discard", 0}, {"Total", 2}}},
}

// wantV2BlkIO is v2Files' io.stat in the same terms: reads and writes.
var wantV2BlkIO = []DeviceIO{
	{Major: 8, Minor: 0, Device: "/dev/sda", Bytes: []OpCount{{"Read", 4096000}, {"Write", 1048576}}, IOs: []OpCount{{"Read", 100}, {"Write", 20}}},
	{Major: 7, Minor: 0, Bytes: []OpCount{{"Read", 8192}, {"Write", 0}}, IOs: []OpCount{{"Read", 2}, {"Write", 0}}},
}

var wantPressure = Pressure{CPU: &PSI{SomeUsec: 2e6, FullUsec: 1e6}, Memory: &PSI{SomeUsec: 300, FullUsec: 200}, IO: &PSI{SomeUsec: 40000, FullUsec: 30000}}

func TestReadsEveryLayout(t *testing.T) {
	v1 := wantSample(512)
	v1.BlkIO = wantV1BlkIO
	v1.Memory.KernelUsage = 3 << 20
	hybrid := v1
	hybrid.Pressure = wantPressure
	v2 := wantSample(500) // cpu.weight 20 is 500 shares: 2 + (20-1)*262142/9999
	v2.Pressure = wantPressure
	v2.BlkIO = wantV2BlkIO
	v2.CPU.BurstPeriods, v2.CPU.BurstNs = 6, 7e6
	v2.Memory.EventsHigh, v2.Memory.EventsMax = 2, 9
	v2.Memory.FileDirty, v2.Memory.FileWriteback, v2.Memory.Pgscan, v2.Memory.Pgsteal = 8192, 4096, 300, 200
	for _, tc := range []struct {
		name string
		tree files
		mode Mode
		want Sample
	}{
		{"v1", v1Files(container), ModeV1, v1},
		{"hybrid", v1Files(container).with(unifiedFiles(container)), ModeHybrid, hybrid},
		{"v2", v2Files(container), ModeV2, v2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			assert.Equal(t, tc.mode, r.Layout().Mode)
			got, err := r.Read(container, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWorkingSetIsClampedAtZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree files
	}{
		{"v1", v1Files(container).with(files{"memory" + container + "/memory.usage_in_bytes": "1048576\n"})},
		{"v2", v2Files(container).with(files{container[1:] + "/memory.current": "1048576\n"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			got, err := r.Read(container, nil)
			require.NoError(t, err)
			require.NotNil(t, got.Memory)
			assert.Equal(t, uint64(1<<20), got.Memory.Usage)
			assert.Zero(t, got.Memory.WorkingSet, "usage 1 MiB below 50 MiB of inactive file")
		})
	}
}

// A counter that goes down (the cgroup was recreated under the same name)
// is reported as read: Prometheus' rate() handles the reset.
func TestCountersThatResetAreReportedAsRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tree  files
		reset files
	}{
		{"v1", v1Files(container), files{"cpuacct" + container + "/cpuacct.usage": "1000\n",
			"memory" + container + "/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}},
		{"v2", v2Files(container), files{container[1:] + "/cpu.stat": "usage_usec 1\nuser_usec 1\nsystem_usec 0\n",
			container[1:] + "/memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, root := readerFor(t, tc.tree)
			before, err := r.Read(container, nil)
			require.NoError(t, err)
			tc.reset.write(t, root)
			after, err := r.Read(container, nil)
			require.NoError(t, err)
			assert.Equal(t, uint64(5e9), before.CPU.UsageNs)
			assert.Equal(t, uint64(1000), after.CPU.UsageNs)
			assert.Equal(t, uint64(3), before.Memory.OOMKills)
			assert.Zero(t, after.Memory.OOMKills)
		})
	}
}

// Missing files leave their group out without an error: the kernel does
// not provide them there (pids in the root cgroup, PSI when disabled).
func TestMissingFilesLeaveTheirGroupOut(t *testing.T) {
	d := container[1:]
	for _, tc := range []struct {
		name  string
		tree  files
		check func(t *testing.T, s Sample)
	}{
		{"v1 no pids files", v1Files(container).with(nil, "pids"+container+"/pids.current", "pids"+container+"/pids.max"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pids); assert.NotNil(t, s.Memory) }},
		{"v1 no oom_control", v1Files(container).with(nil, "memory"+container+"/memory.oom_control"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.Memory, "memory is incomplete"); assert.NotNil(t, s.CPU) }},
		{"v1 no kernel memory accounting", v1Files(container).with(nil, "memory"+container+"/memory.kmem.usage_in_bytes"),
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Memory.KernelUsage)
				assert.Equal(t, uint64(200<<20), s.Memory.Usage)
			}},
		{"v1 no cpuset", v1Files(container).with(nil, "cpuset"+container+"/cpuset.cpus", "cpuset"+container+"/cpuset.mems"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.CPUSet); assert.NotNil(t, s.CPU) }},
		{"hybrid no memory.pressure", v1Files(container).with(unifiedFiles(container)).with(nil, "unified"+container+"/memory.pressure"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pressure.Memory); assert.NotNil(t, s.Pressure.CPU) }},
		{"v2 no memory controller", v2Files(container).with(nil, d+"/memory.current", d+"/memory.stat"),
			func(t *testing.T, s Sample) {
				assert.Nil(t, s.Memory)
				assert.False(t, s.Spec.HasMemory)
				assert.NotNil(t, s.CPU)
			}},
		{"v2 no cpu.max", v2Files(container).with(nil, d+"/cpu.max"),
			func(t *testing.T, s Sample) { assert.False(t, s.Spec.HasCPU); assert.NotNil(t, s.CPU) }},
		{"v1 no cgroup.procs", v1Files(container).with(nil, "memory"+container+"/cgroup.procs"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pids, "no process count"); assert.NotNil(t, s.Memory) }},
		{"v2 no cgroup.procs", v2Files(container).with(nil, d+"/cgroup.procs"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pids, "no process count"); assert.NotNil(t, s.Memory) }},
		{"v2 no PSI", v2Files(container).with(nil, d+"/cpu.pressure", d+"/memory.pressure", d+"/io.pressure"),
			func(t *testing.T, s Sample) {
				assert.Equal(t, Pressure{}, s.Pressure)
				assert.Equal(t, wantV2BlkIO, s.BlkIO, "io.stat is read without io.pressure")
			}},
		{"v2 no io controller", v2Files(container).with(nil, d+"/io.stat"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.BlkIO); assert.NotNil(t, s.Pressure.IO) }},
		{"v1 no blkio controller", v1Files(container).with(nil, "blkio"+container+"/blkio.throttle.io_serviced_recursive",
			"blkio"+container+"/blkio.throttle.io_service_bytes_recursive", "blkio"+container+"/blkio.bfq.io_serviced_recursive",
			"blkio"+container+"/blkio.bfq.io_service_bytes_recursive"),
			func(t *testing.T, s Sample) { assert.Nil(t, s.BlkIO); assert.NotNil(t, s.Memory) }},
		{"v1 without swap accounting or soft limit", v1Files(container).with(nil, "memory/memory.memsw.usage_in_bytes",
			"memory"+container+"/memory.memsw.usage_in_bytes", "memory"+container+"/memory.memsw.max_usage_in_bytes",
			"memory"+container+"/memory.memsw.failcnt", "memory"+container+"/memory.memsw.limit_in_bytes",
			"memory"+container+"/memory.soft_limit_in_bytes"),
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemorySwapLimit)
				assert.True(t, s.Spec.MemorySwapLimited, "a missing file is a limit of 0, as cAdvisor reads it")
				assert.Zero(t, s.Spec.MemoryReservation)
				assert.True(t, s.Spec.HasMemory)
			}},
		{"v2 unlimited swap, no memory.min", v2Files(container).with(files{d + "/memory.swap.max": "max\n"}, d+"/memory.min"),
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemorySwapLimit)
				assert.False(t, s.Spec.MemorySwapLimited)
				assert.Zero(t, s.Spec.MemoryReservation)
				assert.Equal(t, uint64(256<<20), s.Spec.MemoryLimit)
			}},
		{"v2 no swap (the kubelet's NoSwap)", v2Files(container).with(files{d + "/memory.swap.max": "0\n"}),
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemorySwapLimit)
				assert.True(t, s.Spec.MemorySwapLimited, "0 is a limit")
			}},
		{"v1 unlimited memsw", v1Files(container).with(files{"memory" + container + "/memory.memsw.limit_in_bytes": "9223372036854771712\n"}),
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemorySwapLimit)
				assert.False(t, s.Spec.MemorySwapLimited)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			got, err := r.Read(container, nil)
			require.NoError(t, err)
			tc.check(t, got)
		})
	}
}

// A malformed file fails its group, with an error naming the file; the
// other groups are still read.
func TestMalformedFilesFailOnlyTheirGroup(t *testing.T) {
	d := container[1:]
	for _, tc := range []struct {
		name    string
		tree    files
		wantErr string
		check   func(t *testing.T, s Sample)
	}{
		{"v1 cpuacct.usage", v1Files(container).with(files{"cpuacct" + container + "/cpuacct.usage": "many\n"}), "many",
			func(t *testing.T, s Sample) { assert.Nil(t, s.CPU); assert.NotNil(t, s.Memory) }},
		{"v1 memory.stat", v1Files(container).with(files{"memory" + container + "/memory.stat": "cache\n"}), "memory",
			func(t *testing.T, s Sample) { assert.Nil(t, s.Memory); assert.NotNil(t, s.CPU) }},
		{"v1 memory.kmem.usage_in_bytes", v1Files(container).with(files{"memory" + container + "/memory.kmem.usage_in_bytes": "-\n"}),
			`memory.kmem.usage_in_bytes: "-" is not an integer`,
			func(t *testing.T, s Sample) { assert.Nil(t, s.Memory); assert.NotNil(t, s.CPU) }},
		{"v1 cpu.shares", v1Files(container).with(files{"cpu" + container + "/cpu.shares": "lots\n"}), "cpu.shares",
			func(t *testing.T, s Sample) { assert.False(t, s.Spec.HasCPU); assert.NotNil(t, s.CPU) }},
		{"v2 cpu.stat", v2Files(container).with(files{d + "/cpu.stat": "usage_usec x\n"}), "cpu.stat",
			func(t *testing.T, s Sample) { assert.Nil(t, s.CPU); assert.NotNil(t, s.Memory) }},
		{"v2 memory.stat", v2Files(container).with(files{d + "/memory.stat": "anon\n"}), "memory.stat",
			func(t *testing.T, s Sample) { assert.Nil(t, s.Memory); assert.NotNil(t, s.CPU) }},
		{"v1 cgroup.procs", v1Files(container).with(files{"memory" + container + "/cgroup.procs": "101\nabc\n"}), `memory` + container + `/cgroup.procs: line "abc"`,
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pids); assert.NotNil(t, s.Memory) }},
		{"v2 cgroup.procs", v2Files(container).with(files{d + "/cgroup.procs": "-1\n"}), `cgroup.procs: line "-1", expected a process id`,
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pids); assert.NotNil(t, s.Memory) }},
		{"v2 cpu.max", v2Files(container).with(files{d + "/cpu.max": "half\n"}), `cpu.max "half"`,
			func(t *testing.T, s Sample) { assert.False(t, s.Spec.HasCPU); assert.NotNil(t, s.Memory) }},
		{"hybrid memory.pressure", v1Files(container).with(unifiedFiles(container)).with(files{"unified" + container + "/memory.pressure": "some avg10=1\n"}), "total=",
			func(t *testing.T, s Sample) { assert.Nil(t, s.Pressure.Memory); assert.NotNil(t, s.Memory) }},
		{"v1 blkio", v1Files(container).with(files{"blkio" + container + "/blkio.throttle.io_service_bytes_recursive": "8:0 Read\n"}),
			`blkio.throttle.io_service_bytes_recursive: line "8:0 Read\n", expected "<major>:<minor> <operation> <value>"`,
			func(t *testing.T, s Sample) { assert.Nil(t, s.BlkIO); assert.NotNil(t, s.Memory) }},
		{"v1 blkio device", v1Files(container).with(files{"blkio" + container + "/blkio.throttle.io_serviced_recursive": "sda Read 1\n"}),
			`blkio.throttle.io_serviced_recursive: line "sda Read 1\n"`,
			func(t *testing.T, s Sample) { assert.Nil(t, s.BlkIO); assert.NotNil(t, s.Memory) }},
		{"v1 memory.soft_limit_in_bytes", v1Files(container).with(files{"memory" + container + "/memory.soft_limit_in_bytes": "-\n"}),
			`memory.soft_limit_in_bytes: "-", expected "max" or a number of bytes`,
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemoryReservation)
				assert.True(t, s.Spec.HasMemory)
			}},
		{"v2 memory.swap.max", v2Files(container).with(files{d + "/memory.swap.max": "lots\n"}), `memory.swap.max: "lots"`,
			func(t *testing.T, s Sample) {
				assert.Zero(t, s.Spec.MemorySwapLimit)
				assert.False(t, s.Spec.MemorySwapLimited, "unread")
				assert.True(t, s.Spec.HasMemory)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			got, err := r.Read(container, nil)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrNotFound)
			assert.ErrorContains(t, err, tc.wantErr)
			tc.check(t, got)
		})
	}
}

func TestUnreadableFileIsAnError(t *testing.T) {
	if os.Geteuid() == 0 {
		// root reads a mode-000 file; a directory in the file's place fails for everyone.
		t.Log("running as root: using a directory in place of the file")
	}
	r, root := readerFor(t, v2Files(container))
	path := filepath.Join(root, container[1:], "cpu.weight")
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o755))
	got, err := r.Read(container, nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "cpu.weight")
	assert.False(t, got.Spec.HasCPU)
	assert.NotNil(t, got.CPU)
}

func TestMissingCgroupIsNotFound(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree files
	}{
		{"v1", v1Files(container)},
		{"hybrid", v1Files(container).with(unifiedFiles(container))},
		{"v2", v2Files(container)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			_, err := r.Read("/kubepods/burstable/pod0d3e/gone", nil)
			assert.ErrorIs(t, err, ErrNotFound)
		})
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tree    files
		want    Mode
		unified string
	}{
		{"v1", files{"memory/memory.stat": ""}, ModeV1, ""},
		{"hybrid", files{"cpuacct/cpuacct.usage": "", "unified/cgroup.controllers": ""}, ModeHybrid, "unified"},
		{"v2", files{"cgroup.controllers": ""}, ModeV2, "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.tree.write(t, root)
			got, err := Detect(root)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Mode)
			if tc.unified != "" {
				assert.Equal(t, filepath.Join(root, tc.unified), got.Unified)
			} else {
				assert.Empty(t, got.Unified)
			}
		})
	}
	_, err := Detect(t.TempDir())
	assert.ErrorContains(t, err, "neither cgroup.controllers")
}

// The CPU spec and cpuset change only with an update: they are reused from
// the previous sample until it is SpecMaxAge old; the rest is read each time.
func TestSpecIsReusedUntilItIsOld(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tree   files
		shares uint64
		update files
	}{
		{"v1", v1Files(container), 2048, files{"cpu" + container + "/cpu.shares": "2048\n", "cpuset" + container + "/cpuset.cpus": "1\n",
			"cpuacct" + container + "/cpuacct.usage": "6000000000\n", "memory" + container + "/memory.limit_in_bytes": "134217728\n"}},
		// The kubelet's 2048 shares are weight 79, which is 2046 shares back.
		{"v2", v2Files(container), 2046, files{container[1:] + "/cpu.weight": "79\n", container[1:] + "/cpuset.cpus.effective": "1\n",
			container[1:] + "/cpu.stat": "usage_usec 6000000\n", container[1:] + "/memory.max": "134217728\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, root := readerFor(t, tc.tree)
			first, err := r.Read(container, nil)
			require.NoError(t, err)
			tc.update.write(t, root)

			r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge - time.Second) }
			young, err := r.Read(container, &first)
			require.NoError(t, err)
			assert.Equal(t, uint64(6e9), young.CPU.UsageNs, "usage is read every time")
			assert.Equal(t, uint64(128<<20), young.Spec.MemoryLimit, "the memory limit comes with the memory group")
			assert.Equal(t, first.Spec.CPUShares, young.Spec.CPUShares, "shares reused")
			assert.Equal(t, "0-1", young.CPUSet.CPUs, "cpuset reused")
			assert.Equal(t, readTime, young.SpecAt)

			r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge) }
			old, err := r.Read(container, &young)
			require.NoError(t, err)
			assert.Equal(t, tc.shares, old.Spec.CPUShares, "shares read again")
			assert.Equal(t, "1", old.CPUSet.CPUs, "cpuset read again")
		})
	}
}

// The root cgroup of a v2 host has no memory.current: its usage is
// MemTotal - MemFree of the host's meminfo (as runc's fs2 manager, so
// cAdvisor and the kubelet), its working set that minus the root
// memory.stat's inactive_file.
func TestV2RootMemoryComesFromMeminfo(t *testing.T) {
	const gib, mib = uint64(1 << 30), uint64(1 << 20)
	root := &Memory{Usage: 2 * gib, WorkingSet: 1536 * mib, RSS: gib, Cache: 768 * mib, MappedFile: 64 * mib, Swap: 256 * mib,
		ActiveFile: 256 * mib, InactiveFile: 512 * mib, Refaults: Refaults{Anon: 3, File: 30}}
	for _, tc := range []struct {
		name    string
		tree    files
		meminfo string
		want    *Memory
	}{
		{"usage from meminfo, breakdown from memory.stat", v2RootFiles(), hostMeminfo, root},
		{"working set clamped at 0", v2RootFiles().with(files{"memory.stat": "anon 0\ninactive_file 3221225472\n"}), hostMeminfo,
			&Memory{Usage: 2 * gib, Swap: 256 * mib, InactiveFile: 3 * gib}},
		{"no root memory.stat (old kernels): working set is the usage", v2RootFiles().with(nil, "memory.stat"), hostMeminfo,
			&Memory{Usage: 2 * gib, WorkingSet: 2 * gib, Swap: 256 * mib}},
		{"no swap", v2RootFiles(), "MemTotal: 8388608 kB\nMemFree: 6291456 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
			&Memory{Usage: 2 * gib, WorkingSet: 1536 * mib, RSS: gib, Cache: 768 * mib, MappedFile: 64 * mib, ActiveFile: 256 * mib, InactiveFile: 512 * mib,
				Refaults: Refaults{Anon: 3, File: 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			require.NoError(t, os.WriteFile(r.opts.Meminfo, []byte(tc.meminfo), 0o644))
			got, err := r.Read("/", nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Memory)
			assert.True(t, got.Spec.HasMemory)
			assert.Zero(t, got.Spec.MemoryLimit, "the root is unlimited")
			assert.Equal(t, &PSI{SomeUsec: 300, FullUsec: 200}, got.Pressure.Memory)
			assert.Equal(t, uint64(100e9), got.CPU.UsageNs)
			assert.Equal(t, &Pids{Processes: 1}, got.Pids, "no pids.current in the root: its own processes alone")
		})
	}
}

// A broken or missing meminfo fails the root's memory group alone, with an
// error naming the file; without a meminfo the root has no memory, as
// before. Other cgroups without memory.current never read meminfo.
func TestV2RootMemoryFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cgroup  string
		tree    files
		meminfo *string // nil: none configured; else written, "" removes the file
		wantErr []string
	}{
		{"malformed meminfo", "/", v2RootFiles(), ptr("MemTotal: 8388608 kB\nMemFree: lots kB\n"), []string{"meminfo", "MemFree", `"lots kB"`}},
		{"meminfo without MemTotal", "/", v2RootFiles(), ptr("MemFree: 1 kB\n"), []string{"no MemTotal line"}},
		{"meminfo missing", "/", v2RootFiles(), ptr(""), []string{"root cgroup memory", "no such file"}},
		{"no meminfo configured", "/", v2RootFiles(), nil, nil},
		{"not the root", container, v2Files(container).with(nil, container[1:]+"/memory.current"), ptr(hostMeminfo), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			switch {
			case tc.meminfo == nil:
				r.opts.Meminfo = ""
			case *tc.meminfo == "":
				require.NoError(t, os.Remove(r.opts.Meminfo))
			default:
				require.NoError(t, os.WriteFile(r.opts.Meminfo, []byte(*tc.meminfo), 0o644))
			}
			got, err := r.Read(tc.cgroup, nil)
			for _, want := range tc.wantErr {
				assert.ErrorContains(t, err, want)
			}
			if tc.wantErr == nil {
				require.NoError(t, err)
			}
			assert.Nil(t, got.Memory)
			assert.NotNil(t, got.CPU, "the other groups are read")
		})
	}
}

// On v1 and hybrid hosts the root cgroup has its v1 memory controller
// files: meminfo is not used there.
func TestV1RootMemoryComesFromTheController(t *testing.T) {
	// v1Files("") writes the root's files (over the layout markers).
	for _, tc := range []struct {
		name string
		tree files
	}{
		{"v1", v1Files("")},
		{"hybrid", v1Files("").with(unifiedFiles(""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			got, err := r.Read("/", nil)
			require.NoError(t, err)
			require.NotNil(t, got.Memory)
			assert.Equal(t, uint64(200<<20), got.Memory.Usage, "memory.usage_in_bytes, not MemTotal - MemFree")
			assert.Equal(t, uint64(150<<20), got.Memory.WorkingSet)
			assert.Equal(t, uint64(10<<20), got.Memory.Swap, "memsw - usage, not SwapTotal - SwapFree")
		})
	}
}

func ptr(s string) *string { return &s }

// v1's cpu.stat holds only the CFS counters, which are reported only for a
// cgroup with a quota: without one it is not read, whether the spec was
// just read or is reused.
func TestV1CPUStatIsReadOnlyWithAQuota(t *testing.T) {
	noCPUStat := []string{"cpu" + container + "/cpu.stat"}
	for _, tc := range []struct {
		name    string
		quota   string
		wantCPU bool
	}{
		{"no quota: cpu.stat not needed", "-1\n", true},
		{"quota: cpu.stat needed, the group is incomplete without it", "50000\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, v1Files(container).with(files{"cpu" + container + "/cpu.cfs_quota_us": tc.quota}, noCPUStat...))
			first, err := r.Read(container, nil)
			require.NoError(t, err)
			reused, err := r.Read(container, &first)
			require.NoError(t, err)
			for _, got := range []Sample{first, reused} {
				assert.True(t, got.Spec.HasCPU)
				if tc.wantCPU {
					require.NotNil(t, got.CPU)
					assert.Equal(t, uint64(5e9), got.CPU.UsageNs)
					assert.Zero(t, got.CPU.Periods)
				} else {
					assert.Nil(t, got.CPU)
				}
			}
		})
	}
}

// On v1 the counts come from the first pair of blkio files that counts
// anything, in runc's order (cAdvisor's stats): BFQ's when a device uses
// BFQ, else the throttling layer's, recursive, else not.
func TestV1BlkIOFilesInRuncsOrder(t *testing.T) {
	b := "blkio" + container + "/"
	for _, tc := range []struct {
		name      string
		tree      files
		wantBytes uint64 // of 8:0's Read
	}{
		{"throttle", v1Files(container), 4096000},
		{"BFQ counts", v1Files(container).with(files{b + "blkio.bfq.io_serviced_recursive": "8:0 Read 1\nTotal 1\n",
			b + "blkio.bfq.io_service_bytes_recursive": "8:0 Read 512\nTotal 512\n"}), 512},
		{"no BFQ files", v1Files(container).with(nil, b+"blkio.bfq.io_serviced_recursive", b+"blkio.bfq.io_service_bytes_recursive"), 4096000},
		{"non-recursive only", v1Files(container).with(files{b + "blkio.throttle.io_serviced": "8:0 Read 3\n",
			b + "blkio.throttle.io_service_bytes": "8:0 Read 1536\n"}, b+"blkio.throttle.io_serviced_recursive", b+"blkio.throttle.io_service_bytes_recursive"), 1536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := readerFor(t, tc.tree)
			got, err := r.Read(container, nil)
			require.NoError(t, err)
			require.NotEmpty(t, got.BlkIO)
			assert.Equal(t, "/dev/sda", got.BlkIO[0].Device)
			v, ok := Op(got.BlkIO[0].Bytes, "Read")
			assert.True(t, ok)
			assert.Equal(t, tc.wantBytes, v)
		})
	}
}

// A disk that appears later is named once the list is SpecMaxAge old:
// until then, its name is empty.
func TestNewDiskIsNamedAfterTheListAges(t *testing.T) {
	r, root := readerFor(t, v2Files(container))
	dm := files{container[1:] + "/io.stat": "253:0 rbytes=1 wbytes=2 rios=3 wios=4\n"}
	dm.write(t, root)
	first, err := r.Read(container, nil)
	require.NoError(t, err)
	require.Len(t, first.BlkIO, 1)
	assert.Empty(t, first.BlkIO[0].Device, "253:0 is not in /sys/block yet")

	files{"dm-0/dev": "253:0\n"}.write(t, r.names.sysBlock)
	r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge - time.Second) }
	young, err := r.Read(container, nil)
	require.NoError(t, err)
	assert.Empty(t, young.BlkIO[0].Device, "the list is reused while it is young")

	r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge) }
	old, err := r.Read(container, nil)
	require.NoError(t, err)
	assert.Equal(t, "/dev/dm-0", old.BlkIO[0].Device)
}

// The open files of a cgroup's processes are counted under the host's
// /proc, sockets apart; a process that exited counts none.
// The root cgroup has no pids.current: as cAdvisor's raw handler, its
// processes are those directly in it, from the cpu controller's
// cgroup.procs on v1 (here not the memory controller's two), with their
// open files, and it has no threads or limit.
func TestRootProcesses(t *testing.T) {
	proc := t.TempDir()
	fd := filepath.Join(proc, "1", "fd")
	require.NoError(t, os.MkdirAll(fd, 0o755))
	for name, target := range map[string]string{"0": "/dev/null", "1": "socket:[123]", "2": "pipe:[4]"} {
		require.NoError(t, os.Symlink(target, filepath.Join(fd, name)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "limits"), []byte(limits), 0o644))
	procs := "1\n101\n102\n" // 101 and 102 have no /proc entry: they exited
	v1Root := v1Files("").with(files{"cpu/cgroup.procs": procs}, "pids/pids.current", "pids/pids.max")
	for _, tc := range []struct {
		name string
		tree files
	}{
		{"v1", v1Root},
		{"hybrid", v1Root.with(unifiedFiles(""))},
		{"v2", v2RootFiles().with(files{"cgroup.procs": procs})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixture, _ := readerFor(t, tc.tree)
			r, err := NewReader(fixture.Layout(), Options{Proc: proc})
			require.NoError(t, err)
			got, err := r.Read("/", nil)
			require.NoError(t, err)
			assert.Equal(t, &Pids{Processes: 3, FDs: 3, Sockets: 1, FDsRead: true}, got.Pids)
		})
	}
	t.Run("no cgroup.procs", func(t *testing.T) {
		r, _ := readerFor(t, v1Root.with(nil, "cpu/cgroup.procs"))
		got, err := r.Read("/", nil)
		require.NoError(t, err)
		assert.Nil(t, got.Pids)
	})
	t.Run("malformed cgroup.procs", func(t *testing.T) {
		r, _ := readerFor(t, v2RootFiles().with(files{"cgroup.procs": "1\none\n"}))
		got, err := r.Read("/", nil)
		assert.ErrorContains(t, err, `root processes: reading `)
		assert.ErrorContains(t, err, `cgroup.procs: line "one", expected a process id`)
		assert.Nil(t, got.Pids)
		assert.NotNil(t, got.Memory, "the other groups are read")
	})
}

func TestOpenFilesOfTheProcesses(t *testing.T) {
	proc := t.TempDir()
	fd := filepath.Join(proc, "101", "fd")
	require.NoError(t, os.MkdirAll(fd, 0o755))
	for name, target := range map[string]string{"0": "/dev/null", "1": "socket:[123]", "2": "pipe:[4]", "3": "socket:[124]"} {
		require.NoError(t, os.Symlink(target, filepath.Join(fd, name)))
	}
	// 102 of cgroup.procs has no /proc entry: it exited.
	for _, tc := range []struct {
		name string
		tree files
	}{{"v1", v1Files(container)}, {"v2", v2Files(container)}} {
		t.Run(tc.name, func(t *testing.T) {
			fixture, _ := readerFor(t, tc.tree)
			r, err := NewReader(fixture.Layout(), Options{Proc: proc})
			require.NoError(t, err)
			got, err := r.Read(container, nil)
			require.NoError(t, err)
			require.NotNil(t, got.Pids)
			assert.Equal(t, Pids{Processes: 2, Threads: 5, FDs: 4, Sockets: 2, FDsRead: true}, *got.Pids)

			got, err = fixture.Read(container, nil)
			require.NoError(t, err)
			assert.Equal(t, Pids{Processes: 2, Threads: 5}, *got.Pids, "without Options.Proc")

			// 102's fds may not be listed: no counts, the processes still.
			require.NoError(t, os.WriteFile(filepath.Join(proc, "102"), nil, 0o644))
			t.Cleanup(func() { require.NoError(t, os.Remove(filepath.Join(proc, "102"))) })
			got, err = r.Read(container, nil)
			require.NoError(t, err)
			assert.Equal(t, Pids{Processes: 2, Threads: 5}, *got.Pids, "102's fds unreadable")
		})
	}
}

// Pid is the first process of a cgroup's cgroup.procs; a cgroup without a
// process or without the file is not found, a malformed file is an error
// naming it.
func TestPid(t *testing.T) {
	for _, mode := range []Mode{ModeV1, ModeV2} {
		t.Run(string(mode), func(t *testing.T) {
			root := t.TempDir()
			dir := root
			if mode == ModeV1 {
				dir = filepath.Join(root, "memory")
			}
			r := &Reader{layout: Layout{Mode: mode, Root: root, Unified: root}, v1: newV1Reader(root, false, "")}
			write := func(name, content string) {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, name, "cgroup.procs"), []byte(content), 0o644))
			}
			write("/pod/a", "4242\n4250\n")
			write("/pod/empty", "")
			write("/pod/bad", "pid\n")
			pid, err := r.Pid("/pod/a")
			require.NoError(t, err)
			assert.Equal(t, uint32(4242), pid)
			for _, name := range []string{"/pod/empty", "/pod/gone"} {
				_, err := r.Pid(name)
				assert.ErrorIs(t, err, ErrNotFound, name)
			}
			_, err = r.Pid("/pod/bad")
			assert.ErrorContains(t, err, filepath.Join(dir, "pod", "bad", "cgroup.procs"))
		})
	}
}
