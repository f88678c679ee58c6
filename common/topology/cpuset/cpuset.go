// Package cpuset is an immutable set of CPU ids with the kernel's list syntax
// ("0-3,8,10-11"), as found in sysfs cpulist files and cgroup cpuset files.
//
// A CPUSet is a bitset, so set algebra on machines with hundreds of CPUs costs a
// few word operations. Its representation is canonical (no trailing zero
// words, nil when empty), so two equal sets are also reflect.DeepEqual, which
// keeps models that embed CPUSets comparable with testify's assert.Equal.
package cpuset

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/quote"
)

// MaxCPU is the largest CPU id a set can hold. It is above the kernel's
// largest NR_CPUS (8192) and bounds the memory a hostile list can make us
// allocate.
const MaxCPU = 1<<16 - 1

const wordBits = 64

// CPUSet is a set of CPU ids. The zero value is the empty set. CPUSets are
// values: no operation modifies its receiver or arguments.
type CPUSet struct {
	words []uint64
}

// New returns the set of the given CPU ids. Ids outside [0, MaxCPU] are not
// CPUs and are left out; Parse is the checked way to build a set from input.
func New(cpus ...int) CPUSet {
	var words []uint64
	for _, cpu := range cpus {
		if cpu < 0 || cpu > MaxCPU {
			continue
		}
		words = setBit(words, cpu)
	}
	return CPUSet{words: words}
}

// Range returns the set of CPUs first..last, both included; it is empty when
// last < first. Ids outside [0, MaxCPU] are left out, as in New.
func Range(first, last int) CPUSet {
	first = max(first, 0)
	last = min(last, MaxCPU)
	var words []uint64
	for cpu := first; cpu <= last; cpu++ {
		words = setBit(words, cpu)
	}
	return CPUSet{words: words}
}

func setBit(words []uint64, cpu int) []uint64 {
	w := cpu / wordBits
	for len(words) <= w {
		words = append(words, 0)
	}
	words[w] |= 1 << (uint(cpu) % wordBits)
	return words
}

// trim restores the canonical form: no trailing zero words, nil when empty.
func trim(words []uint64) CPUSet {
	n := len(words)
	for n > 0 && words[n-1] == 0 {
		n--
	}
	if n == 0 {
		return CPUSet{}
	}
	return CPUSet{words: words[:n:n]}
}

// Parse reads the kernel's CPU list syntax: comma-separated ids and inclusive
// ranges "a-b", e.g. "0-3,8,10-11". Surrounding white space (the newline of a
// sysfs file) is ignored and "" is the empty set. Tokens may come in any order
// and overlap. The error names the input and the bad token.
func Parse(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return CPUSet{}, nil
	}
	var words []uint64
	for _, token := range strings.Split(s, ",") {
		first, last, err := parseToken(token)
		if err != nil {
			return CPUSet{}, fmt.Errorf("parse cpu list %s: bad token %s: %w", quote.Value(s), quote.Value(token), err)
		}
		for cpu := first; cpu <= last; cpu++ {
			words = setBit(words, cpu)
		}
	}
	return trim(words), nil
}

func parseToken(token string) (first, last int, err error) {
	lo, hi, isRange := strings.Cut(token, "-")
	if first, err = parseID(lo); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return first, first, nil
	}
	if last, err = parseID(hi); err != nil {
		return 0, 0, err
	}
	if last < first {
		return 0, 0, fmt.Errorf("range end %d is below its start %d", last, first)
	}
	return first, last, nil
}

func parseID(s string) (int, error) {
	// Atoi alone would accept "+1"; the kernel's syntax is plain digits.
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("expected a CPU id (digits) or a range \"a-b\", got %s", quote.Value(s))
	}
	id, err := strconv.Atoi(s)
	if err != nil || id > MaxCPU {
		return 0, fmt.Errorf("CPU id %s is above the maximum %d", quote.Bare(s), MaxCPU)
	}
	return id, nil
}

// String returns the canonical list, as the kernel prints it: ascending, runs
// of consecutive CPUs as "a-b", and "" for the empty set. Parse(s.String())
// equals s.
func (s CPUSet) String() string {
	var b strings.Builder
	list := s.List()
	for i := 0; i < len(list); {
		j := i
		for j+1 < len(list) && list[j+1] == list[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			b.WriteString(strconv.Itoa(list[i]))
		} else {
			fmt.Fprintf(&b, "%d-%d", list[i], list[j])
		}
		i = j + 1
	}
	return b.String()
}

// MarshalText renders the canonical list, so sets read and write as YAML and
// JSON strings.
func (s CPUSet) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// UnmarshalText parses the kernel's list syntax.
func (s *CPUSet) UnmarshalText(text []byte) error {
	parsed, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// IsZero reports whether the set is empty. Encoders' omitempty (yaml.v3)
// asks for it: without it a set, whose fields are unexported, always looks
// empty to them.
func (s CPUSet) IsZero() bool { return s.IsEmpty() }

// List returns the CPU ids in ascending order.
func (s CPUSet) List() []int {
	list := make([]int, 0, s.Size())
	for w, word := range s.words {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			list = append(list, w*wordBits+b)
			word &^= 1 << uint(b)
		}
	}
	return list
}

// Size returns the number of CPUs in the set.
func (s CPUSet) Size() int {
	n := 0
	for _, word := range s.words {
		n += bits.OnesCount64(word)
	}
	return n
}

// IsEmpty reports whether the set has no CPU.
func (s CPUSet) IsEmpty() bool {
	return len(s.words) == 0
}

// Contains reports whether cpu is in the set.
func (s CPUSet) Contains(cpu int) bool {
	if cpu < 0 || cpu/wordBits >= len(s.words) {
		return false
	}
	return s.words[cpu/wordBits]&(1<<(uint(cpu)%wordBits)) != 0
}

// IsSubsetOf reports whether every CPU of s is in o.
func (s CPUSet) IsSubsetOf(o CPUSet) bool {
	return s.Difference(o).IsEmpty()
}

// Equal reports whether both sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool {
	if len(s.words) != len(o.words) {
		return false
	}
	for i := range s.words {
		if s.words[i] != o.words[i] {
			return false
		}
	}
	return true
}

// Union returns the CPUs in s or o.
func (s CPUSet) Union(o CPUSet) CPUSet {
	long, short := s.words, o.words
	if len(long) < len(short) {
		long, short = short, long
	}
	words := append([]uint64(nil), long...)
	for i, word := range short {
		words[i] |= word
	}
	return trim(words)
}

// Intersection returns the CPUs in both s and o.
func (s CPUSet) Intersection(o CPUSet) CPUSet {
	words := make([]uint64, min(len(s.words), len(o.words)))
	for i := range words {
		words[i] = s.words[i] & o.words[i]
	}
	return trim(words)
}

// Difference returns the CPUs in s that are not in o.
func (s CPUSet) Difference(o CPUSet) CPUSet {
	words := append([]uint64(nil), s.words...)
	for i := range min(len(words), len(o.words)) {
		words[i] &^= o.words[i]
	}
	return trim(words)
}

// Min returns the lowest CPU id of the set, or -1 when it is empty.
func (s CPUSet) Min() int {
	for w, word := range s.words {
		if word != 0 {
			return w*wordBits + bits.TrailingZeros64(word)
		}
	}
	return -1
}
