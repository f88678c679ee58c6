package cgstats

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containerd/cgroups/v3/cgroup1"
	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
)

// v1Reader reads the v1 controllers, each group of controllers through its
// own cgroup1 handle, so that a failing file is attributed to its group and
// the other groups are still reported.
type v1Reader struct {
	root string
	// cpu reads cpu.stat and cpuacct, cpuacct the latter alone.
	cpu, cpuacct, memory, pids    cgroup1.InitOpts
	cpuDir, cpuacctDir, cpusetDir string
	memoryDir, pidsDir, blkioDir  string
	proc                          string // see Options.Proc
}

func newV1Reader(root string, swap bool, proc string) *v1Reader {
	r := &v1Reader{
		root:       root,
		proc:       proc,
		cpuDir:     filepath.Join(root, string(cgroup1.Cpu)),
		cpuacctDir: filepath.Join(root, string(cgroup1.Cpuacct)),
		cpusetDir:  filepath.Join(root, string(cgroup1.Cpuset)),
		memoryDir:  filepath.Join(root, string(cgroup1.Memory)),
		pidsDir:    filepath.Join(root, string(cgroup1.Pids)),
		blkioDir:   filepath.Join(root, string(cgroup1.Blkio)),
	}
	// Kernel memory is not reported; swap only when asked and accounted.
	ignored := []string{"kmem", "kmem.tcp"}
	if !swap {
		ignored = append(ignored, "memsw")
	}
	memory := cgroup1.NewMemory(root, cgroup1.OptionalSwap(), cgroup1.IgnoreModules(ignored...))
	r.cpu = hierarchy(cgroup1.NewCpu(root), cgroup1.NewCpuacct(root))
	r.cpuacct = hierarchy(cgroup1.NewCpuacct(root))
	r.memory = hierarchy(memory)
	r.pids = hierarchy(cgroup1.NewPids(root))
	return r
}

func hierarchy(subsystems ...cgroup1.Subsystem) cgroup1.InitOpts {
	return cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subsystems, nil })
}

// group is what one cgroup1 handle read.
type group struct {
	metrics *v1stats.Metrics
	found   bool // the cgroup exists in one of the group's controllers
	// complete: every file was read, so the metrics can be reported.
	complete bool
	err      error
}

// stat loads name in the controllers of opts and reads their metrics. A
// group with a missing file is incomplete and left out, without an error;
// if the cgroup's directory is gone, err is ErrNotFound.
func (r *v1Reader) stat(name string, opts cgroup1.InitOpts, dir string) group {
	cg, err := cgroup1.Load(cgroup1.StaticPath(name), opts)
	if errors.Is(err, cgroup1.ErrCgroupDeleted) {
		return group{}
	}
	if err != nil {
		return group{err: fmt.Errorf("loading v1 cgroup %s: %w", name, err)}
	}
	var errs errorList
	m, err := cg.Stat(errs.handle)
	g := group{metrics: m, found: true, err: errors.Join(err, errs.join())}
	if errs.missing && !exists(dir) {
		g.err = fmt.Errorf("%w: %s vanished while it was read", ErrNotFound, dir)
	}
	g.complete = g.err == nil && !errs.missing && m != nil
	return g
}

// read fills s; spec says whether to read the CPU spec and the cpuset.
func (r *v1Reader) read(name string, s *Sample, spec bool) error {
	var errs []error
	fail := func(what string, err error) { errs = append(errs, fmt.Errorf("%s: %w", what, err)) }

	if spec {
		if err := r.cpuSpec(name, &s.Spec); err != nil && !notExist(err) {
			fail("cpu spec", vanished(filepath.Join(r.cpuDir, name), err))
		}
		dir := filepath.Join(r.memoryDir, name)
		if err := memorySpec(dir, "memory.memsw.limit_in_bytes", "memory.soft_limit_in_bytes", &s.Spec); err != nil {
			fail("memory spec", vanished(dir, err))
		}
	}
	// cpu.stat holds only the CFS counters, which stay 0 without a quota
	// (the period timer runs only with one) and are then not reported.
	cpuOpts := r.cpu
	if s.Spec.HasCPU && s.Spec.CPUQuota == 0 {
		cpuOpts = r.cpuacct
	}
	cpu := r.stat(name, cpuOpts, filepath.Join(r.cpuacctDir, name))
	if cpu.err != nil {
		fail("cpu and cpuacct "+name, cpu.err)
	}
	if cpu.complete && cpu.metrics.CPU != nil {
		c := cpu.metrics.CPU
		s.CPU = &CPU{
			UsageNs: c.Usage.Total, UserNs: c.Usage.User, SystemNs: c.Usage.Kernel,
			Periods: c.Throttling.Periods, ThrottledPeriods: c.Throttling.ThrottledPeriods,
			ThrottledNs: c.Throttling.ThrottledTime,
		}
	}

	memDir := filepath.Join(r.memoryDir, name)
	mem := r.stat(name, r.memory, memDir)
	if mem.err != nil {
		fail("memory "+memDir, mem.err)
	}
	if mem.complete && mem.metrics.Memory != nil {
		m := v1Memory(mem.metrics)
		if err := readV1MemoryFiles(memDir, m); err != nil {
			fail("memory", vanished(memDir, err))
		} else {
			s.Memory = m
			s.Spec.HasMemory, s.Spec.MemoryLimit = true, limitOrZero(mem.metrics.Memory.Usage.Limit)
		}
	}

	pidsDir := filepath.Join(r.pidsDir, name)
	pids := r.stat(name, r.pids, pidsDir)
	if pids.err != nil {
		fail("pids "+pidsDir, pids.err)
	}
	if pids.complete && pids.metrics.Pids != nil && mem.found {
		procs, first, err := readProcs(filepath.Join(memDir, "cgroup.procs"), r.proc)
		if err == nil {
			procs.Threads, procs.ThreadsMax = pids.metrics.Pids.Current, limitOrZero(pids.metrics.Pids.Limit)
			s.Pids = procs
			if err := readMaxOpenFilesUnlessReused(r.proc, first, s, spec); err != nil {
				fail("ulimits", err)
			}
		} else if err = vanished(memDir, err); !notExist(err) {
			fail("processes", err)
		}
	}

	blkioDir := filepath.Join(r.blkioDir, name)
	if io, err := readV1BlkIO(blkioDir); err == nil {
		s.BlkIO = io
	} else {
		fail("blkio", vanished(blkioDir, err))
	}

	cpusetDir := filepath.Join(r.cpusetDir, name)
	if !spec {
		// reused from the previous sample
	} else if set, err := readCPUSet(filepath.Join(cpusetDir, "cpuset.cpus"), filepath.Join(cpusetDir, "cpuset.mems")); err == nil {
		s.CPUSet = set
	} else if !notExist(err) {
		fail("cpuset", vanished(cpusetDir, err))
	}

	if !cpu.found && !mem.found && !pids.found {
		return fmt.Errorf("%w: %s in the v1 controllers under %s", ErrNotFound, name, r.root)
	}
	return errors.Join(errs...)
}

// v1Memory reads memory as cAdvisor does on a v1 host with use_hierarchy:
// the total_* counters of memory.stat include the descendants, as the usage
// does.
func v1Memory(m *v1stats.Metrics) *Memory {
	st := m.Memory
	mem := &Memory{
		Usage: st.Usage.Usage, MaxUsage: st.Usage.Max, Failcnt: st.Usage.Failcnt,
		RSS: st.TotalRSS, Cache: st.TotalCache, MappedFile: st.TotalMappedFile,
		WorkingSet:   workingSet(st.Usage.Usage, st.TotalInactiveFile),
		ActiveFile:   st.TotalActiveFile,
		InactiveFile: st.TotalInactiveFile,
		Pgfault:      st.PgFault, Pgmajfault: st.PgMajFault,
	}
	// memory.memsw counts memory plus swap.
	if st.Swap.Usage > st.Usage.Usage {
		mem.Swap = st.Swap.Usage - st.Usage.Usage
	}
	if m.MemoryOomControl != nil {
		mem.OOMKills = m.MemoryOomControl.OomKill
	}
	return mem
}

// readV1MemoryFiles reads into m what the library does not: the kernel
// memory, from one file instead of the library's four kmem files (absent
// on a kernel without kernel memory accounting, which counts 0 as in
// runc), and the refaults. Malformed, either fails the memory group as the
// library's would.
func readV1MemoryFiles(dir string, m *Memory) error {
	if kmem, err := readInt(filepath.Join(dir, "memory.kmem.usage_in_bytes")); err == nil {
		m.KernelUsage = uint64(max(kmem, 0))
	} else if !notExist(err) {
		return fmt.Errorf("kernel memory: %w", err)
	}
	return readRefaults(dir, m)
}

func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

// cpuSpec reads the CFS settings the library does not report.
func (r *v1Reader) cpuSpec(name string, spec *Spec) error {
	dir := filepath.Join(r.cpuDir, name)
	shares, err := readInt(filepath.Join(dir, "cpu.shares"))
	if err != nil {
		return fmt.Errorf("cpu spec: %w", err)
	}
	quota, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return fmt.Errorf("cpu spec: %w", err)
	}
	period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return fmt.Errorf("cpu spec: %w", err)
	}
	spec.HasCPU, spec.CPUShares, spec.CPUPeriod = true, uint64(max(shares, 0)), uint64(max(period, 0))
	spec.CPUQuota = uint64(max(quota, 0)) // -1: unlimited
	return nil
}

// memorySpec reads the swap limit and the reservation, as cAdvisor: a
// missing file (v1 without swap accounting) is 0, as is "max".
func memorySpec(dir, swapFile, reservationFile string, spec *Spec) error {
	swap, finite, err := readLimit(filepath.Join(dir, swapFile))
	if err != nil {
		return fmt.Errorf("memory spec: %w", err)
	}
	reservation, _, err := readLimit(filepath.Join(dir, reservationFile))
	if err != nil {
		return fmt.Errorf("memory spec: %w", err)
	}
	spec.MemorySwapLimit, spec.MemorySwapLimited, spec.MemoryReservation = swap, finite, reservation
	return nil
}

func readCPUSet(cpusFile, memsFile string) (*CPUSet, error) {
	cpus, err := readTrimmed(cpusFile)
	if err != nil {
		return nil, err
	}
	mems, err := readTrimmed(memsFile)
	if err != nil {
		return nil, err
	}
	return &CPUSet{CPUs: cpus, Mems: mems}, nil
}
