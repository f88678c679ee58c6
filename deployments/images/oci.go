package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// buildOptions say where the binaries are and how the images are named.
type buildOptions struct {
	BinDir   string
	Registry string
	Tag      string
	Arch     string
}

// binDir is where the binaries go in the image.
const binDir = "usr/local/bin"

// Media types of the OCI image spec.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// epoch is every file's and the image's time: reproducible, not a build date.
var epoch = time.Unix(0, 0).UTC()

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blob is content addressed by its digest.
type blob struct {
	data   []byte
	digest string
}

func newBlob(data []byte) blob {
	return blob{data: data, digest: fmt.Sprintf("sha256:%x", sha256.Sum256(data))}
}

func (b blob) descriptor(mediaType string) descriptor {
	return descriptor{MediaType: mediaType, Digest: b.digest, Size: len(b.data)}
}

// writeImage writes the OCI archive of one plugin's image to path and
// returns its reference and manifest digest.
func writeImage(path, plugin string, files []string, opts buildOptions) (ref, digest string, err error) {
	layer, err := layerTar(opts.BinDir, files)
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	compressed, err := gzipped(layer)
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	layerBlob := newBlob(compressed)
	ref = fmt.Sprintf("%s/nri-%s:%s", opts.Registry, plugin, opts.Tag)
	config, err := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": opts.Arch,
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": []string{"/" + binDir + "/" + files[0]},
			// The NRI socket is root's and writable by root only: every
			// plugin connects to it, so none can run as another user.
			"User":       "0:0",
			"WorkingDir": "/",
			"Labels": map[string]string{
				"org.opencontainers.image.title":   "nri-" + plugin,
				"org.opencontainers.image.version": opts.Tag,
			},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{newBlob(layer).digest}},
	})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding config: %w", plugin, err)
	}
	configBlob := newBlob(config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        configBlob.descriptor(mediaConfig),
		"layers":        []descriptor{layerBlob.descriptor(mediaLayer)},
	})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding manifest: %w", plugin, err)
	}
	manifestBlob := newBlob(manifest)
	m := manifestBlob.descriptor(mediaManifest)
	m.Annotations = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": opts.Tag}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{m}})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding index: %w", plugin, err)
	}
	entries := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	for _, b := range []blob{layerBlob, configBlob, manifestBlob} {
		entries["blobs/sha256/"+b.digest[len("sha256:"):]] = b.data
	}
	archive, err := tarOf(entries)
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	if err := writeFileAtomic(path, archive); err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	return ref, manifestBlob.digest, nil
}

// layerTar is the image's filesystem: the directories to binDir and the
// binaries in it, executable by everybody, owned by root.
func layerTar(dir string, files []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/local/", binDir + "/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(slices.Values(files)) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading binary: %w", err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: binDir + "/" + name, Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarOf archives files (path -> content) in path order, as regular files
// of mode 0644 after their directories, of mode 0755.
func tarOf(files map[string][]byte) ([]byte, error) {
	dirs := map[string]bool{}
	for name := range files {
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipped compresses data with a header that holds no time or name.
func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeFileAtomic writes data to path through a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
