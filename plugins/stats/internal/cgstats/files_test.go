package cgstats

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUMax(t *testing.T) {
	for _, tc := range []struct {
		in            string
		quota, period uint64
		wantErr       string
	}{
		{"max 100000", 0, 100000, ""},
		{"50000 100000\n", 50000, 100000, ""},
		{"max", 0, 0, "expected"},
		{"50000 0", 0, 0, "period"},
		{"-1 100000", 0, 0, "quota"},
		{"half 100000", 0, 0, "quota"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			quota, period, err := ParseCPUMax(tc.in)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [2]uint64{tc.quota, tc.period}, [2]uint64{quota, period})
		})
	}
}

func TestWeightToShares(t *testing.T) {
	// The kubelet's shares -> weight conversion (1 + (shares-2)*9999/262142)
	// and back keep the extremes and the default.
	for weight, shares := range map[uint64]uint64{1: 2, 39: 998, 100: 2597, 10000: 262144} {
		got, err := WeightToShares(weight)
		require.NoError(t, err)
		assert.Equal(t, shares, got, "weight %d", weight)
	}
	_, err := WeightToShares(0)
	assert.ErrorContains(t, err, "expected 1 to 10000")
}

func TestParsePSI(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     PSI
		wantErr  string
	}{
		{"some and full", "some avg10=0.10 avg60=0.00 avg300=0.00 total=12\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", PSI{12, 7}, ""},
		{"some only (cpu before 5.13)", "some avg10=0.00 avg60=0.00 avg300=0.00 total=3\n", PSI{SomeUsec: 3}, ""},
		{"no total", "some avg10=0.00\n", PSI{}, "total="},
		{"bad total", "some total=x\n", PSI{}, "total="},
		{"unknown line", "most total=1\n", PSI{}, "some or full"},
		{"empty", "", PSI{}, "some line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePSI([]byte(tc.in))
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=12\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"))
	f.Add([]byte("some total=1"))
	f.Add([]byte("full total=1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePSI(data)
		if err != nil && p != (PSI{}) {
			t.Fatalf("error %v with a non-zero result %+v", err, p)
		}
	})
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "50000 100000", "", "max", "1 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		quota, period, err := ParseCPUMax(s)
		if err == nil && period == 0 {
			t.Fatalf("ParseCPUMax(%q) = %d, %d: accepted a zero period", s, quota, period)
		}
	})
}

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Meminfo
		wantErr  string
	}{
		{"kernel format", hostMeminfo, Meminfo{MemTotal: 8 << 30, MemFree: 6 << 30, SwapTotal: 1 << 30, SwapFree: 768 << 20}, ""},
		{"no swap lines", "MemTotal: 4 kB\nMemFree: 1 kB\n", Meminfo{MemTotal: 4096, MemFree: 1024}, ""},
		{"no MemFree", "MemTotal: 4 kB\n", Meminfo{}, "no MemFree line"},
		{"no unit", "MemTotal: 4\nMemFree: 1 kB\n", Meminfo{}, `MemTotal: value "4", expected "<kilobytes> kB"`},
		{"negative", "MemTotal: 4 kB\nMemFree: -1 kB\n", Meminfo{}, "MemFree"},
		{"overflows bytes", "MemTotal: 18014398509481984 kB\nMemFree: 1 kB\n", Meminfo{}, "MemTotal"},
		{"free above total", "MemTotal: 1 kB\nMemFree: 2 kB\n", Meminfo{}, "free above total"},
		{"swap free above total", "MemTotal: 2 kB\nMemFree: 1 kB\nSwapTotal: 0 kB\nSwapFree: 1 kB\n", Meminfo{}, "free above total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMeminfo([]byte(tc.in))
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte(hostMeminfo))
	f.Add([]byte("MemTotal: 4 kB\nMemFree: 1 kB\n"))
	f.Add([]byte("MemTotal: 18014398509481983 kB\nMemFree: 0 kB\nSwapTotal:x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeminfo(data)
		if err != nil {
			if m != (Meminfo{}) {
				t.Fatalf("error %v with a non-zero result %+v", err, m)
			}
			return
		}
		if m.MemFree > m.MemTotal || m.SwapFree > m.SwapTotal {
			t.Fatalf("accepted free above total: %+v", m)
		}
	})
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 100) // grows the 512-byte buffer
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	for _, tc := range []struct {
		name, path string
		want       string
		wantErr    error
	}{
		{"larger than the first buffer", filepath.Join(dir, "big"), big, nil},
		{"empty", filepath.Join(dir, "empty"), "", nil},
		{"missing", filepath.Join(dir, "gone"), "", fs.ErrNotExist},
		{"a directory", dir, "", syscall.EISDIR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFile(tc.path)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.ErrorContains(t, err, tc.path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// The kernel's own files report a size of 0: readFile reads them whole.
func TestReadFileReadsKernelFiles(t *testing.T) {
	data, err := readFile(DefaultMeminfo)
	require.NoError(t, err)
	m, err := ParseMeminfo(data)
	require.NoError(t, err)
	assert.Positive(t, m.MemTotal)
	assert.LessOrEqual(t, m.MemFree, m.MemTotal)
}

func TestCountProcs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          uint64
		wantErr       string
	}{
		{"one pid a line", "101\n102\n7\n", 3, ""},
		{"empty cgroup", "", 0, ""},
		{"blank lines", "\n101\n\n", 1, ""},
		{"not a pid", "101\nx1\n", 0, `line "x1", expected a process id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "cgroup.procs")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			got, err := countProcs(path, nil)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				assert.ErrorContains(t, err, path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseIOStat(t *testing.T) {
	got, err := ParseIOStat([]byte("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=1500 cost.wait=20 cost.indebt=3 cost.indelay=4\n" +
		"7:0 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n\n"))
	require.NoError(t, err)
	assert.Equal(t, []DeviceIO{
		{Major: 8, Minor: 0, Bytes: []OpCount{{"Read", 4096}, {"Write", 8192}}, IOs: []OpCount{{"Read", 1}, {"Write", 2}},
			Cost: &IOCost{UsageUsec: 1500, WaitUsec: 20, IndebtUsec: 3, IndelayUsec: 4}},
		{Major: 7, Minor: 0, Bytes: []OpCount{{"Read", 512}, {"Write", 0}}, IOs: []OpCount{{"Read", 1}, {"Write", 0}}},
	}, got, "a float cost.vrate is skipped; a device without iocost has no cost")

	for in, want := range map[string]string{
		"8 rbytes=1\n":       `"8", expected <major>:<minor>`,
		"8:x rbytes=1\n":     `expected <major>:<minor>`,
		"8:0 rbytes=-1\n":    `rbytes="-1", expected a count`,
		"8:0 cost.wait=1.5":  `cost.wait="1.5", expected a count`,
		"8:0 rios\n":         `rios="", expected a count`,
		"rbytes=1 wbytes=2 ": `expected <major>:<minor>`,
	} {
		_, err := ParseIOStat([]byte(in))
		assert.ErrorContains(t, err, want, "%q", in)
	}
}

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=1500 cost.wait=20 cost.indebt=3 cost.indelay=4\n"))
	f.Add([]byte("7:0 rbytes=512\n\n8:16 wios=3"))
	f.Add([]byte("8:0 rbytes=x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		devs, err := ParseIOStat(data)
		if err != nil && devs != nil {
			t.Fatalf("error %v with devices %+v", err, devs)
		}
		for _, d := range devs {
			if len(d.Bytes) != 2 || len(d.IOs) != 2 {
				t.Fatalf("device %d:%d without its Read and Write counts: %+v", d.Major, d.Minor, d)
			}
		}
	})
}
