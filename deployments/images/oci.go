package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/nri-suite/nri-suite/common/version"
)

// buildOptions say where the binaries are and how the images are named
// and labelled.
type buildOptions struct {
	Platforms []platformBinaries
	Registry  string
	Tag       string
	Source    string
	// Build is what the binaries were built from (readBuild).
	Build version.Info
}

// platformBinaries is the directory of one platform's binaries.
type platformBinaries struct {
	Platform v1.Platform
	Dir      string
}

func (p platformBinaries) String() string { return p.Platform.String() + "=" + p.Dir }

// binDir is where the binaries go in the image.
const binDir = "usr/local/bin"

// imageNameAnnotation names the image in index.json for `ctr images import`.
const imageNameAnnotation = "io.containerd.image.name"

// epoch is every file's time, and the image's without a commit time.
var epoch = time.Unix(0, 0).UTC()

// readBuild returns what the binaries of every platform were built from,
// which must be one tree: the images say its revision and are dated at its
// commit, and must be tagged with its version if it is a release.
func readBuild(platforms []platformBinaries, tag string) (version.Info, error) {
	var first version.Info
	var firstPath string
	for _, p := range platforms {
		for _, plugin := range slices.Sorted(maps.Keys(imageFiles)) {
			for _, name := range imageFiles[plugin] {
				path := filepath.Join(p.Dir, name)
				info, err := version.ReadFile(path)
				if err != nil {
					return version.Info{}, fmt.Errorf("reading the build of %s: %w", path, err)
				}
				if firstPath == "" {
					first, firstPath = info, path
				} else if info.String() != first.String() || !info.Time.Equal(first.Time) {
					return version.Info{}, fmt.Errorf("%s is %s of %s but %s is %s of %s: the images need binaries of one build (make images)",
						path, info, info.Time, firstPath, first, first.Time)
				}
			}
		}
	}
	if err := checkTag(first.Version, tag); err != nil {
		return version.Info{}, err
	}
	return first, nil
}

// checkTag refuses to tag binaries of a release (Go's version of a
// checkout at tag vX.Y.Z) with another version: binaries, images and chart
// say one version. Development builds (pseudo-versions) keep the chart's.
func checkTag(binaryVersion, tag string) error {
	v := strings.TrimSuffix(binaryVersion, "+dirty")
	if semver.IsValid(v) && !module.IsPseudoVersion(v) && v != "v"+tag {
		return fmt.Errorf("the binaries are release %s but the image tag is %q: tag the images %s (IMAGE_TAG, the chart's appVersion)",
			binaryVersion, tag, strings.TrimPrefix(v, "v"))
	}
	return nil
}

// annotations are the OCI annotations of a plugin's image, on its index,
// on each platform's manifest and as the labels of its config.
func annotations(plugin string, opts buildOptions) map[string]string {
	a := map[string]string{
		specs.AnnotationTitle:    "nri-" + plugin,
		specs.AnnotationVersion:  opts.Tag,
		specs.AnnotationSource:   opts.Source,
		specs.AnnotationLicenses: "Apache-2.0",
		specs.AnnotationCreated:  created(opts.Build).Format(time.RFC3339),
	}
	if opts.Build.Revision != version.Unknown {
		a[specs.AnnotationRevision] = opts.Build.Revision
	}
	return a
}

// created is the commit's time, or the epoch for a build without one:
// never the time of the build, which would change every digest.
func created(build version.Info) time.Time {
	if build.Time.IsZero() {
		return epoch
	}
	return build.Time.UTC()
}

// writeImage writes the image of one plugin to out as an OCI layout,
// nri-<plugin>/, and as the archive of that layout, nri-<plugin>.tar, and
// returns its reference and index digest. index.json lists the one image
// index, named for `ctr images import` (imageNameAnnotation) and by its
// tag, so that crane and skopeo take it without being told which.
func writeImage(out, plugin string, files []string, opts buildOptions) (ref, indexDigest string, err error) {
	name := "nri-" + plugin
	fail := func(err error) (string, string, error) { return "", "", fmt.Errorf("image %s: %w", name, err) }
	index, err := pluginIndex(plugin, files, opts)
	if err != nil {
		return fail(err)
	}
	ref = fmt.Sprintf("%s/%s:%s", opts.Registry, name, opts.Tag)
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: index, Descriptor: v1.Descriptor{
		Annotations: map[string]string{imageNameAnnotation: ref, specs.AnnotationRefName: opts.Tag}}})
	dir := filepath.Join(out, name)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fail(err)
	}
	if _, err := layout.Write(tmp, top); err != nil {
		return fail(fmt.Errorf("writing the OCI layout %s: %w", tmp, err))
	}
	archive, err := tarDir(tmp)
	if err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fail(err)
	}
	if err := writeFileAtomic(dir+".tar", archive); err != nil {
		return fail(err)
	}
	digest, err := index.Digest()
	if err != nil {
		return fail(err)
	}
	return ref, digest.String(), nil
}

// pluginIndex is the image index of a plugin: one image per platform.
func pluginIndex(plugin string, files []string, opts buildOptions) (v1.ImageIndex, error) {
	anns := annotations(plugin, opts)
	var index v1.ImageIndex = empty.Index
	for _, p := range opts.Platforms {
		img, err := platformImage(p, files, anns, created(opts.Build))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Platform, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p.Platform}})
	}
	return mutate.Annotations(index, anns).(v1.ImageIndex), nil
}

// platformImage is the image of one platform: a layer of its binaries on
// nothing, the first binary the entrypoint.
func platformImage(p platformBinaries, files []string, anns map[string]string, created time.Time) (v1.Image, error) {
	layerTar, err := layerTar(p.Dir, files)
	if err != nil {
		return nil, err
	}
	compressed, err := gzipped(layerTar)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(compressed)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Created:      v1.Time{Time: created},
		OS:           p.Platform.OS,
		Architecture: p.Platform.Architecture,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{"/" + binDir + "/" + files[0]},
			// The NRI socket is root's and writable by root only: every
			// plugin connects to it, so none can run as another user.
			User:       "0:0",
			WorkingDir: "/",
			Labels:     anns,
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "make images (deployments/images)"}})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Annotations(img, anns).(v1.Image), nil
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

// tarDir archives the regular files under dir (an OCI layout) with tarOf.
func tarDir(dir string) ([]byte, error) {
	entries := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		entries[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("archiving %s: %w", dir, err)
	}
	return tarOf(entries, 0o644)
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

// gzipped compresses data with a header that holds no time or name, at
// the default level: on these binaries the best level saves 0.4 % of the
// size for 2.6 times the CPU time (docs/benchmarks.md).
func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
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
