package runtime

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/image-spec/specs-go/v1"
)

// The images tools/install.sh builds; pods in tests and demos use BusyboxImage.
const (
	BusyboxImage = "localhost/nri-suite/busybox:latest"
	PauseImage   = "localhost/nri-suite/pause:latest"
)

// DefaultCacheDir is where tools/install.sh puts binaries and images unless
// $NRI_SUITE_CACHE says otherwise.
const DefaultCacheDir = "/var/cache/nri-suite"

// installHint tells a developer how to fill the cache.
const installHint = "run `bash e2e/runtime/tools/install.sh`"

// Cache is the directory of pinned binaries (bin/) and image archives
// (images/) shared by every sandbox on the machine.
type Cache struct {
	Root string
}

// Image is an OCI archive and the reference it is tagged with.
type Image struct {
	Ref     string
	Archive string
}

// DefaultCache returns the cache at $NRI_SUITE_CACHE, or DefaultCacheDir.
func DefaultCache() Cache {
	if dir := os.Getenv("NRI_SUITE_CACHE"); dir != "" {
		return Cache{Root: dir}
	}
	return Cache{Root: DefaultCacheDir}
}

// Bin returns the path of a cached binary; an absolute name (a binary that
// comes from the distribution, like conmon) is returned as it is.
func (c Cache) Bin(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(c.Root, "bin", name)
}

// Images returns the archives every sandbox loads into its runtime.
func (c Cache) Images() []Image {
	return []Image{
		{Ref: BusyboxImage, Archive: filepath.Join(c.Root, "images", "busybox.tar")},
		{Ref: PauseImage, Archive: filepath.Join(c.Root, "images", "pause.tar")},
	}
}

// imageNameAnnotation names an image in an OCI archive's index.json: the
// reference `ctr images import` gives it.
const imageNameAnnotation = "io.containerd.image.name"

// ArchiveImage returns the image of an OCI archive (a tar of an OCI layout
// with one manifest, as `make images` and tools/install.sh write them)
// under the reference its index.json names.
func ArchiveImage(path string) (Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return Image{}, fmt.Errorf("reading image archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Image{}, fmt.Errorf("image archive %s: no index.json, expected an OCI layout", path)
		}
		if err != nil {
			return Image{}, fmt.Errorf("reading image archive %s: %w", path, err)
		}
		if filepath.Clean(hdr.Name) == specs.ImageIndexFile {
			return indexImage(path, tr)
		}
	}
}

// indexImage returns the image named by the single manifest of an OCI
// index read from r, the index.json of the archive at path.
func indexImage(path string, r io.Reader) (Image, error) {
	var index specs.Index
	if err := json.NewDecoder(r).Decode(&index); err != nil {
		return Image{}, fmt.Errorf("image archive %s: decoding index.json: %w", path, err)
	}
	if len(index.Manifests) != 1 {
		return Image{}, fmt.Errorf("image archive %s: index.json lists %d manifests, expected 1", path, len(index.Manifests))
	}
	ref := index.Manifests[0].Annotations[imageNameAnnotation]
	if ref == "" {
		return Image{}, fmt.Errorf("image archive %s: the manifest in index.json has no %s annotation", path, imageNameAnnotation)
	}
	if _, err := ParseImageRef(ref); err != nil {
		return Image{}, fmt.Errorf("image archive %s: %w", path, err)
	}
	return Image{Ref: ref, Archive: path}, nil
}

// sandboxImages returns what a sandbox loads into its runtime: the cache's
// images, then extra. Each extra archive must exist and every reference be
// qualified and given once: the runtime would keep only one archive under
// a reference.
func sandboxImages(c Cache, extra []Image) ([]Image, error) {
	images := slices.Concat(c.Images(), extra)
	archives := map[string]string{}
	for _, img := range images {
		if _, err := ParseImageRef(img.Ref); err != nil {
			return nil, fmt.Errorf("image archive %s: %w", img.Archive, err)
		}
		if other, ok := archives[img.Ref]; ok {
			return nil, fmt.Errorf("image %s is given twice, by %s and %s: expected one archive per reference", img.Ref, other, img.Archive)
		}
		archives[img.Ref] = img.Archive
	}
	for _, img := range extra {
		if _, err := os.Stat(img.Archive); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Ref, err)
		}
	}
	return images, nil
}

// sandboxBinaries are needed whatever the runtime: the kubelet on top and
// crictl, through which the sandbox talks CRI.
var sandboxBinaries = []string{"kubelet", "crictl"}

// clusterBinaries are what Options.Cluster adds: the control plane,
// kube-proxy, kubectl and helm for the tests, metrics-server, and the CNI
// plugins.
var clusterBinaries = append([]string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubectl", "helm",
	"metrics-server"}, cniPlugins...)

// ErrNotRoot and ErrCacheIncomplete say why a sandbox cannot run here.
var (
	ErrNotRoot         = errors.New("needs root; run as root or in CI")
	ErrCacheIncomplete = errors.New("runtime binaries missing")
)

// CheckPrereqs returns nil when a sandbox with rt (a cluster one if
// cluster) can run on this machine, or an error wrapping ErrNotRoot or
// ErrCacheIncomplete that says what is missing and how to get it.
func CheckPrereqs(rt Runtime, c Cache, cluster bool) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	binaries := slices.Concat(rt.Binaries(), sandboxBinaries)
	if cluster {
		binaries = append(binaries, clusterBinaries...)
	}
	var missing []string
	for _, name := range binaries {
		if !isExecutable(c.Bin(name)) {
			missing = append(missing, c.Bin(name))
		}
	}
	for _, img := range c.Images() {
		if _, err := os.Stat(img.Archive); err != nil {
			missing = append(missing, img.Archive)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w for %s (%s): %s", ErrCacheIncomplete, rt.Name(), strings.Join(missing, ", "), installHint)
	}
	return nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
