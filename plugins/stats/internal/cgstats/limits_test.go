package cgstats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limits is a /proc/<pid>/limits as Linux writes it.
const limits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max processes             95913                95913                processes 
Max open files            1048576              1048576              files     
Max locked memory         8388608              8388608              bytes     
`

func TestParseMaxOpenFiles(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       int64
		err        string
	}{
		{"kernel's format", limits, 1048576, ""},
		{"soft below hard", "Max open files            1024                 524288               files\n", 1024, ""},
		{"unlimited", "Max open files  unlimited  unlimited  files\n", -1, ""},
		{"no line", "Max processes 1 1 processes\n", 0, `no "Max open files" line`},
		{"no unit", "Max open files 1024 4096\n", 0, "expected \"Max open files\", its soft and hard limits and unit"},
		{"soft not a number", "Max open files lots 4096 files\n", 0, `limit "lots", expected a number or "unlimited"`},
		{"hard not a number", "Max open files 1024 lots files\n", 0, `limit "lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMaxOpenFiles([]byte(tc.data))
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseMaxOpenFiles(f *testing.F) {
	f.Add([]byte(limits))
	f.Add([]byte("Max open files unlimited 1 files\n"))
	f.Add([]byte("Max open files\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseMaxOpenFiles(data)
		if err == nil && v < -1 {
			t.Fatalf("ParseMaxOpenFiles(%q) = %d, below unlimited's -1", data, v)
		}
	})
}

// The soft limit of open files is that of a container's first process
// (101 of the fixtures' cgroup.procs), and of pid 1 for the root cgroup;
// a process that exited has none, a malformed file is an error naming it.
func TestMaxOpenFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree files
	}{{"v1", v1Files(container)}, {"v2", v2Files(container)}} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			put := func(pid, content string) {
				require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "limits"), []byte(content), 0o644))
			}
			put("1", "Max open files 524288 524288 files\n")
			put("101", limits)
			put("102", "Max open files 7 7 files\n") // not the first
			fixture, _ := readerFor(t, tc.tree)
			r, err := NewReader(fixture.Layout(), Options{Proc: proc})
			require.NoError(t, err)

			got, err := r.Read(container, nil)
			require.NoError(t, err)
			require.NotNil(t, got.MaxOpenFiles)
			assert.Equal(t, int64(1048576), *got.MaxOpenFiles)
			root, _ := r.Read("/", nil) // the fixture's root may lack files; the limit does not depend on them
			require.NotNil(t, root.MaxOpenFiles)
			assert.Equal(t, int64(524288), *root.MaxOpenFiles)

			got, err = fixture.Read(container, nil)
			require.NoError(t, err)
			assert.Nil(t, got.MaxOpenFiles, "without Options.Proc")

			put("101", "Max open files 1024 files\n")
			got, err = r.Read(container, nil)
			assert.ErrorContains(t, err, filepath.Join(proc, "101", "limits"))
			assert.Nil(t, got.MaxOpenFiles)
			assert.NotNil(t, got.Pids, "the processes are still counted")

			require.NoError(t, os.RemoveAll(filepath.Join(proc, "101")))
			got, err = r.Read(container, nil)
			require.NoError(t, err, "an exited process is no error")
			assert.Nil(t, got.MaxOpenFiles)
		})
	}
}

// The limit is reused with the spec: a change shows once the spec is read
// again.
func TestMaxOpenFilesReusedWithTheSpec(t *testing.T) {
	proc := t.TempDir()
	limitsFile := filepath.Join(proc, "101", "limits")
	require.NoError(t, os.MkdirAll(filepath.Dir(limitsFile), 0o755))
	require.NoError(t, os.WriteFile(limitsFile, []byte("Max open files 1024 4096 files\n"), 0o644))
	fixture, _ := readerFor(t, v2Files(container))
	r, err := NewReader(fixture.Layout(), Options{Proc: proc, SpecMaxAge: DefaultSpecMaxAge})
	require.NoError(t, err)
	r.now = func() time.Time { return readTime }
	first, err := r.Read(container, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(limitsFile, []byte("Max open files 2048 4096 files\n"), 0o644))

	r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge - time.Second) }
	young, err := r.Read(container, &first)
	require.NoError(t, err)
	assert.Equal(t, int64(1024), *young.MaxOpenFiles, "reused with the spec")

	r.now = func() time.Time { return readTime.Add(DefaultSpecMaxAge) }
	old, err := r.Read(container, &young)
	require.NoError(t, err)
	assert.Equal(t, int64(2048), *old.MaxOpenFiles, "read again with the spec")
}
