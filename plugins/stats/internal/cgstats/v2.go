package cgstats

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containerd/cgroups/v3/cgroup2"
	v2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
)

// readV2 reads the cgroup name of the v2 hierarchy at mount; spec says
// whether to read the CPU spec and the cpuset; meminfo, if set, is where the
// root cgroup's memory usage comes from; proc, if set, where the processes'
// open files are counted.
func readV2(mount, name string, s *Sample, spec bool, meminfo, proc string) error {
	dir := filepath.Join(mount, name)
	if !exists(dir) {
		return fmt.Errorf("%w: %s", ErrNotFound, dir)
	}
	m, err := cgroup2.Load(name, cgroup2.WithMountpoint(mount))
	if err != nil {
		return fmt.Errorf("loading v2 cgroup %s: %w", dir, err)
	}
	var errs []error
	// The library reads a missing file as zero: a group is only read where
	// its main file exists (memory.current is absent wherever the memory
	// controller is not enabled, and in the root cgroup: see readRootMemory).
	stat := func(what, mainFile string, mask cgroup2.StatMask) *v2stats.Metrics {
		if !exists(filepath.Join(dir, mainFile)) {
			return nil
		}
		st, err := m.StatFiltered(mask)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, vanished(dir, err)))
			return nil
		}
		return st
	}

	if st := stat("cpu", "cpu.stat", cgroup2.StatCPU); st != nil && st.CPU != nil {
		c := st.CPU
		s.CPU = &CPU{
			UsageNs: c.UsageUsec * 1000, UserNs: c.UserUsec * 1000, SystemNs: c.SystemUsec * 1000,
			Periods: c.NrPeriods, ThrottledPeriods: c.NrThrottled, ThrottledNs: c.ThrottledUsec * 1000,
			BurstPeriods: c.NrBursts, BurstNs: c.BurstUsec * 1000,
		}
		s.Pressure.CPU = psi(st.CPU.PSI)
	}
	// io.stat exists where the io controller is enabled, io.pressure
	// wherever PSI is on; read by the plugin, which keeps io.stat's cost
	// keys.
	if devs, err := readV2IOStat(dir); err == nil {
		s.BlkIO = devs
	} else if err = vanished(dir, err); !notExist(err) {
		errs = append(errs, fmt.Errorf("io: %w", err))
	}
	if err := readPSIFile(filepath.Join(dir, "io.pressure"), &s.Pressure.IO); err != nil {
		errs = append(errs, fmt.Errorf("io: %w", vanished(dir, err)))
	}

	if meminfo != "" && filepath.Clean(dir) == filepath.Clean(mount) && !exists(filepath.Join(dir, "memory.current")) {
		if err := readRootMemory(m, dir, meminfo, s); err != nil {
			errs = append(errs, err)
		}
	} else if st := stat("memory", "memory.current", cgroup2.StatMemory|cgroup2.StatMemoryEvents); st != nil && st.Memory != nil {
		mem := st.Memory
		out := &Memory{
			Usage: mem.Usage, MaxUsage: mem.MaxUsage, WorkingSet: workingSet(mem.Usage, mem.InactiveFile),
			RSS: mem.Anon, Cache: mem.File, MappedFile: mem.FileMapped, Swap: mem.SwapUsage,
		}
		v2MemoryStat(mem, out)
		if ev := st.MemoryEvents; ev != nil {
			out.Failcnt, out.OOMKills = ev.Max, ev.OomKill
			out.EventsHigh, out.EventsMax = ev.High, ev.Max
		}
		// Malformed, memory.stat fails the memory group, as the library's
		// reading of it would.
		if err := readRefaults(dir, out); err != nil {
			errs = append(errs, fmt.Errorf("memory: %w", vanished(dir, err)))
		} else {
			s.Memory = out
			s.Spec.HasMemory, s.Spec.MemoryLimit = true, limitOrZero(mem.UsageLimit)
			s.Pressure.Memory = psi(mem.PSI)
		}
	}
	if st := stat("pids", "pids.current", cgroup2.StatPids); st != nil && st.Pids != nil {
		procs, first, err := readProcs(filepath.Join(dir, "cgroup.procs"), proc)
		if err == nil {
			procs.Threads, procs.ThreadsMax = st.Pids.Current, limitOrZero(st.Pids.Limit)
			s.Pids = procs
			if err := readMaxOpenFilesUnlessReused(proc, first, s, spec); err != nil {
				errs = append(errs, fmt.Errorf("ulimits: %w", err))
			}
		} else if err = vanished(dir, err); !notExist(err) {
			errs = append(errs, fmt.Errorf("processes: %w", err))
		}
	}
	if spec {
		if err := v2CPUSpec(dir, &s.Spec); err != nil {
			errs = append(errs, vanished(dir, err))
		}
		if err := memorySpec(dir, "memory.swap.max", "memory.min", &s.Spec); err != nil {
			errs = append(errs, vanished(dir, err))
		}
		// The effective sets: cpuset.cpus is empty in a cgroup that inherits.
		if set, err := readCPUSet(filepath.Join(dir, "cpuset.cpus.effective"), filepath.Join(dir, "cpuset.mems.effective")); err == nil {
			s.CPUSet = set
		} else if !notExist(err) {
			errs = append(errs, vanished(dir, err))
		}
	}
	if !exists(dir) {
		return fmt.Errorf("%w: %s vanished while it was read", ErrNotFound, dir)
	}
	return errors.Join(errs...)
}

// v2MemoryStat copies the memory.stat keys cAdvisor serves beyond the
// breakdown into m.
func v2MemoryStat(st *v2stats.MemoryStat, m *Memory) {
	m.ActiveFile, m.InactiveFile = st.ActiveFile, st.InactiveFile
	m.Pgfault, m.Pgmajfault = st.Pgfault, st.Pgmajfault
	m.FileDirty, m.FileWriteback = st.FileDirty, st.FileWriteback
	m.Pgscan, m.Pgsteal = st.Pgscan, st.Pgsteal
}

// v2CPUSpec reads cpu.max and cpu.weight; both are absent where the cpu
// controller is not enabled, which is no error.
func v2CPUSpec(dir string, spec *Spec) error {
	raw, err := readTrimmed(filepath.Join(dir, "cpu.max"))
	if notExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cpu spec: %w", err)
	}
	quota, period, err := ParseCPUMax(raw)
	if err != nil {
		return fmt.Errorf("cpu spec in %s: %w", dir, err)
	}
	weight, err := readInt(filepath.Join(dir, "cpu.weight"))
	if err != nil {
		return fmt.Errorf("cpu spec: %w", err)
	}
	shares, err := WeightToShares(uint64(max(weight, 0)))
	if err != nil {
		return fmt.Errorf("cpu spec in %s: %w", dir, err)
	}
	spec.HasCPU, spec.CPUShares, spec.CPUQuota, spec.CPUPeriod = true, shares, quota, period
	return nil
}

func psi(p *v2stats.PSIStats) *PSI {
	if p == nil || p.Some == nil {
		return nil
	}
	out := &PSI{SomeUsec: p.Some.Total}
	if p.Full != nil {
		out.FullUsec = p.Full.Total
	}
	return out
}

// readPressure reads the three pressure files of a hybrid host's v2
// cgroup dir. The library's v2 readers cannot serve here: they start from
// controller files (memory.stat, io.stat) that a controller-less hierarchy
// lacks, and read cpu.stat, which v1 already gave. A missing file (PSI off,
// or a runtime that does not mirror its cgroups into the v2 hierarchy)
// leaves its resource out without an error.
func readPressure(dir string, p *Pressure) error {
	return errors.Join(
		readPSIFile(filepath.Join(dir, "cpu.pressure"), &p.CPU),
		readPSIFile(filepath.Join(dir, "memory.pressure"), &p.Memory),
		readPSIFile(filepath.Join(dir, "io.pressure"), &p.IO))
}

// readPSIFile reads one pressure file into *dst; a missing file leaves
// *dst nil.
func readPSIFile(path string, dst **PSI) error {
	data, err := readFile(path)
	if notExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	psi, err := ParsePSI(data)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	*dst = &psi
	return nil
}
