package cgstats

import (
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
