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
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/version"
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

// readDir returns the regular files under dir by slash-separated path.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		files[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	}))
	return files
}

var amd64, arm64 = v1.Platform{OS: "linux", Architecture: "amd64"}, v1.Platform{OS: "linux", Architecture: "arm64"}

// fakeBinaries writes every image's files for each platform, each naming
// its platform, and returns the options that image them.
func fakeBinaries(t *testing.T, platforms ...v1.Platform) buildOptions {
	opts := buildOptions{Registry: "registry.example/nri", Tag: "v1", Source: "https://example.com/nri-suite",
		Build: version.Info{Version: "v0.0.0-20261202135003-5abd7d61f87a", Revision: "5abd7d61f87a",
			GoVersion: "go1.26.0", Time: time.Date(2026, 12, 2, 13, 50, 3, 0, time.UTC)}}
	for _, p := range platforms {
		dir := t.TempDir()
		for _, files := range imageFiles {
			for _, f := range files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("ELF "+p.Architecture+" "+f), 0o755))
			}
		}
		opts.Platforms = append(opts.Platforms, platformBinaries{Platform: p, Dir: dir})
	}
	return opts
}

func TestWriteImageIsReproducibleAndValid(t *testing.T) {
	opts := fakeBinaries(t, amd64, arm64)
	first, second := t.TempDir(), t.TempDir()
	ref, digest, err := writeImage(first, "sidecar-order", imageFiles["sidecar-order"], opts)
	require.NoError(t, err)
	assert.Equal(t, "registry.example/nri/nri-sidecar-order:v1", ref)
	_, digest2, err := writeImage(second, "sidecar-order", imageFiles["sidecar-order"], opts)
	require.NoError(t, err)
	a, err := os.ReadFile(filepath.Join(first, "nri-sidecar-order.tar"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(second, "nri-sidecar-order.tar"))
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same binaries give the same archive")
	assert.Equal(t, digest, digest2)

	files := readTar(t, a)
	assert.Equal(t, files, readDir(t, filepath.Join(first, "nri-sidecar-order")), "the archive holds the layout")
	assert.NoDirExists(t, filepath.Join(first, "nri-sidecar-order.tmp"))

	// Walk the layout: index.json -> the image index -> each platform's
	// manifest -> config and layer, every blob under its digest.
	assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))
	blobOf := func(d specs.Descriptor) []byte {
		data, ok := files["blobs/sha256/"+d.Digest.Encoded()]
		require.True(t, ok, "blob %s", d.Digest)
		assert.Equal(t, d.Digest.String(), fmt.Sprintf("sha256:%x", sha256.Sum256(data)))
		assert.Equal(t, d.Size, int64(len(data)))
		return data
	}
	var top specs.Index
	require.NoError(t, json.Unmarshal(files["index.json"], &top))
	require.Len(t, top.Manifests, 1, "one entry, which crane push and skopeo take without being told which")
	assert.Equal(t, specs.MediaTypeImageIndex, top.Manifests[0].MediaType)
	assert.Equal(t, digest, top.Manifests[0].Digest.String())
	assert.Equal(t, map[string]string{imageNameAnnotation: ref, specs.AnnotationRefName: "v1"}, top.Manifests[0].Annotations)

	wantAnnotations := map[string]string{
		"org.opencontainers.image.title":    "nri-sidecar-order",
		"org.opencontainers.image.version":  "v1",
		"org.opencontainers.image.revision": "5abd7d61f87a",
		"org.opencontainers.image.created":  "2026-12-02T13:50:03Z",
		"org.opencontainers.image.source":   "https://example.com/nri-suite",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	var index specs.Index
	require.NoError(t, json.Unmarshal(blobOf(top.Manifests[0]), &index))
	assert.Equal(t, specs.MediaTypeImageIndex, index.MediaType)
	assert.Equal(t, wantAnnotations, index.Annotations)
	require.Len(t, index.Manifests, 2)
	for i, arch := range []string{"amd64", "arm64"} {
		desc := index.Manifests[i]
		assert.Equal(t, &specs.Platform{OS: "linux", Architecture: arch}, desc.Platform)
		var manifest specs.Manifest
		require.NoError(t, json.Unmarshal(blobOf(desc), &manifest))
		assert.Equal(t, 2, manifest.SchemaVersion)
		assert.Equal(t, specs.MediaTypeImageManifest, manifest.MediaType)
		assert.Equal(t, wantAnnotations, manifest.Annotations)
		assert.Equal(t, specs.MediaTypeImageConfig, manifest.Config.MediaType)
		require.Len(t, manifest.Layers, 1)
		assert.Equal(t, specs.MediaTypeImageLayerGzip, manifest.Layers[0].MediaType)

		var config specs.Image
		require.NoError(t, json.Unmarshal(blobOf(manifest.Config), &config))
		assert.Equal(t, arch, config.Architecture)
		assert.Equal(t, "linux", config.OS)
		assert.Equal(t, "2026-12-02T13:50:03Z", config.Created.Format(time.RFC3339), "created at the commit, not at build time")
		assert.Equal(t, []string{"/usr/local/bin/nri-sidecar-order"}, config.Config.Entrypoint)
		assert.Equal(t, "0:0", config.Config.User)
		assert.Equal(t, wantAnnotations, config.Config.Labels)

		zr, err := gzip.NewReader(bytes.NewReader(blobOf(manifest.Layers[0])))
		require.NoError(t, err)
		layer, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Len(t, config.RootFS.DiffIDs, 1)
		assert.Equal(t, fmt.Sprintf("sha256:%x", sha256.Sum256(layer)), config.RootFS.DiffIDs[0].String(), "diff id of the uncompressed layer")
		assert.Equal(t, map[string][]byte{
			"usr/local/bin/nri-sidecar-order":  []byte("ELF " + arch + " nri-sidecar-order"),
			"usr/local/bin/nri-sidecar-helper": []byte("ELF " + arch + " nri-sidecar-helper"),
			"usr/local/bin/nri-suite-copy":     []byte("ELF " + arch + " nri-suite-copy"),
		}, readTar(t, layer), "%s's own binaries", arch)
	}
}

func TestAnnotationsWithoutVCS(t *testing.T) {
	opts := fakeBinaries(t)
	opts.Build = version.Info{Version: "(devel)", Revision: version.Unknown, GoVersion: "go1.26.0"}
	a := annotations("stats", opts)
	assert.NotContains(t, a, specs.AnnotationRevision, "no revision rather than \"unknown\"")
	assert.Equal(t, "1970-01-01T00:00:00Z", a[specs.AnnotationCreated], "the epoch without a commit time")
}

func TestWriteImageErrors(t *testing.T) {
	opts := fakeBinaries(t, amd64)
	opts.Platforms = append(opts.Platforms, platformBinaries{Platform: arm64, Dir: t.TempDir()})
	_, _, err := writeImage(t.TempDir(), "stats", imageFiles["stats"], opts)
	assert.ErrorContains(t, err, "image nri-stats: linux/arm64: reading binary: open "+filepath.Join(opts.Platforms[1].Dir, "nri-stats"))

	opts = fakeBinaries(t, amd64)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "nri-stats.tar"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(out, "nri-stats.tar.tmp"), 0o755))
	_, _, err = writeImage(out, "stats", imageFiles["stats"], opts)
	assert.ErrorContains(t, err, "image nri-stats: writing "+filepath.Join(out, "nri-stats.tar"))
}

func TestParsePlatform(t *testing.T) {
	p, err := parsePlatform("linux/arm64=_out/images/bin-linux-arm64")
	require.NoError(t, err)
	assert.Equal(t, platformBinaries{Platform: arm64, Dir: "_out/images/bin-linux-arm64"}, p)
	for value, want := range map[string]string{
		"linux/arm64":            `"linux/arm64": expected os/arch=directory`,
		"linux/arm64=":           `"linux/arm64=": expected os/arch=directory`,
		"darwin/arm64=bin":       `"darwin/arm64=bin": platform darwin/arm64 is not linux/<GOARCH> without a variant`,
		"linux/arm/v7=bin":       `platform linux/arm/v7 is not linux/<GOARCH> without a variant`,
		"linux=bin":              `platform linux is not linux/<GOARCH>`,
		"linux/amd64/v3/x=bin":   `"linux/amd64/v3/x=bin": too many slashes`,
		"linux/amd64:10.0.1=bin": `platform linux/amd64:10.0.1 is not linux/<GOARCH>`,
	} {
		_, err := parsePlatform(value)
		assert.ErrorContains(t, err, want, value)
	}
}

// goBinaries links the Go executable exe under every image file's name
// into a directory per platform.
func goBinaries(t *testing.T, exe string) []platformBinaries {
	var platforms []platformBinaries
	for _, p := range []v1.Platform{amd64, arm64} {
		dir := t.TempDir()
		for _, files := range imageFiles {
			for _, f := range files {
				require.NoError(t, os.Symlink(exe, filepath.Join(dir, f)))
			}
		}
		platforms = append(platforms, platformBinaries{Platform: p, Dir: dir})
	}
	return platforms
}

func TestReadBuild(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	want, err := version.ReadFile(exe)
	require.NoError(t, err)
	platforms := goBinaries(t, exe)
	got, err := readBuild(platforms, "0.1.0")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// A binary of another build: the go command's own.
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	other := filepath.Join(platforms[1].Dir, "nri-stats")
	require.NoError(t, os.Remove(other))
	require.NoError(t, os.Symlink(goCmd, other))
	_, err = readBuild(platforms, "0.1.0")
	assert.ErrorContains(t, err, other+" is ")
	assert.ErrorContains(t, err, "the images need binaries of one build")

	require.NoError(t, os.Remove(other))
	require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755))
	_, err = readBuild(platforms, "0.1.0")
	assert.ErrorContains(t, err, "reading the build of "+other)
}

func TestCheckTag(t *testing.T) {
	for _, tc := range []struct{ version, tag, wantErr string }{
		{"v0.1.0", "0.1.0", ""},
		{"v0.1.0+dirty", "0.1.0", ""},
		{"v0.0.0-20261202135003-5abd7d61f87a", "0.1.0", ""},
		{"v0.1.1-0.20261202135003-5abd7d61f87a+dirty", "0.1.0", ""},
		{"(devel)", "0.1.0", ""},
		{version.Unknown, "0.1.0", ""},
		{"v0.2.0", "0.1.0", `the binaries are release v0.2.0 but the image tag is "0.1.0": tag the images 0.2.0`},
		{"v0.2.0-rc.1", "0.2.0", `tag the images 0.2.0-rc.1`},
	} {
		err := checkTag(tc.version, tc.tag)
		if tc.wantErr == "" {
			assert.NoError(t, err, tc.version)
		} else {
			assert.ErrorContains(t, err, tc.wantErr, tc.version)
		}
	}
}
