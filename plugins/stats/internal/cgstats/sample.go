package cgstats

import "time"

// Sample is one cgroup's usage and limits at one moment, in cAdvisor's
// terms. A nil group was not readable (or its controller is absent) and is
// not reported.
type Sample struct {
	CPU      *CPU
	Memory   *Memory
	Pids     *Pids
	Spec     Spec
	CPUSet   *CPUSet
	Pressure Pressure
	// BlkIO is the I/O the cgroup did per block device; empty where the
	// kernel counts none (the v2 root cgroup, no I/O yet).
	BlkIO []DeviceIO
	// SpecAt is when the CPU spec and the cpuset were read.
	SpecAt time.Time
	// MaxOpenFiles is the soft limit of open files of the cgroup's first
	// process (read with the processes; pid 1 for the root cgroup), -1
	// when unlimited; nil without Options.Proc or a process. Reused with
	// the spec.
	MaxOpenFiles *int64
	// Created is when the cgroup was created (Reader.Created); Read leaves
	// it zero, the caller sets it where it serves it (the root and pods).
	Created time.Time
}

// CPU is cumulative CPU time, in nanoseconds, and CFS throttling.
type CPU struct {
	UsageNs, UserNs, SystemNs uint64
	Periods, ThrottledPeriods uint64
	ThrottledNs               uint64
	// BurstPeriods and BurstNs are v2's cpu.stat nr_bursts and burst_usec;
	// 0 on v1, whose cpu.stat runc (so cAdvisor) does not read them from.
	BurstPeriods, BurstNs uint64
}

// Memory is in bytes, except the counters Failcnt and OOMKills.
type Memory struct {
	Usage    uint64 `json:"usageBytes"`
	MaxUsage uint64 `json:"maxUsageBytes"`
	// WorkingSet is Usage minus the inactive file cache, clamped at 0: what
	// the kubelet evicts on and metrics-server reports.
	WorkingSet uint64 `json:"workingSetBytes"`
	RSS        uint64 `json:"rssBytes"`
	Cache      uint64 `json:"cacheBytes"`
	MappedFile uint64 `json:"mappedFileBytes"`
	Swap       uint64 `json:"swapBytes"`
	// Failcnt is how often usage hit the limit (v1 memory.failcnt, v2
	// memory.events max).
	Failcnt uint64 `json:"failcnt"`
	// OOMKills counts processes the OOM killer killed in this cgroup (v1
	// memory.oom_control oom_kill, v2 memory.events oom_kill).
	OOMKills uint64 `json:"oomKills"`

	// The rest only cAdvisor's /metrics/cadvisor serves, with cAdvisor's
	// values: what runc's parsers give it, 0 where they give nothing.
	// KernelUsage is v1's memory.kmem.usage_in_bytes (0 on v2).
	// ActiveFile and InactiveFile are memory.stat (v1 total_)active_file
	// and (total_)inactive_file; Pgfault and Pgmajfault its pgfault and
	// pgmajfault (on v1 the cgroup's own, not total_).
	KernelUsage, ActiveFile, InactiveFile, Pgfault, Pgmajfault uint64 `json:"-"`
	// v2 only: memory.events high and max, memory.stat file_dirty,
	// file_writeback, pgscan, pgsteal.
	EventsHigh, EventsMax, FileDirty, FileWriteback, Pgscan, Pgsteal uint64 `json:"-"`
	// Refaults are read from memory.stat by the plugin itself (see
	// ParseRefaults).
	Refaults Refaults `json:"-"`
}

// Pids are the cgroup's processes and threads (tasks).
type Pids struct {
	Processes uint64 `json:"processes"`
	Threads   uint64 `json:"threads"`
	// ThreadsMax is the pids limit, 0 when unlimited.
	ThreadsMax uint64 `json:"threadsMax"`
	// FDs and Sockets are the open files of the processes (not the
	// descendant cgroups'), and how many are sockets, if FDsRead: with
	// Options.Proc, where every process's files could be listed.
	FDs, Sockets uint64 `json:"-"`
	FDsRead      bool   `json:"-"`
}

// Spec are the cgroup's CPU and memory limits, as cAdvisor reports them.
type Spec struct {
	HasCPU bool `json:"-"`
	// CPUShares is cpu.shares (v1), or cpu.weight converted to shares (v2).
	CPUShares uint64 `json:"cpuShares,omitempty"`
	// CPUQuota is in microseconds per CPUPeriod; 0 when unlimited.
	CPUQuota  uint64 `json:"cpuQuotaMicros,omitempty"`
	CPUPeriod uint64 `json:"cpuPeriodMicros,omitempty"`
	HasMemory bool   `json:"-"`
	// MemoryLimit is in bytes; 0 when unlimited.
	MemoryLimit uint64 `json:"memoryLimitBytes,omitempty"`
	// MemorySwapLimit (v1 memory.memsw.limit_in_bytes, memory plus swap;
	// v2 memory.swap.max) and MemoryReservation (v1
	// memory.soft_limit_in_bytes, v2 memory.min) are in bytes, 0 when
	// unlimited or absent, as cAdvisor reports them. They change only with
	// an update, and are read with the CPU spec.
	MemorySwapLimit   uint64 `json:"memorySwapLimitBytes,omitempty"`
	MemoryReservation uint64 `json:"memoryReservationBytes,omitempty"`
	// MemorySwapLimited says MemorySwapLimit is a limit (v2 memory.swap.max
	// 0 without swap: the kubelet's NoSwap), not "max" or unlimited: the
	// kubelet serves container_swap_limit_bytes only then.
	MemorySwapLimited bool `json:"-"`
}

// CPUSet is where the cgroup may run: kernel list syntax.
type CPUSet struct {
	CPUs, Mems string
}

// Pressure is the cgroup's PSI, where the kernel has it.
type Pressure struct {
	CPU, Memory, IO *PSI
}

// PSI are the cumulative stall times of one resource, in microseconds:
// Some is time at least one task waited, Full time all tasks stalled.
type PSI struct {
	SomeUsec, FullUsec uint64
}

// DeviceIO is what a cgroup did on one block device, as cAdvisor's
// DiskIo: bytes and operations by kind, in the kernel's order (v1 Read,
// Write, Sync, Async, Discard, Total; v2 Read, Write).
type DeviceIO struct {
	Major, Minor uint64
	// Device is /dev/<name> of a disk of the node, as cAdvisor names it;
	// empty for other devices (loop, ram, sr).
	Device     string
	Bytes, IOs []OpCount
	// Cost is what blk-iocost charged the cgroup on the device (v2 only);
	// nil where the device has no iocost.
	Cost *IOCost
}

// IOCost are v2 io.stat's blk-iocost counters, in microseconds: cost.usage,
// cost.wait, cost.indebt and cost.indelay.
type IOCost struct {
	UsageUsec, WaitUsec, IndebtUsec, IndelayUsec uint64
}

// OpCount is one kind of operation and its cumulative count.
type OpCount struct {
	Op    string
	Value uint64
}

// Op returns the count of op, and whether the device has it.
func Op(counts []OpCount, op string) (uint64, bool) {
	for _, c := range counts {
		if c.Op == op {
			return c.Value, true
		}
	}
	return 0, false
}
