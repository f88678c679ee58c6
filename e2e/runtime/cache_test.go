package runtime

import (
	"archive/tar"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheLayout(t *testing.T) {
	t.Setenv("NRI_SUITE_CACHE", "/cache")
	c := DefaultCache()
	assert.Equal(t, "/cache/bin/runc", c.Bin("runc"))
	assert.Equal(t, "/usr/bin/conmon", c.Bin("/usr/bin/conmon"), "a binary from the distribution keeps its path")
	assert.Equal(t, []Image{
		{Ref: BusyboxImage, Archive: "/cache/images/busybox.tar"},
		{Ref: PauseImage, Archive: "/cache/images/pause.tar"},
	}, c.Images())
	t.Setenv("NRI_SUITE_CACHE", "")
	assert.Equal(t, DefaultCacheDir, DefaultCache().Root)
}

func TestArchiveImage(t *testing.T) {
	const ref = "ghcr.io/nri-suite/nri-stats:0.1.0"
	manifest := func(annotations string) string {
		return `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:00","size":1,"annotations":{` + annotations + `}}`
	}
	named := manifest(`"io.containerd.image.name":"` + ref + `","org.opencontainers.image.ref.name":"0.1.0"`)
	index := func(manifests ...string) []byte {
		return []byte(`{"schemaVersion":2,"manifests":[` + strings.Join(manifests, ",") + `]}`)
	}
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	tests := []struct {
		name    string
		entries map[string][]byte
		wantErr string
	}{
		{name: "make images", entries: map[string][]byte{"blobs/sha256/00": nil, "index.json": index(named), "oci-layout": layout}},
		{name: "tar of a directory", entries: map[string][]byte{"./index.json": index(named), "./oci-layout": layout}},
		{name: "docker tarball", entries: map[string][]byte{"manifest.json": []byte(`[]`)}, wantErr: "no index.json, expected an OCI layout"},
		{name: "two manifests", entries: map[string][]byte{"index.json": index(named, named)}, wantErr: "index.json lists 2 manifests, expected 1"},
		{name: "unnamed", entries: map[string][]byte{"index.json": index(manifest(`"org.opencontainers.image.ref.name":"0.1.0"`))},
			wantErr: "the manifest in index.json has no io.containerd.image.name annotation"},
		{name: "short name", entries: map[string][]byte{"index.json": index(manifest(`"io.containerd.image.name":"nri-stats:0.1.0"`))},
			wantErr: `image reference "nri-stats:0.1.0": has no domain`},
		{name: "not JSON", entries: map[string][]byte{"index.json": []byte(`{`)}, wantErr: "decoding index.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "image.tar")
			writeTar(t, path, tt.entries)
			got, err := ArchiveImage(path)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorContains(t, err, path, "the error names the archive")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Image{Ref: ref, Archive: path}, got)
		})
	}

	notTar := filepath.Join(t.TempDir(), "image.tar")
	require.NoError(t, os.WriteFile(notTar, []byte("not a tar"), 0o644))
	_, err := ArchiveImage(notTar)
	assert.ErrorContains(t, err, "reading image archive "+notTar)
	_, err = ArchiveImage(filepath.Join(t.TempDir(), "missing.tar"))
	assert.ErrorContains(t, err, "missing.tar: no such file")
}

// The cache's archives name the references the sandbox loads them under.
func TestArchiveImageOfCache(t *testing.T) {
	for _, img := range DefaultCache().Images() {
		if _, err := os.Stat(img.Archive); err != nil && !InCI() {
			t.Skipf("image archive missing (%v): %s", err, installHint)
		}
		got, err := ArchiveImage(img.Archive)
		require.NoError(t, err)
		assert.Equal(t, img, got)
	}
}

func TestSandboxImages(t *testing.T) {
	cache := Cache{Root: "/cache"}
	archive := filepath.Join(t.TempDir(), "nri-stats.tar")
	require.NoError(t, os.WriteFile(archive, nil, 0o644))
	stats := Image{Ref: "ghcr.io/nri-suite/nri-stats:0.1.0", Archive: archive}

	got, err := sandboxImages(cache, nil)
	require.NoError(t, err)
	assert.Equal(t, cache.Images(), got, "the cache's archives are checked by CheckPrereqs, not here")
	got, err = sandboxImages(cache, []Image{stats})
	require.NoError(t, err)
	assert.Equal(t, append(cache.Images(), stats), got, "the cache's images, then the extra ones")

	tests := []struct {
		name    string
		extra   Image
		wantErr string
	}{
		{name: "missing archive", extra: Image{Ref: stats.Ref, Archive: "/nonexistent/nri-stats.tar"},
			wantErr: "image ghcr.io/nri-suite/nri-stats:0.1.0: stat /nonexistent/nri-stats.tar: no such file or directory"},
		{name: "short name", extra: Image{Ref: "nri-stats:0.1.0", Archive: archive},
			wantErr: "image archive " + archive + `: image reference "nri-stats:0.1.0": has no domain`},
		{name: "a cache image's reference", extra: Image{Ref: BusyboxImage, Archive: archive},
			wantErr: "image " + BusyboxImage + " is given twice, by /cache/images/busybox.tar and " + archive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sandboxImages(cache, []Image{tt.extra})
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// writeTar writes a tar of regular files, sorted by name, to path.
func writeTar(t *testing.T, path string, entries map[string][]byte) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(entries[name]))}))
		_, err := tw.Write(entries[name])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
}

func TestCheckPrereqsNamesWhatIsMissing(t *testing.T) {
	cache := Cache{Root: t.TempDir()}
	err := CheckPrereqs(NewContainerd(), cache, false)
	if os.Geteuid() != 0 {
		require.ErrorIs(t, err, ErrNotRoot)
		assert.Equal(t, "needs root; run as root or in CI", err.Error())
		return
	}
	require.ErrorIs(t, err, ErrCacheIncomplete)
	assert.ErrorContains(t, err, filepath.Join(cache.Root, "bin", "kubelet"))
	assert.ErrorContains(t, err, filepath.Join(cache.Root, "images", "pause.tar"))
	assert.ErrorContains(t, err, "run `bash e2e/runtime/tools/install.sh`")
	assert.NotContains(t, err.Error(), "kube-apiserver", "a standalone sandbox needs no control plane")
	assert.ErrorContains(t, CheckPrereqs(NewContainerd(), cache, true), cache.Bin("kube-apiserver"))
	assert.ErrorContains(t, CheckPrereqs(NewContainerd(), cache, true), cache.Bin("bridge"))

	// A file that is there but not executable still counts as missing.
	require.NoError(t, os.MkdirAll(filepath.Join(cache.Root, "bin"), 0o755))
	require.NoError(t, os.WriteFile(cache.Bin("runc"), []byte("x"), 0o644))
	assert.ErrorContains(t, CheckPrereqs(NewContainerd(), cache, false), cache.Bin("runc"))
}

func TestNewRuntime(t *testing.T) {
	assert.Contains(t, RuntimeNames(), "containerd")
	rt, err := NewRuntime("containerd")
	require.NoError(t, err)
	assert.Equal(t, "containerd", rt.Name())
	_, err = NewRuntime("docker")
	assert.ErrorContains(t, err, `unknown runtime "docker": expected one of containerd`)
}

// requireBinary returns the default cache when it holds the named binary; a
// test that needs only the binary (not root) skips without it, except in CI.
func requireBinary(t *testing.T, name string) Cache {
	t.Helper()
	cache := DefaultCache()
	if _, err := os.Stat(cache.Bin(name)); err != nil {
		if InCI() {
			t.Fatalf("%s missing in CI: %v", name, err)
		}
		t.Skipf("%s binary missing (%v): %s", name, err, installHint)
	}
	return cache
}
