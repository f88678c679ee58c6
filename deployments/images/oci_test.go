package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTar returns a tar's regular files by name, checking every entry's
// metadata is the reproducible one.
func readTar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		assert.True(t, hdr.ModTime.Equal(epoch), "%s: mtime %s", hdr.Name, hdr.ModTime)
		assert.Zero(t, hdr.Uid, hdr.Name)
		assert.Zero(t, hdr.Gid, hdr.Name)
		if hdr.Typeflag == tar.TypeReg {
			content, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[hdr.Name] = content
			if filepath.Dir(hdr.Name) == binDir {
				assert.Equal(t, int64(0o755), hdr.Mode, hdr.Name)
			}
		}
	}
}

func fakeBinaries(t *testing.T) string {
	dir := t.TempDir()
	for _, files := range imageFiles {
		for _, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("ELF "+f), 0o755))
		}
	}
	return dir
}

func TestWriteImageIsReproducibleAndValid(t *testing.T) {
	opts := buildOptions{BinDir: fakeBinaries(t), Registry: "registry.example/nri", Tag: "v1", Arch: "amd64"}
	out := t.TempDir()
	first, second := filepath.Join(out, "a.tar"), filepath.Join(out, "b.tar")
	ref, digest, err := writeImage(first, "sidecar-order", imageFiles["sidecar-order"], opts)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/nri/nri-sidecar-order:v1", ref)
	_, digest2, err := writeImage(second, "sidecar-order", imageFiles["sidecar-order"], opts)
	require.NoError(t, err)
	a, err := os.ReadFile(first)
	require.NoError(t, err)
	b, err := os.ReadFile(second)
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same binaries give the same archive")
	assert.Equal(t, digest, digest2)

	// Walk the layout: index -> manifest -> config and layer, every blob
	// under its digest.
	files := readTar(t, a)
	assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))
	blobOf := func(d specs.Descriptor) []byte {
		data, ok := files["blobs/sha256/"+d.Digest.Encoded()]
		require.True(t, ok, "blob %s", d.Digest)
		assert.Equal(t, d.Digest.String(), fmt.Sprintf("sha256:%x", sha256.Sum256(data)))
		assert.Equal(t, d.Size, int64(len(data)))
		return data
	}
	var index specs.Index
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	assert.Equal(t, specs.MediaTypeImageIndex, index.MediaType)
	require.Len(t, index.Manifests, 1)
	assert.Equal(t, digest, index.Manifests[0].Digest.String())
	assert.Equal(t, ref, index.Manifests[0].Annotations["io.containerd.image.name"])
	var manifest specs.Manifest
	require.NoError(t, json.Unmarshal(blobOf(index.Manifests[0]), &manifest))
	assert.Equal(t, 2, manifest.SchemaVersion)
	assert.Equal(t, specs.MediaTypeImageConfig, manifest.Config.MediaType)
	require.Len(t, manifest.Layers, 1)
	assert.Equal(t, specs.MediaTypeImageLayerGzip, manifest.Layers[0].MediaType)
	var config specs.Image
	require.NoError(t, json.Unmarshal(blobOf(manifest.Config), &config))
	assert.Equal(t, "amd64", config.Architecture)
	assert.Equal(t, "linux", config.OS)
	assert.True(t, config.Created.Equal(epoch), "created at the epoch, not at build time")
	assert.Equal(t, []string{"/usr/local/bin/nri-sidecar-order"}, config.Config.Entrypoint)
	assert.Equal(t, "0:0", config.Config.User)

	zr, err := gzip.NewReader(bytes.NewReader(blobOf(manifest.Layers[0])))
	require.NoError(t, err)
	layer, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Len(t, config.RootFS.DiffIDs, 1)
	assert.Equal(t, fmt.Sprintf("sha256:%x", sha256.Sum256(layer)), config.RootFS.DiffIDs[0].String(), "diff id of the uncompressed layer")
	assert.Equal(t, map[string][]byte{
		"usr/local/bin/nri-sidecar-order":  []byte("ELF nri-sidecar-order"),
		"usr/local/bin/nri-sidecar-helper": []byte("ELF nri-sidecar-helper"),
		"usr/local/bin/nri-suite-copy":     []byte("ELF nri-suite-copy"),
	}, readTar(t, layer))
}

func TestWriteImageErrors(t *testing.T) {
	opts := buildOptions{BinDir: t.TempDir(), Registry: "r", Tag: "v1", Arch: "amd64"}
	_, _, err := writeImage(filepath.Join(t.TempDir(), "x.tar"), "stats", imageFiles["stats"], opts)
	assert.ErrorContains(t, err, "image nri-stats: reading binary: open "+filepath.Join(opts.BinDir, "nri-stats"))
	opts.BinDir = fakeBinaries(t)
	_, _, err = writeImage(filepath.Join(t.TempDir(), "missing", "x.tar"), "stats", imageFiles["stats"], opts)
	assert.ErrorContains(t, err, "image nri-stats: writing ")
}
