package cgstats

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// DefaultMeminfo is the host's /proc/meminfo.
const DefaultMeminfo = "/proc/meminfo"

// Meminfo are the /proc/meminfo fields runc's fs2 manager reads for the
// root cgroup, in bytes.
type Meminfo struct {
	MemTotal, MemFree, SwapTotal, SwapFree uint64
}

// meminfoFields are the fields Meminfo takes, by their /proc/meminfo key.
var meminfoFields = map[string]func(*Meminfo) *uint64{
	"MemTotal":  func(m *Meminfo) *uint64 { return &m.MemTotal },
	"MemFree":   func(m *Meminfo) *uint64 { return &m.MemFree },
	"SwapTotal": func(m *Meminfo) *uint64 { return &m.SwapTotal },
	"SwapFree":  func(m *Meminfo) *uint64 { return &m.SwapFree },
}

// ParseMeminfo parses /proc/meminfo ("MemTotal:  16318412 kB" lines) into
// its memory and swap totals. MemTotal and MemFree must be there; the swap
// fields count as 0 when absent, as in runc. Not prometheus/procfs' Meminfo:
// v0.22.0's parser indexes a line's second field unchecked and panics on an
// empty line, where this one (fuzzed: FuzzParseMeminfo) returns an error.
func ParseMeminfo(data []byte) (Meminfo, error) {
	var m Meminfo
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		field, wanted := meminfoFields[key]
		if !ok || !wanted {
			continue
		}
		digits, ok := strings.CutSuffix(strings.TrimSpace(value), " kB")
		kb, err := strconv.ParseUint(strings.TrimSpace(digits), 10, 64)
		if !ok || err != nil || kb > math.MaxUint64/1024 {
			return Meminfo{}, fmt.Errorf("meminfo %s: value %q, expected \"<kilobytes> kB\"", key, strings.TrimSpace(value))
		}
		*field(&m) = kb * 1024
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return Meminfo{}, fmt.Errorf("reading meminfo: %w", err)
	}
	for _, key := range []string{"MemTotal", "MemFree"} {
		if !seen[key] {
			return Meminfo{}, fmt.Errorf("meminfo: no %s line, expected \"%s: <kilobytes> kB\"", key, key)
		}
	}
	if m.MemFree > m.MemTotal || m.SwapFree > m.SwapTotal {
		return Meminfo{}, fmt.Errorf("meminfo: free above total (MemFree %d > MemTotal %d or SwapFree %d > SwapTotal %d bytes)",
			m.MemFree, m.MemTotal, m.SwapFree, m.SwapTotal)
	}
	return m, nil
}

// readRootMemory fills s for the root cgroup (dir) of a v2 hierarchy, which has
// no memory.current, memory.max or memory.events: as runc's fs2 manager
// (statsFromMeminfo) and so cAdvisor and the kubelet, the usage is
// MemTotal - MemFree of the host's meminfo; the breakdown, the refaults
// and inactive_file, for the working set, come from the root's memory.stat
// (absent on old kernels: they count as 0, as in cAdvisor).
func readRootMemory(m *cgroup2.Manager, dir, meminfo string, s *Sample) error {
	data, err := readFile(meminfo)
	if err != nil {
		return fmt.Errorf("root cgroup memory: %w", err)
	}
	info, err := ParseMeminfo(data)
	if err != nil {
		return fmt.Errorf("root cgroup memory from %s: %w", meminfo, err)
	}
	st, err := m.StatFiltered(cgroup2.StatMemory)
	if err != nil {
		return fmt.Errorf("root cgroup memory: %w", err)
	}
	usage := info.MemTotal - info.MemFree
	mem := st.Memory
	s.Memory = &Memory{
		Usage: usage, WorkingSet: workingSet(usage, mem.InactiveFile),
		RSS: mem.Anon, Cache: mem.File, MappedFile: mem.FileMapped,
		// The swap in use: runc reports it alone here (not added to the
		// usage as for other cgroups), so cAdvisor's usage subtraction would
		// wrap below zero.
		Swap: info.SwapTotal - info.SwapFree,
	}
	v2MemoryStat(mem, s.Memory)
	if err := readRefaults(dir, s.Memory); err != nil && !notExist(err) {
		s.Memory = nil
		return fmt.Errorf("root cgroup memory: %w", err)
	}
	s.Spec.HasMemory = true // unlimited: 0, as v1's root
	if s.Pressure.Memory = psi(mem.PSI); s.Pressure.Memory == nil {
		// The library reads memory.pressure only along with memory.stat.
		return readPSIFile(filepath.Join(dir, "memory.pressure"), &s.Pressure.Memory)
	}
	return nil
}
