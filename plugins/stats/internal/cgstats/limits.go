package cgstats

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ParseMaxOpenFiles returns the soft limit of the "Max open files" line of
// a /proc/<pid>/limits file ("Max open files  1024  524288  files"), -1
// when unlimited, as cAdvisor's processLimitsFile reads it: the soft and
// hard limits must both be numbers or "unlimited", with a unit after them.
func ParseMaxOpenFiles(data []byte) (int64, error) {
	const prefix = "Max open files"
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 3 {
			return 0, fmt.Errorf("limits: %q, expected %q, its soft and hard limits and unit", sc.Text(), prefix)
		}
		soft, err := parseLimit(fields[0])
		if err == nil {
			_, err = parseLimit(fields[1])
		}
		if err != nil {
			return 0, fmt.Errorf("limits: %q: %w", sc.Text(), err)
		}
		return soft, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading limits: %w", err)
	}
	return 0, fmt.Errorf("limits: no %q line", prefix)
}

// parseLimit is a limit of /proc/<pid>/limits: a number, or -1 for
// "unlimited".
func parseLimit(s string) (int64, error) {
	if strings.EqualFold(s, "unlimited") {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("limit %q, expected a number or \"unlimited\"", s)
	}
	return v, nil
}

// readMaxOpenFilesUnlessReused reads s.MaxOpenFiles with the spec
// (fresh), or when the previous sample, whose value s holds, had none: a
// process changes its limits seldom, and the kernel renders every limit
// of the file, 18 µs a read (BenchmarkReadMaxOpenFiles).
func readMaxOpenFilesUnlessReused(proc, pid string, s *Sample, fresh bool) error {
	if !fresh && s.MaxOpenFiles != nil {
		return nil
	}
	return readMaxOpenFiles(proc, pid, s)
}

// readMaxOpenFiles sets s.MaxOpenFiles from <proc>/<pid>/limits. A process
// that exited meanwhile leaves it unset, without an error, as an empty proc
// or pid.
func readMaxOpenFiles(proc, pid string, s *Sample) error {
	if proc == "" || pid == "" {
		return nil
	}
	path := filepath.Join(proc, pid, "limits")
	data, err := readFile(path)
	if notExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	soft, err := ParseMaxOpenFiles(data)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	s.MaxOpenFiles = &soft
	return nil
}
