package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sample struct {
	Name   string         `json:"name"`
	CPUs   []int          `json:"cpus"`
	Pinned map[string]int `json:"pinned,omitempty"`
}

// dirNames lists dir, so tests can tell that no temp file was left behind.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "topology")
	path := filepath.Join(dir, "placements.json")
	c, err := NewCheckpoint[sample](path, 3)
	require.NoError(t, err)
	assert.Equal(t, path, c.Path())

	_, found, err := c.Load()
	require.NoError(t, err, "a missing directory is no checkpoint, not an error")
	assert.False(t, found)

	gens := []sample{
		{Name: "first", CPUs: []int{0, 1}, Pinned: map[string]int{"ctr-a": 2}},
		{Name: "second <&>", CPUs: []int{7}},
	}
	for _, want := range gens {
		require.NoError(t, c.Save(want))
		got, found, err := c.Load()
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, want, got)
	}

	assert.Equal(t, os.FileMode(0o600), fileMode(t, path))
	assert.Equal(t, os.FileMode(0o700), fileMode(t, dir))
	assert.Equal(t, []string{lockName, "placements.json"}, dirNames(t, dir))

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"format": 1`)
	assert.Contains(t, string(raw), `"version": 3`)
	assert.Contains(t, string(raw), `"checksum": "sha256:`)
}

func TestNewCheckpointRejects(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		version int
		wantErr string
	}{
		{"empty path", "", 1, "empty path"},
		{"version zero", "/x/c.json", 0, "schema version 0, want >= 1"},
		{"negative version", "/x/c.json", -2, "schema version -2, want >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCheckpoint[sample](tt.path, tt.version)
			require.ErrorContains(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.path)
		})
	}
}

// writeBytes returns a setup that puts raw bytes at the checkpoint's path.
func writeBytes(raw []byte) func(t *testing.T, path string) []byte {
	return func(t *testing.T, path string) []byte {
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		return raw
	}
}

func mustEncode(t *testing.T, version int, v any) []byte {
	t.Helper()
	raw, err := encode(version, v)
	require.NoError(t, err)
	return raw
}

func TestCheckpointLoadBadFile(t *testing.T) {
	good := sample{Name: "good", CPUs: []int{3}}
	tests := []struct {
		name string
		// setup makes the bad file and returns its bytes.
		setup      func(t *testing.T, path string) []byte
		wantReason error
		wantMsg    string
	}{
		{"garbage", writeBytes([]byte("\x00\xffnot json at all")), ErrMalformed, "decoding envelope"},
		{"empty file", writeBytes([]byte{}), ErrMalformed, "decoding envelope"},
		{"truncated", func(t *testing.T, path string) []byte {
			raw := mustEncode(t, 1, good)
			return writeBytes(raw[:len(raw)/2])(t, path)
		}, ErrMalformed, "unexpected EOF"},
		{"data after the envelope", func(t *testing.T, path string) []byte {
			return writeBytes(append(mustEncode(t, 1, good), "{}"...))(t, path)
		}, ErrMalformed, "data after the envelope"},
		{"unknown envelope field", writeBytes([]byte(`{"format":1,"version":1,"checksum":"","data":{},"extra":1}`)),
			ErrMalformed, `unknown field "extra"`},
		{"no data", writeBytes([]byte(`{"format":1,"version":1,"checksum":"sha256:00"}`)), ErrMalformed, "no data field"},
		{"payload of another type", func(t *testing.T, path string) []byte {
			return writeBytes(mustEncode(t, 1, map[string]int{"bogus": 1}))(t, path)
		}, ErrMalformed, `decoding data: json: unknown field "bogus"`},
		{"newer schema version", func(t *testing.T, path string) []byte {
			return writeBytes(mustEncode(t, 2, good))(t, path)
		}, ErrWrongVersion, "schema version 2, want 1"},
		{"other envelope format", writeBytes([]byte(`{"format":9,"version":1,"checksum":"","data":{}}`)),
			ErrWrongVersion, "format 9, want 1"},
		{"hand-edited payload", func(t *testing.T, path string) []byte {
			raw := mustEncode(t, 1, good)
			edited := bytes.Replace(raw, []byte(`"good"`), []byte(`"evil"`), 1)
			require.NotEqual(t, raw, edited)
			return writeBytes(edited)(t, path)
		}, ErrChecksumMismatch, "data hashes to"},
		{"missing checksum", writeBytes([]byte(`{"format":1,"version":1,"data":{"name":"x"}}`)),
			ErrChecksumMismatch, `file says ""`},
		{"path is a directory", func(t *testing.T, path string) []byte {
			require.NoError(t, os.MkdirAll(filepath.Join(path, "inner"), 0o700))
			return nil
		}, ErrUnreadable, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ckpt.json")
			c, err := NewCheckpoint[sample](path, 1)
			require.NoError(t, err)
			original := tt.setup(t, path)

			got, found, err := c.Load()
			require.Error(t, err)
			assert.False(t, found)
			assert.Zero(t, got)
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.ErrorIs(t, err, tt.wantReason)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.ErrorContains(t, err, path, "the error names the file")

			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.File)
			require.True(t, strings.HasPrefix(ce.MovedTo, path+".corrupt-"), "moved to %q", ce.MovedTo)
			assert.ErrorContains(t, err, "moved aside to "+ce.MovedTo)
			assert.NoFileExists(t, path)
			if errors.Is(err, ErrUnreadable) {
				assert.DirExists(t, filepath.Join(ce.MovedTo, "inner"))
			} else {
				kept, err := os.ReadFile(ce.MovedTo)
				require.NoError(t, err)
				assert.Equal(t, original, kept, "the bad file is kept as it was")
			}

			// The caller starts empty and carries on.
			require.NoError(t, c.Save(good))
			got, found, err = c.Load()
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, good, got)
		})
	}
}

func TestCheckpointParentIsAFile(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(parent, []byte("x"), 0o600))
	c, err := NewCheckpoint[sample](filepath.Join(parent, "ckpt.json"), 1)
	require.NoError(t, err)

	_, found, err := c.Load()
	require.ErrorContains(t, err, "loading checkpoint "+c.Path())
	assert.NotErrorIs(t, err, ErrCorrupt, "the location is unusable, not the file")
	assert.False(t, found)
	require.ErrorContains(t, c.Save(sample{}), "saving checkpoint "+c.Path())
}

func TestCheckpointRemovesStaleTemp(t *testing.T) {
	tests := []struct {
		name string
		op   func(c *Checkpoint[sample]) error
	}{
		{"on load", func(c *Checkpoint[sample]) error { _, _, err := c.Load(); return err }},
		{"on save", func(c *Checkpoint[sample]) error { return c.Save(sample{Name: "new"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := NewCheckpoint[sample](filepath.Join(dir, "ckpt.json"), 1)
			require.NoError(t, err)
			require.NoError(t, c.Save(sample{Name: "old"}))
			tmp := tempPath(c.Path())
			require.NoError(t, os.WriteFile(tmp, []byte(`{"format":1,"vers`), 0o600))

			require.NoError(t, tt.op(c))
			assert.NoFileExists(t, tmp)
			assert.Equal(t, []string{lockName, "ckpt.json"}, dirNames(t, dir))
			_, found, err := c.Load()
			require.NoError(t, err)
			assert.True(t, found)
		})
	}
}

func TestCheckpointConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCheckpoint[sample](filepath.Join(dir, "ckpt.json"), 1)
	require.NoError(t, err)
	require.NoError(t, c.Save(sample{Name: "w0-0"}))

	const writers, rounds = 6, 15
	written := make(map[string]bool)
	for w := range writers {
		for i := range rounds {
			written[fmt.Sprintf("w%d-%d", w, i)] = true
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				assert.NoError(t, c.Save(sample{Name: fmt.Sprintf("w%d-%d", w, i), CPUs: []int{w, i}}))
				got, found, err := c.Load()
				if assert.NoError(t, err) && assert.True(t, found) {
					assert.True(t, written[got.Name], "loaded %q, never written", got.Name)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, []string{lockName, "ckpt.json"}, dirNames(t, dir))
}

func FuzzCheckpointLoad(f *testing.F) {
	good, err := encode(1, sample{Name: "a", CPUs: []int{1, 2}, Pinned: map[string]int{"x": 1}})
	require.NoError(f, err)
	nullData, err := encode(1, (*sample)(nil))
	require.NoError(f, err)
	for _, seed := range [][]byte{
		good,
		good[:len(good)-9],
		nullData,
		bytes.Replace(good, []byte(`"version": 1`), []byte(`"version": 2`), 1),
		bytes.Replace(good, []byte(`"a"`), []byte(`"b"`), 1),
		[]byte(`{"format":1,"version":1,"checksum":"","data":[1,2]}`),
		[]byte("null"),
		[]byte("\xff\xfe"),
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		path := filepath.Join(t.TempDir(), "ckpt.json")
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		c, err := NewCheckpoint[sample](path, 1)
		require.NoError(t, err)

		got, found, err := c.Load()
		if err == nil {
			require.True(t, found)
			// What loads saves and loads again unchanged.
			require.NoError(t, c.Save(got))
			again, found, err := c.Load()
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, got, again)
			return
		}
		require.ErrorIs(t, err, ErrCorrupt)
		require.False(t, found)
		var ce *CorruptError
		require.True(t, errors.As(err, &ce))
		kept, readErr := os.ReadFile(ce.MovedTo)
		require.NoError(t, readErr)
		require.True(t, bytes.Equal(raw, kept), "the bad file is kept as it was")
		require.NoFileExists(t, path)
	})
}
