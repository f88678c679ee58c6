package cgstats

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
)

// Refaults are memory.stat's workingset_refault_anon and
// workingset_refault_file (Linux 5.9 and later, v1 and v2): the pages
// read back after the kernel evicted them. cAdvisor serves them from
// runc's memory.stat map, the cgroup's own keys on v1 (not total_), 0
// where the kernel has none.
type Refaults struct {
	Anon, File uint64
}

// refaultKeys are the memory.stat keys, with the space after them, that
// ParseRefaults takes, and where each goes.
var refaultKeys = []struct {
	prefix []byte
	field  func(*Refaults) *uint64
}{
	{[]byte("workingset_refault_anon "), func(r *Refaults) *uint64 { return &r.Anon }},
	{[]byte("workingset_refault_file "), func(r *Refaults) *uint64 { return &r.File }},
}

// ParseRefaults returns the refault counters of a memory.stat file
// ("key value" lines). containerd's cgroups parsers, which read the rest
// of the file, drop these keys (its v2 keeps only the older
// workingset_refault). A key that is absent counts 0; a value that is not
// a number is an error naming the key.
func ParseRefaults(data []byte) (Refaults, error) {
	var r Refaults
	for line := range bytes.Lines(data) {
		if len(line) == 0 || line[0] != 'w' { // cheap: most keys start otherwise
			continue
		}
		for _, k := range refaultKeys {
			value, ok := bytes.CutPrefix(line, k.prefix)
			if !ok {
				continue
			}
			v, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64)
			if err != nil {
				return Refaults{}, fmt.Errorf("memory.stat %s: value %q, expected a count", bytes.TrimSpace(k.prefix), bytes.TrimSpace(value))
			}
			*k.field(&r) = v
		}
	}
	return r, nil
}

// readRefaults reads the refault counters of the memory.stat in dir into m.
func readRefaults(dir string, m *Memory) error {
	path := filepath.Join(dir, "memory.stat")
	data, err := readFile(path)
	if err != nil {
		return err
	}
	r, err := ParseRefaults(data)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	m.Refaults = r
	return nil
}
