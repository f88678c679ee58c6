package fsread

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(regular, []byte("four"), 0o644))
	link := filepath.Join(dir, "link.yaml")
	require.NoError(t, os.Symlink(regular, link))

	data, err := File(regular, 4)
	require.NoError(t, err, "a file of exactly the limit")
	assert.Equal(t, "four", string(data))
	data, err = File(link, 4)
	require.NoError(t, err, "File follows links")
	assert.Equal(t, "four", string(data))
	data, err = File(filepath.Join("/proc/self/comm"), 64)
	require.NoError(t, err, "a /proc file, whose size says 0")
	assert.NotEmpty(t, data)

	_, err = File(regular, 3)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.EqualError(t, err, "reading "+regular+": larger than the limit of 3 bytes")

	_, err = NoFollow(link, 4)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, "reading "+link+": it is a symbolic link: not a regular file")

	_, err = File(filepath.Join(dir, "absent"), 4)
	assert.ErrorIs(t, err, fs.ErrNotExist, "callers tell a missing file from a bad one")
}

// TestNotRegular: what is not a regular file is refused, naming the path and
// what it is, and a FIFO without a writer does not block the read (the test
// would hang otherwise).
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()

	for _, tc := range []struct{ path, what string }{
		{fifo, "a named pipe (FIFO)"},
		{dir, "a directory"},
		{"/dev/null", "a character device"},
	} {
		for name, read := range map[string]func(string, int64) ([]byte, error){"File": File, "NoFollow": NoFollow} {
			_, err := read(tc.path, 1<<20)
			assert.ErrorIs(t, err, ErrNotRegular, "%s %s", name, tc.path)
			assert.EqualError(t, err, "reading "+tc.path+": it is "+tc.what+": not a regular file", name)
		}
	}
	// A socket cannot be opened at all; the error still names it.
	_, err = File(sock, 1<<20)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "reading "+sock+": "), err.Error())
}

func TestSize(t *testing.T) {
	assert.Equal(t, "1 MiB", Size(1<<20))
	assert.Equal(t, "4 KiB", Size(4096))
	assert.Equal(t, "1000 bytes", Size(1000))
	assert.Equal(t, "1025 KiB", Size(1<<20+1<<10))
}
