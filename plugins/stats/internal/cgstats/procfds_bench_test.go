package cgstats

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkReadProcs counts the open files of this process, 64 of them
// at least, through the real /proc: the cost a container with as many
// open files adds to a reading.
func BenchmarkReadProcs(b *testing.B) {
	for range 64 {
		f, err := os.Open(os.DevNull)
		require.NoError(b, err)
		b.Cleanup(func() { f.Close() })
	}
	procs := filepath.Join(b.TempDir(), "cgroup.procs")
	require.NoError(b, os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644))
	var p *Pids
	for b.Loop() {
		var err error
		p, _, err = readProcs(procs, "/proc")
		require.NoError(b, err)
	}
	require.True(b, p.FDsRead)
	require.GreaterOrEqual(b, p.FDs, uint64(64))
	b.ReportMetric(float64(p.FDs), "fds")
}

// BenchmarkReadMaxOpenFiles reads this process's soft limit of open files
// through the real /proc: what container_ulimits_soft adds to a reading,
// per container.
func BenchmarkReadMaxOpenFiles(b *testing.B) {
	var s Sample
	for b.Loop() {
		require.NoError(b, readMaxOpenFiles("/proc", strconv.Itoa(os.Getpid()), &s))
	}
	require.NotNil(b, s.MaxOpenFiles)
}
