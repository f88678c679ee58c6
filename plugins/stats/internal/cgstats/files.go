package cgstats

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"syscall"
)

// unlimited is how cgroup files spell "no limit" once read as a number:
// "max" (v2) or a page-rounded 2^63 (v1). cAdvisor reports such limits as 0.
const unlimited = 1 << 62

func limitOrZero(v uint64) uint64 {
	if v >= unlimited {
		return 0
	}
	return v
}

// readFile reads a small cgroup or proc file with open, read and close
// alone. os.ReadFile would add an fstat, and register the file with the
// runtime's poller: cgroupfs files can be polled, so that is epoll_ctl
// twice and fcntl twice more per file (docs/benchmarks.md#stats).
func readFile(path string) ([]byte, error) {
	fd, err := ignoringEINTR(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := ignoringEINTR(func() (int, error) { return syscall.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func ignoringEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// readTrimmed returns the content of a one-line cgroup file.
func readTrimmed(path string) (string, error) {
	data, err := readFile(path)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(data)), nil
}

// readInt reads a file holding one integer; v1's cpu.cfs_quota_us is -1
// when unlimited, so it is signed.
func readInt(path string) (int64, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %q is not an integer", path, s)
	}
	return v, nil
}

// countProcs counts the process ids in a cgroup.procs file, one a line,
// and calls each, if set, with every id.
// The library's Processes and Procs find that file by walking the cgroup's
// directory and lstat-ing each of its 30 to 70 files, which cost more than
// all the other files of a reading together (docs/benchmarks.md#stats).
func countProcs(path string, each func(pid string)) (uint64, error) {
	data, err := readFile(path)
	if err != nil {
		return 0, err
	}
	var n uint64
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if bytes.ContainsFunc(line, func(r rune) bool { return r < '0' || r > '9' }) {
			return 0, fmt.Errorf("reading %s: line %q, expected a process id", path, line)
		}
		if each != nil {
			each(string(line))
		}
		n++
	}
	return n, nil
}

// readLimit reads a file holding a limit in bytes: 0 when the file is
// missing, "max" or at least unlimited; finite unless "max" or at least
// unlimited (cAdvisor reads a missing file as a limit of 0).
func readLimit(path string) (v uint64, finite bool, err error) {
	s, err := readTrimmed(path)
	if notExist(err) {
		return 0, true, nil
	}
	if err == nil && s == "max" {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %q, expected \"max\" or a number of bytes", path, s)
	}
	return limitOrZero(v), v < unlimited, nil
}

// ParseCPUMax parses v2's cpu.max, "<quota|max> <period>": the quota in
// microseconds per period, 0 when "max".
func ParseCPUMax(s string) (quota, period uint64, err error) {
	fields := strings.Fields(s)
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("cpu.max %q: expected \"<quota|max> <period>\"", s)
	}
	period, err = strconv.ParseUint(fields[1], 10, 64)
	if err != nil || period == 0 {
		return 0, 0, fmt.Errorf("cpu.max %q: period %q, expected a positive integer", s, fields[1])
	}
	if fields[0] == "max" {
		return 0, period, nil
	}
	quota, err = strconv.ParseUint(fields[0], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.max %q: quota %q, expected \"max\" or an integer", s, fields[0])
	}
	return quota, period, nil
}

// WeightToShares converts v2's cpu.weight (1-10000) back into v1 shares
// (2-262144), the inverse of the conversion runc and the kubelet apply.
func WeightToShares(weight uint64) (uint64, error) {
	if weight < 1 || weight > 10000 {
		return 0, fmt.Errorf("cpu.weight %d: expected 1 to 10000", weight)
	}
	return 2 + ((weight-1)*262142)/9999, nil
}

// ParsePSI parses a pressure file ("some avg10=0.00 avg60=0.00 avg300=0.00
// total=123" and an optional "full ..." line) into its totals. It serves
// the pressure files of a hybrid host, which the library cannot reach (see
// readPressure).
func ParsePSI(data []byte) (PSI, error) {
	var psi PSI
	sc := bufio.NewScanner(bytes.NewReader(data))
	seen := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		var dst *uint64
		switch fields[0] {
		case "some":
			dst, seen = &psi.SomeUsec, true
		case "full":
			dst = &psi.FullUsec
		default:
			return PSI{}, fmt.Errorf("pressure line %q: expected it to start with some or full", sc.Text())
		}
		total, ok := psiTotal(fields[1:])
		if !ok {
			return PSI{}, fmt.Errorf("pressure line %q: expected a total=<microseconds> field", sc.Text())
		}
		*dst = total
	}
	if err := sc.Err(); err != nil {
		return PSI{}, fmt.Errorf("reading pressure: %w", err)
	}
	if !seen {
		return PSI{}, fmt.Errorf("pressure %q: expected a some line", data)
	}
	return psi, nil
}

func psiTotal(fields []string) (uint64, bool) {
	for _, f := range fields {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			total, err := strconv.ParseUint(v, 10, 64)
			return total, err == nil && total < math.MaxInt64
		}
	}
	return 0, false
}
