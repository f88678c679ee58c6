package deploy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ocilayout "github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/common/version"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
	"github.com/nri-suite/nri-suite/internal/testenv"
)

// TestImageCommands runs every command of docs/install.md's image blocks
// (<!-- images: NAME --> before a fenced sh block) as written there, with
// _out/images the images the make block built (docImages, for
// testPlatforms) and REGISTRY a registry on loopback (go-containerregistry's,
// in-process), and reads back what each command delivered:
//
//   - crane push and skopeo copy: through the registry's API, each plugin's
//     index under the digest make images wrote, with every platform's
//     image holding the binaries built for that platform, and its labels;
//   - ctr images import, into the containerd of a sandbox: the image under
//     its name, with every platform's layer in containerd's content store;
//   - podman load, into a containers-storage of the test's: the host
//     platform's image under its name, from the same index.
func TestImageCommands(t *testing.T) {
	sandbox.RequirePrereqs(t, "containerd")
	cache := sandbox.DefaultCache()
	for _, tool := range []string{cache.Bin("crane"), "skopeo", "podman"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, fmt.Sprintf("%v (crane: e2e/runtime/tools/install.sh crane; skopeo and podman: e2e/runtime/tools/apt-packages.txt)", err))
		}
	}
	ctx := sandbox.TestContext(t)
	root := repoRoot(t)
	blocks, err := imageBlocks(root)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"make", "crane", "skopeo", "ctr", "podman"}, slices.Collect(maps.Keys(blocks)),
		"the image blocks of docs/install.md, each of which this test runs and checks")
	dir, err := docImages(ctx, root)
	require.NoError(t, err, "the make block of docs/install.md")
	built := builtImages(t, dir)

	for _, tool := range []string{"crane", "skopeo"} {
		t.Run(tool, func(t *testing.T) {
			server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			t.Cleanup(server.Close)
			host := strings.TrimPrefix(server.URL, "http://")
			// The registry speaks plain HTTP on loopback: skopeo must be
			// told (crane assumes it for loopback addresses).
			regConf := filepath.Join(t.TempDir(), "registries.conf")
			require.NoError(t, os.WriteFile(regConf, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n", host), 0o644))
			sandbox.RemoveCreatedDirs(t, "/var/lib/containers/cache") // skopeo's blob info cache
			prelude := fmt.Sprintf("skopeo() { command skopeo --registries-conf %q \"$@\"; }\n", regConf)
			require.NoError(t, runDocBlock(ctx, root, prelude+blocks[tool], dir, nil, "REGISTRY", host))
			for _, img := range built {
				checkPushed(t, host, img)
			}
		})
	}

	t.Run("ctr", func(t *testing.T) {
		sb := sandbox.NewForTest(t, sandbox.Options{Runtime: "containerd"})
		socket := strings.TrimPrefix(sb.Runtime().Endpoint(), "unix://")
		require.NoError(t, runDocBlock(ctx, root, blocks["ctr"], dir, []string{"CONTAINERD_ADDRESS=" + socket}))
		ctr := func(args ...string) (string, error) {
			out, err := exec.CommandContext(ctx, cache.Bin("ctr"), append([]string{"--address", socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
			return string(out), err
		}
		listed, err := ctr("images", "list", "--quiet")
		require.NoError(t, err, listed)
		for _, img := range built {
			assert.Contains(t, strings.Fields(listed), img.ref)
			for platform, p := range img.platforms {
				out, err := ctr("content", "get", p.layer)
				assert.NoError(t, err, "%s's %s layer %s in containerd after --all-platforms: %s", img.ref, platform, p.layer, out)
			}
		}
	})

	t.Run("podman", func(t *testing.T) {
		store := t.TempDir()
		storageConf := filepath.Join(store, "storage.conf")
		containersConf := filepath.Join(store, "containers.conf")
		require.NoError(t, os.WriteFile(storageConf, fmt.Appendf(nil, "[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n",
			filepath.Join(store, "root"), filepath.Join(store, "run")), 0o644))
		require.NoError(t, os.WriteFile(containersConf, fmt.Appendf(nil, "[engine]\ntmp_dir = %q\nevents_logger = \"none\"\n",
			filepath.Join(store, "tmp")), 0o644))
		// podman's network runtime dir and the blob info cache appear
		// whatever the configuration says.
		sandbox.RemoveCreatedDirs(t, "/run/containers", "/var/lib/containers/cache")
		env := []string{"CONTAINERS_STORAGE_CONF=" + storageConf, "CONTAINERS_CONF=" + containersConf}
		require.NoError(t, runDocBlock(ctx, root, blocks["podman"], dir, env))
		for _, img := range built {
			cmd := exec.CommandContext(ctx, "podman", "image", "inspect", img.ref, "--format",
				`{{.Os}}/{{.Architecture}} {{.Digest}} {{index .Labels "org.opencontainers.image.revision"}}`)
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "podman image inspect %s: %s", img.ref, out)
			assert.Equal(t, fmt.Sprintf("linux/%s %s %s", runtime.GOARCH, img.digest, img.revision), strings.TrimSpace(string(out)), img.ref)
		}
	})
}

// imageBlock marks a block of docs/install.md's image commands.
var imageBlock = regexp.MustCompile("(?s)<!-- images: (\\w+) -->\n```sh\n(.*?)```")

// imageBlocks are the image blocks of docs/install.md by name.
func imageBlocks(root string) (map[string]string, error) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		return nil, err
	}
	blocks := map[string]string{}
	for _, m := range imageBlock.FindAllStringSubmatch(string(doc), -1) {
		blocks[m[1]] = m[2]
	}
	return blocks, nil
}

// runDocBlock runs a block of docs/install.md as a bash script in the
// repository at root, with _out/images replaced by dir (and IMAGES_OUT set
// to it, for make), each of replacements' keys by its value, the cache's
// binaries (crane, ctr) first in PATH, and env added.
func runDocBlock(ctx context.Context, root, block, dir string, env []string, replacements ...string) error {
	script := strings.NewReplacer(append([]string{"_out/images", dir}, replacements...)...).Replace(block)
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMAGES_OUT="+dir, "PATH="+filepath.Join(sandbox.DefaultCache().Root, "bin")+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("running\n%s\n%w: %s", script, err, out)
	}
	return nil
}

// docImagesOnce holds the images of the make block, built once for the
// package's tests into a directory TestMain removes.
var docImagesOnce struct {
	sync.Once
	dir string
	err error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if docImagesOnce.dir != "" {
		os.RemoveAll(docImagesOnce.dir)
	}
	os.Exit(code)
}

// docImages runs the make block of docs/install.md (for testPlatforms) once
// and returns the directory it wrote: TestCluster installs the chart from
// these images and TestImageCommands distributes them.
func docImages(ctx context.Context, root string) (string, error) {
	docImagesOnce.Do(func() {
		blocks, err := imageBlocks(root)
		if err == nil {
			docImagesOnce.dir, err = os.MkdirTemp("", "nri-suite-doc-images-")
		}
		if err == nil {
			err = runDocBlock(ctx, root, blocks["make"], docImagesOnce.dir, []string{"IMAGE_PLATFORMS=" + strings.Join(testPlatforms(), " ")})
		}
		docImagesOnce.err = err
	})
	return docImagesOnce.dir, docImagesOnce.err
}

// builtImage is what make images wrote for one plugin.
type builtImage struct {
	plugin, ref, tag, digest, revision, created string
	// platforms are the index's images by platform.
	platforms map[string]builtPlatform
}

// builtPlatform is one platform's image and where its binaries are.
type builtPlatform struct {
	manifest, layer string
	binDir          string
}

// builtImages reads every plugin's layout in dir: its name and index
// digest from index.json, its platforms' manifests and layers, and the
// build the binaries say they come from.
func builtImages(t *testing.T, dir string) []builtImage {
	t.Helper()
	chart, err := os.ReadFile(filepath.Join(repoRoot(t), suite.ChartDir, "Chart.yaml"))
	require.NoError(t, err)
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(chart, &meta))
	head, err := exec.Command("git", "-C", repoRoot(t), "rev-parse", "HEAD").Output()
	require.NoError(t, err, "the commit the images are built from")
	hostBin := filepath.Join(dir, "bin")
	var images []builtImage
	for _, plugin := range slices.Sorted(maps.Keys(plugins)) {
		l, err := ocilayout.FromPath(filepath.Join(dir, "nri-"+plugin))
		require.NoError(t, err)
		top, err := l.ImageIndex()
		require.NoError(t, err)
		topManifest, err := top.IndexManifest()
		require.NoError(t, err)
		require.Len(t, topManifest.Manifests, 1, "nri-%s's index.json", plugin)
		entry := topManifest.Manifests[0]
		build, err := version.ReadFile(filepath.Join(hostBin, "nri-"+plugin))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(build.Revision, strings.TrimSpace(string(head))), "nri-%s built from %s, the checkout's HEAD", plugin, build.Revision)
		img := builtImage{plugin: plugin, ref: entry.Annotations["io.containerd.image.name"], tag: meta.AppVersion,
			digest: entry.Digest.String(), revision: build.Revision, created: build.Time.UTC().Format(time.RFC3339),
			platforms: map[string]builtPlatform{}}
		assert.Equal(t, "ghcr.io/nri-suite/nri-"+plugin+":"+meta.AppVersion, img.ref, "the chart's image by default")
		index, err := top.ImageIndex(entry.Digest)
		require.NoError(t, err)
		manifest, err := index.IndexManifest()
		require.NoError(t, err)
		for _, desc := range manifest.Manifests {
			require.NotNil(t, desc.Platform, "nri-%s: manifest %s names no platform", plugin, desc.Digest)
			platformImage, err := index.Image(desc.Digest)
			require.NoError(t, err)
			layers, err := platformImage.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 1)
			layer, err := layers[0].Digest()
			require.NoError(t, err)
			binDir := filepath.Join(dir, "bin-"+strings.ReplaceAll(desc.Platform.String(), "/", "-"))
			if desc.Platform.String() == "linux/"+runtime.GOARCH {
				binDir = hostBin
			}
			img.platforms[desc.Platform.String()] = builtPlatform{manifest: desc.Digest.String(), layer: layer.String(), binDir: binDir}
		}
		assert.ElementsMatch(t, testPlatforms(), slices.Collect(maps.Keys(img.platforms)), "nri-%s's platforms", plugin)
		images = append(images, img)
	}
	return images
}

// testPlatforms are the platforms the docs' make block builds here: those
// of IMAGE_PLATFORMS in the test's environment, else the host's only. Both
// of make images' defaults (IMAGE_PLATFORMS="linux/amd64 linux/arm64") are
// for a release check: the first arm64 build compiles every dependency
// again, minutes on two cores (docs/benchmarks.md), so make test leaves it
// out; the index of two platforms is checked by deployments/images' tests.
func testPlatforms() []string {
	if platforms := strings.Fields(os.Getenv("IMAGE_PLATFORMS")); len(platforms) > 0 {
		return platforms
	}
	return []string{"linux/" + runtime.GOARCH}
}

// elfMachine is the ELF machine of each architecture's binaries.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkPushed reads img back from the registry at host, under the
// reference the docs pushed it to: the index make images wrote, each
// platform's image as built, holding the binary built for that platform.
func checkPushed(t *testing.T, host string, img builtImage) {
	t.Helper()
	ref, err := name.ParseReference(host + "/nri-" + img.plugin + ":" + img.tag)
	require.NoError(t, err)
	index, err := remote.Index(ref)
	require.NoError(t, err, "pulling %s", ref)
	digest, err := index.Digest()
	require.NoError(t, err)
	assert.Equal(t, img.digest, digest.String(), "%s: the index make images wrote", ref)
	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	wantLabels := map[string]string{
		specs.AnnotationTitle:    "nri-" + img.plugin,
		specs.AnnotationVersion:  img.tag,
		specs.AnnotationRevision: img.revision,
		specs.AnnotationCreated:  img.created,
		specs.AnnotationLicenses: "Apache-2.0",
		specs.AnnotationSource:   "https://github.com/nri-suite/nri-suite",
	}
	assert.Subset(t, manifest.Annotations, wantLabels, "%s's annotations", ref)
	var got []string
	for _, desc := range manifest.Manifests {
		require.NotNil(t, desc.Platform, "%s: manifest %s names no platform", ref, desc.Digest)
		platform := desc.Platform.String()
		got = append(got, platform)
		want, ok := img.platforms[platform]
		require.True(t, ok, "%s: platform %s was not built", ref, platform)
		assert.Equal(t, want.manifest, desc.Digest.String(), "%s: %s's manifest", ref, platform)
		pimg, err := index.Image(desc.Digest)
		require.NoError(t, err)
		config, err := pimg.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, desc.Platform.Architecture, config.Architecture, "%s: %s's config", ref, platform)
		assert.Subset(t, config.Config.Labels, wantLabels, "%s: %s's labels", ref, platform)
		binary := filepath.Base(config.Config.Entrypoint[0])
		pulled := layerFile(t, pimg, "usr/local/bin/"+binary)
		builtBinary, err := os.ReadFile(filepath.Join(want.binDir, binary))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(builtBinary, pulled), "%s: %s's %s is the one built in %s", ref, platform, binary, want.binDir)
		exe, err := elf.NewFile(bytes.NewReader(pulled))
		require.NoError(t, err, "%s: %s's %s", ref, platform, binary)
		assert.Equal(t, elfMachine[desc.Platform.Architecture], exe.Machine, "%s: %s's %s", ref, platform, binary)
	}
	assert.ElementsMatch(t, testPlatforms(), got, "%s's platforms", ref)
}

// layerFile returns the content of path in img's single layer.
func layerFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the layer", path)
		}
		require.NoError(t, err)
		if hdr.Name == path {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			return data
		}
	}
}
