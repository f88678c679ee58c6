package cgstats

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRefaults(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Refaults
		err        string
	}{
		{"v2", v2MemoryStatFile, Refaults{Anon: 7, File: 70}, ""},
		{"v1: the cgroup's own, not total_", v1MemoryStat, Refaults{Anon: 7, File: 70}, ""},
		{"before Linux 5.9: only workingset_refault", "workingset_refault 5\nworkingset_activate 1\n", Refaults{}, ""},
		{"no trailing newline", "workingset_refault_file 12", Refaults{File: 12}, ""},
		{"not a number", "workingset_refault_anon x\n", Refaults{}, `memory.stat workingset_refault_anon: value "x", expected a count`},
		{"negative", "workingset_refault_file -1\n", Refaults{}, `workingset_refault_file: value "-1"`},
		{"no value", "workingset_refault_file \n", Refaults{}, `value ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRefaults([]byte(tc.data))
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseRefaults: whatever precedes them, the file's last refault lines
// decide the counters.
func FuzzParseRefaults(f *testing.F) {
	f.Add([]byte(v2MemoryStatFile), uint64(1), uint64(2))
	f.Add([]byte("workingset_refault_anon\n"), uint64(0), uint64(1<<63))
	f.Add([]byte("workingset_refault_file 1 2\n"), uint64(3), uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, anon, file uint64) {
		if _, err := ParseRefaults(data); err != nil {
			return
		}
		data = fmt.Appendf(data, "\nworkingset_refault_anon %d\nworkingset_refault_file %d\n", anon, file)
		got, err := ParseRefaults(data)
		require.NoError(t, err)
		assert.Equal(t, Refaults{Anon: anon, File: file}, got)
	})
}
