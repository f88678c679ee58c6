package cgstats

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
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

// readTrimmed returns the content of a one-line cgroup file.
func readTrimmed(path string) (string, error) {
	data, err := os.ReadFile(path)
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
