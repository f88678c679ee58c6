package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // go-digest's sha256 digests need the hash registered
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"
	specsgo "github.com/opencontainers/image-spec/specs-go"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
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

// epoch is every file's and the image's time: reproducible, not a build date.
var epoch = time.Unix(0, 0).UTC()

// blob is content addressed by its digest.
type blob struct {
	data   []byte
	digest digest.Digest
}

func newBlob(data []byte) blob { return blob{data: data, digest: digest.FromBytes(data)} }

func (b blob) descriptor(mediaType string) specs.Descriptor {
	return specs.Descriptor{MediaType: mediaType, Digest: b.digest, Size: int64(len(b.data))}
}

// jsonBlob is v encoded as a blob.
func jsonBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	return newBlob(data), err
}

// writeImage writes the OCI archive of one plugin's image to archivePath
// and returns its reference and manifest digest.
func writeImage(archivePath, plugin string, files []string, opts buildOptions) (ref, manifestDigest string, err error) {
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
	created := epoch
	configBlob, err := jsonBlob(specs.Image{
		Created:  &created,
		Platform: specs.Platform{Architecture: opts.Arch, OS: "linux"},
		Config: specs.ImageConfig{
			Entrypoint: []string{"/" + binDir + "/" + files[0]},
			// The NRI socket is root's and writable by root only: every
			// plugin connects to it, so none can run as another user.
			User:       "0:0",
			WorkingDir: "/",
			Labels: map[string]string{
				specs.AnnotationTitle:   "nri-" + plugin,
				specs.AnnotationVersion: opts.Tag,
			},
		},
		RootFS: specs.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}},
	})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding config: %w", plugin, err)
	}
	manifestBlob, err := jsonBlob(specs.Manifest{
		Versioned: specsgo.Versioned{SchemaVersion: 2},
		MediaType: specs.MediaTypeImageManifest,
		Config:    configBlob.descriptor(specs.MediaTypeImageConfig),
		Layers:    []specs.Descriptor{layerBlob.descriptor(specs.MediaTypeImageLayerGzip)},
	})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding manifest: %w", plugin, err)
	}
	m := manifestBlob.descriptor(specs.MediaTypeImageManifest)
	// The first is the name `ctr images import` gives the image.
	m.Annotations = map[string]string{"io.containerd.image.name": ref, specs.AnnotationRefName: opts.Tag}
	index, err := json.Marshal(specs.Index{
		Versioned: specsgo.Versioned{SchemaVersion: 2},
		MediaType: specs.MediaTypeImageIndex,
		Manifests: []specs.Descriptor{m},
	})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding index: %w", plugin, err)
	}
	layout, err := json.Marshal(specs.ImageLayout{Version: specs.ImageLayoutVersion})
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: encoding oci-layout: %w", plugin, err)
	}
	entries := map[string][]byte{specs.ImageLayoutFile: layout, specs.ImageIndexFile: index}
	for _, b := range []blob{layerBlob, configBlob, manifestBlob} {
		entries[path.Join(specs.ImageBlobsDir, b.digest.Algorithm().String(), b.digest.Encoded())] = b.data
	}
	archive, err := tarOf(entries, 0o644)
	if err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	if err := writeFileAtomic(archivePath, archive); err != nil {
		return "", "", fmt.Errorf("image nri-%s: %w", plugin, err)
	}
	return ref, manifestBlob.digest.String(), nil
}

// layerTar is the image's filesystem: the directories to binDir and the
// binaries in it, executable by everybody, owned by root.
func layerTar(dir string, files []string) ([]byte, error) {
	entries := make(map[string][]byte, len(files))
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading binary: %w", err)
		}
		entries[binDir+"/"+name] = data
	}
	return tarOf(entries, 0o755)
}

// tarOf archives files (path -> content) in path order, as regular files
// of mode fileMode after their directories, of mode 0755, all owned by root
// and dated at the epoch.
func tarOf(files map[string][]byte, fileMode int64) ([]byte, error) {
	dirs := map[string]bool{}
	for name := range files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
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
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: fileMode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
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
