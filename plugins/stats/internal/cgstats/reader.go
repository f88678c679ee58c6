package cgstats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned for a cgroup that does not exist (any more): the
// container was removed, possibly while it was being read.
var ErrNotFound = errors.New("cgroup not found")

// DefaultSpecMaxAge is how long a spec is reused by default: an update of a
// container's limits or cpuset shows within it.
const DefaultSpecMaxAge = 30 * time.Second

// Options tune what a Reader reads.
type Options struct {
	// Swap reads v1's memory.memsw.* files (4 per cgroup): worth it only on
	// a host with swap on (see SwapActive); without, swap is reported as 0.
	Swap bool
	// SpecMaxAge is how long a cgroup's CPU spec (v1 cpu.shares and CFS
	// files, v2 cpu.max and cpu.weight) and cpuset, which change only when
	// the container is updated, and its process's soft limit of open files
	// are reused from its previous sample before they are read again; 0
	// reads them every time.
	SpecMaxAge time.Duration
	// Meminfo is the host's /proc/meminfo (DefaultMeminfo): on v2, the root
	// cgroup's memory usage comes from it. Empty: the root cgroup has no
	// memory on v2.
	Meminfo string
	// SysBlock is the host's /sys/block (DefaultSysBlock), where block
	// devices get their names. Empty: every device's name is "".
	SysBlock string
	// Proc is the host's /proc, where the open files of a cgroup's
	// processes are counted (a readlink per file), and the soft limit of
	// open files of its first process read (<pid>/limits). Empty: neither.
	Proc string
}

// Reader reads samples from the cgroups of one Layout. It is safe for
// concurrent use.
type Reader struct {
	layout Layout
	opts   Options
	v1     *v1Reader // nil on ModeV2
	names  *deviceNames
	now    func() time.Time
	boot   time.Time // see Created
}

// NewReader returns a reader of the cgroups under layout.
func NewReader(layout Layout, opts Options) (*Reader, error) {
	r := &Reader{layout: layout, opts: opts, now: time.Now, boot: bootTime(time.Now())}
	r.names = &deviceNames{sysBlock: opts.SysBlock, maxAge: max(opts.SpecMaxAge, time.Second), now: func() time.Time { return r.now() }}
	switch layout.Mode {
	case ModeV1, ModeHybrid:
		r.v1 = newV1Reader(layout.Root, opts.Swap, opts.Proc)
	case ModeV2:
	default:
		return nil, fmt.Errorf("creating cgroup reader: mode %q, expected v1, hybrid or v2", layout.Mode)
	}
	return r, nil
}

// Layout is the reader's layout.
func (r *Reader) Layout() Layout { return r.layout }

// Read samples the cgroup name (a path below the hierarchy roots, see Name).
// prev, the cgroup's previous sample if any, lends its spec and cpuset
// while they are younger than Options.SpecMaxAge. Read returns what could
// be read: err joins one error per file group that failed, and is
// ErrNotFound when the cgroup does not exist, or vanished during the read.
func (r *Reader) Read(name string, prev *Sample) (Sample, error) {
	var s Sample
	now := r.now()
	reuse := prev != nil && !prev.SpecAt.IsZero() && now.Sub(prev.SpecAt) < r.opts.SpecMaxAge
	if reuse {
		s.Spec, s.CPUSet, s.SpecAt, s.MaxOpenFiles = prev.Spec, prev.CPUSet, prev.SpecAt, prev.MaxOpenFiles
		s.Spec.HasMemory, s.Spec.MemoryLimit = false, 0 // read with the memory group
	} else {
		s.SpecAt = now
	}
	var err error
	switch r.layout.Mode {
	case ModeV2:
		err = readV2(r.layout.Unified, name, &s, !reuse, r.opts.Meminfo, r.opts.Proc)
	case ModeHybrid:
		err = r.v1.read(name, &s, !reuse)
		if !errors.Is(err, ErrNotFound) {
			// The v2 side of a hybrid host has no controllers: only PSI.
			err = errors.Join(err, readPressure(filepath.Join(r.layout.Unified, name), &s.Pressure))
		}
	default:
		err = r.v1.read(name, &s, !reuse)
	}
	r.names.assign(s.BlkIO)
	// cAdvisor's ulimits are those of a container's process (read with
	// its processes), and of pid 1 for the root cgroup.
	if name == "/" {
		err = errors.Join(err, r.readRootProcs(&s), readMaxOpenFilesUnlessReused(r.opts.Proc, "1", &s, !reuse))
	}
	return s, err
}

// readRootProcs counts the processes directly in the root cgroup, which
// has no pids.current, so that its pids group is left out: as cAdvisor's
// raw handler, from the cpu controller's cgroup.procs (the unified
// hierarchy's on v2), with their open files, and 0 threads and no limit
// (it drops the root's pids controller).
func (r *Reader) readRootProcs(s *Sample) error {
	if s.Pids != nil {
		return nil
	}
	dir := r.layout.Unified
	if r.layout.Mode != ModeV2 {
		dir = r.v1.cpuDir
	}
	procs, _, err := readProcs(filepath.Join(dir, "cgroup.procs"), r.opts.Proc)
	if notExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("root processes: %w", err)
	}
	s.Pids = procs
	return nil
}

// SwapActive reports whether the host has swap on, from /proc/swaps (a
// header line, then one line per swap area).
func SwapActive(procSwaps string) (bool, error) {
	data, err := os.ReadFile(procSwaps)
	if err != nil {
		return false, fmt.Errorf("checking for swap: %w", err)
	}
	return len(strings.Split(strings.TrimSpace(string(data)), "\n")) > 1, nil
}

// errorList collects the errors the library hands its error handlers, which
// it calls from one goroutine per controller. A missing file is not an
// error: the kernel does not provide it there (pids.current in the root
// cgroup), or the cgroup is going away, which the caller checks.
type errorList struct {
	mu      sync.Mutex
	errs    []error
	missing bool
}

func (l *errorList) handle(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if notExist(err) {
		l.missing = true
	} else {
		l.errs = append(l.errs, err)
	}
	return nil // keep the rest of the sample
}

func (l *errorList) join() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// vanished turns err into ErrNotFound when dir is gone: a read that failed
// because the container went away is not a broken file.
func vanished(dir string, err error) error {
	if err != nil && !exists(dir) {
		return fmt.Errorf("%w: %s", ErrNotFound, dir)
	}
	return err
}

// notExist reports whether err says a file is missing.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Pid is a process of the cgroup name, the first of its cgroup.procs (v2,
// or v1's memory controller), as the reader's PID namespace numbers it;
// ErrNotFound when the cgroup is gone or holds no process.
func (r *Reader) Pid(name string) (uint32, error) {
	dir := filepath.Join(r.layout.Unified, name)
	if r.layout.Mode != ModeV2 {
		dir = filepath.Join(r.v1.memoryDir, name)
	}
	path := filepath.Join(dir, "cgroup.procs")
	data, err := readFile(path)
	if notExist(err) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if first == "" {
		return 0, ErrNotFound
	}
	pid, err := strconv.ParseUint(first, 10, 32)
	if err != nil || pid == 0 {
		return 0, fmt.Errorf("parse %s: first line %q, expected a process id", path, first)
	}
	return uint32(pid), nil
}
