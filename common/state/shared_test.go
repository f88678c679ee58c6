package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSamples(t *testing.T, root string, version int) *Records[sample] {
	t.Helper()
	r, err := NewRecords[sample](root, "samples", version)
	require.NoError(t, err)
	return r
}

func TestRecordsRoundTrip(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run", "nri-suite")
	r := newSamples(t, root, 1)
	assert.Equal(t, filepath.Join(root, "samples"), r.Dir())

	// Before anything is published, readers see nothing and create nothing.
	_, found, err := r.Read("a")
	require.NoError(t, err)
	assert.False(t, found)
	keys, err := r.Keys()
	require.NoError(t, err)
	assert.Empty(t, keys)
	all, err := r.List()
	require.NoError(t, err)
	assert.Empty(t, all)
	require.NoError(t, r.Remove("a"))
	assert.NoDirExists(t, root)

	a := sample{Name: "a", CPUs: []int{1}}
	b := sample{Name: "b", CPUs: []int{2, 3}}
	require.NoError(t, r.Publish("b-2", b))
	require.NoError(t, r.Publish("a.1", sample{Name: "stale"}))
	require.NoError(t, r.Publish("a.1", a))

	got, found, err := r.Read("a.1")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, a, got)
	keys, err = r.Keys()
	require.NoError(t, err)
	assert.Equal(t, []string{"a.1", "b-2"}, keys)
	all, err = r.List()
	require.NoError(t, err)
	assert.Equal(t, map[string]sample{"a.1": a, "b-2": b}, all)

	assert.Equal(t, os.FileMode(0o644), fileMode(t, filepath.Join(r.Dir(), "a.1.json")))
	assert.Equal(t, os.FileMode(0o755), fileMode(t, r.Dir()))
	assert.Equal(t, os.FileMode(0o755), fileMode(t, root))

	require.NoError(t, r.Remove("a.1"))
	require.NoError(t, r.Remove("a.1"), "removing an absent record is not an error")
	_, found, err = r.Read("a.1")
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, []string{lockName, "b-2.json"}, dirNames(t, r.Dir()))
}

func TestRecordsRejectBadKeys(t *testing.T) {
	for _, key := range []string{
		"", "../x", "..", ".", "a/b", "/etc/passwd", ".hidden", "x\x00y", "with space", "é",
		strings.Repeat("k", 129),
	} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			base := t.TempDir()
			r := newSamples(t, filepath.Join(base, "root"), 1)
			quoted := fmt.Sprintf("%q", key)

			err := r.Publish(key, sample{Name: "x"})
			require.ErrorIs(t, err, ErrInvalidName)
			assert.ErrorContains(t, err, "publishing samples record: invalid name: key "+quoted)
			assert.ErrorContains(t, err, "want 1-128 characters of [A-Za-z0-9_.-]")

			_, found, err := r.Read(key)
			require.ErrorIs(t, err, ErrInvalidName)
			assert.ErrorContains(t, err, quoted)
			assert.False(t, found)

			err = r.Remove(key)
			require.ErrorIs(t, err, ErrInvalidName)
			assert.ErrorContains(t, err, quoted)

			assert.Empty(t, dirNames(t, base), "nothing was written anywhere")
		})
	}
}

func TestNewRecordsRejects(t *testing.T) {
	tests := []struct {
		name, root, kind string
		version          int
		wantErr          string
	}{
		{"empty root", "", "samples", 1, "empty shared state directory"},
		{"kind escapes root", "/run/x", "../etc", 1, `invalid name: kind "../etc"`},
		{"kind with separator", "/run/x", "a/b", 1, `invalid name: kind "a/b"`},
		{"version zero", "/run/x", "samples", 0, "binding samples records: schema version 0, want >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRecords[sample](tt.root, tt.kind, tt.version)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestRecordsBadRecordIsReportedAndLeftInPlace(t *testing.T) {
	root := t.TempDir()
	r := newSamples(t, root, 1)
	good := sample{Name: "good"}
	require.NoError(t, r.Publish("good", good))
	newer := newSamples(t, root, 2)
	require.NoError(t, newer.Publish("newer", good))
	garbage := []byte(`{"format":1,"version":1,"checks`)
	garbagePath := filepath.Join(r.Dir(), "torn.json")
	require.NoError(t, os.WriteFile(garbagePath, garbage, 0o644))

	_, found, err := r.Read("torn")
	assert.False(t, found)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorIs(t, err, ErrMalformed)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, garbagePath, ce.File)
	assert.Empty(t, ce.MovedTo, "readers do not move the publisher's files")
	assert.ErrorContains(t, err, "corrupt state file "+garbagePath)
	kept, err := os.ReadFile(garbagePath)
	require.NoError(t, err)
	assert.Equal(t, garbage, kept)

	all, err := r.List()
	assert.Equal(t, map[string]sample{"good": good}, all, "a bad record does not hide the good ones")
	require.ErrorIs(t, err, ErrCorrupt)
	assert.ErrorIs(t, err, ErrWrongVersion)
	assert.ErrorContains(t, err, garbagePath)
	assert.ErrorContains(t, err, filepath.Join(r.Dir(), "newer.json")+": wrong version: schema version 2, want 1")
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok)
	assert.Len(t, joined.Unwrap(), 2, "one error per bad record")

	require.NoError(t, r.Publish("torn", good), "the publisher replaces a bad record")
	got, found, err := r.Read("torn")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, good, got)
}

func TestRecordsKeysSkipOtherFiles(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	require.NoError(t, r.Publish("ctr-1", sample{}))
	for _, name := range []string{".ctr-2.json.tmp", ".hidden.json", "notes.txt", "ctr-3.json.corrupt-20250101T000000Z"} {
		require.NoError(t, os.WriteFile(filepath.Join(r.Dir(), name), []byte("x"), 0o644))
	}
	keys, err := r.Keys()
	require.NoError(t, err)
	assert.Equal(t, []string{"ctr-1"}, keys)
}

func TestRecordsRemoveStaleTemp(t *testing.T) {
	tests := []struct {
		name string
		op   func(r *Records[sample]) error
	}{
		{"on publish", func(r *Records[sample]) error { return r.Publish("k", sample{Name: "new"}) }},
		{"on remove", func(r *Records[sample]) error { return r.Remove("k") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSamples(t, t.TempDir(), 1)
			require.NoError(t, r.Publish("k", sample{Name: "old"}))
			tmp := tempPath(filepath.Join(r.Dir(), "k.json"))
			require.NoError(t, os.WriteFile(tmp, []byte("torn"), 0o644))

			require.NoError(t, tt.op(r))
			assert.NoFileExists(t, tmp)
		})
	}
}

// Publishers of one directory serialize on its lock file, also within one
// process where no mutex guards a Records.
func TestRecordsConcurrentPublishers(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	const publishers, rounds = 6, 10
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range rounds {
				assert.NoError(t, r.Publish("shared", sample{Name: "shared", CPUs: []int{p, i}}))
				assert.NoError(t, r.Publish(fmt.Sprintf("own-%d", p), sample{Name: "own", CPUs: []int{p, i}}))
			}
		})
	}
	wg.Wait()

	all, err := r.List()
	require.NoError(t, err)
	require.Len(t, all, publishers+1)
	for p := range publishers {
		assert.Equal(t, []int{p, rounds - 1}, all[fmt.Sprintf("own-%d", p)].CPUs, "publisher %d's last record", p)
	}
	assert.Equal(t, rounds-1, all["shared"].CPUs[1], "the shared record is some publisher's last")
	assert.NotContains(t, strings.Join(dirNames(t, r.Dir()), " "), ".tmp")
}

// Readers take no lock, so this shows the rename alone keeps them from
// seeing a partial record.
func TestRecordsReadersNeverSeePartialRecords(t *testing.T) {
	root := t.TempDir()
	r, err := NewRecords[generation](root, "big", 1)
	require.NoError(t, err)
	require.NoError(t, r.Publish("k", generationOf(0)))

	const gens = 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	reads := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, found, err := r.Read("k")
			reads++
			if !assert.NoError(t, err) || !assert.True(t, found) {
				return
			}
			assert.Equal(t, generationOf(got.Gen), got)
		}
	})
	for gen := 1; gen <= gens; gen++ {
		require.NoError(t, r.Publish("k", generationOf(gen)))
	}
	close(stop)
	wg.Wait()
	got, _, err := r.Read("k")
	require.NoError(t, err)
	assert.Equal(t, gens, got.Gen)
	assert.Positive(t, reads)
	t.Logf("%d reads during %d publishes", reads, gens)
}

func FuzzValidateName(f *testing.F) {
	for _, seed := range []string{"a", "30-topology-aware", "../x", "..", "a/b", ".x", "", "a\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := validateName("key", name)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidName))
			require.Contains(t, err.Error(), fmt.Sprintf("%q", name))
			return
		}
		// An accepted name is one plain file inside the directory.
		dir := "/run/nri-suite/kind"
		path := filepath.Join(dir, name+recordExt)
		require.Equal(t, dir, filepath.Dir(path))
		require.Equal(t, name+recordExt, filepath.Base(path))
		require.False(t, strings.HasPrefix(name, "."))
	})
}

// TestConditionalPublishAndRemove: may sees the record there and keeps it
// or lets it go; a record that cannot be read is always replaced.
func TestConditionalPublishAndRemove(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	keep := func(sample) bool { return false }
	published, err := r.PublishIf("k", sample{Name: "first"}, keep)
	require.NoError(t, err)
	assert.True(t, published, "nothing there to keep")
	published, err = r.PublishIf("k", sample{Name: "second"}, keep)
	require.NoError(t, err)
	assert.False(t, published)
	removed, err := r.RemoveIf("k", keep)
	require.NoError(t, err)
	assert.False(t, removed)
	got, _, err := r.Read("k")
	require.NoError(t, err)
	assert.Equal(t, "first", got.Name, "kept")

	var seen sample
	published, err = r.PublishIf("k", sample{Name: "third"}, func(s sample) bool { seen = s; return true })
	require.NoError(t, err)
	assert.True(t, published)
	assert.Equal(t, "first", seen.Name, "may sees the record there")

	require.NoError(t, os.WriteFile(filepath.Join(r.Dir(), "k.json"), []byte(`{"format": 1, "version": 9, "checksum": "x", "data": {}}`), 0o644))
	published, err = r.PublishIf("k", sample{Name: "fourth"}, keep)
	require.NoError(t, err)
	assert.True(t, published, "an unreadable record is replaced")
	removed, err = r.RemoveIf("k", func(s sample) bool { return s.Name == "fourth" })
	require.NoError(t, err)
	assert.True(t, removed)
	_, found, err := r.Read("k")
	require.NoError(t, err)
	assert.False(t, found)
}

// Unsynced records are the same records, written without syncing: readers
// see what was published, and the records they came from stay synced.
func TestRecordsUnsynced(t *testing.T) {
	r := newSamples(t, t.TempDir(), 1)
	u := r.Unsynced()
	assert.Equal(t, r.Dir(), u.Dir())
	assert.Equal(t, synced, r.sync, "the original is unchanged")
	assert.Equal(t, unsynced, u.sync)
	want := sample{Name: "a"}
	require.NoError(t, u.Publish("a", want))
	got, found, err := r.Read("a")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, want, got)
	names, err := filepath.Glob(filepath.Join(r.Dir(), ".*.tmp"))
	require.NoError(t, err)
	assert.Empty(t, names, "renamed into place")
}
