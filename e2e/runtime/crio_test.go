package runtime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseImageRef(t *testing.T) {
	tests := []struct {
		ref     string
		want    ImageRef
		wantErr string
	}{
		{ref: BusyboxImage, want: ImageRef{Domain: "localhost", Path: "nri-suite/busybox", Tag: "latest"}},
		{ref: "127.0.0.1:5000/a/b.c_d-e:v1.2", want: ImageRef{Domain: "127.0.0.1:5000", Path: "a/b.c_d-e", Tag: "v1.2"}},
		{ref: "registry.k8s.io/pause:3.10", want: ImageRef{Domain: "registry.k8s.io", Path: "pause", Tag: "3.10"}},
		{ref: "busybox:latest", wantErr: `image reference "busybox:latest": has no domain`},
		{ref: "localhost/nri-suite/busybox", wantErr: "has no tag"},
		{ref: "localhost/busybox@sha256:abcd", wantErr: "has a digest"},
		{ref: "localhost/Busybox:latest", wantErr: `path "Busybox" is not lowercase`},
		{ref: "local_host/busybox:latest", wantErr: `domain "local_host" is not a host name`},
		{ref: "localhost/busybox:-x", wantErr: `tag "-x" is not a valid tag`},
		{ref: "localhost/:latest", wantErr: `path "" is not lowercase`},
		{ref: "", wantErr: "has no domain"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := ParseImageRef(tt.ref)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorContains(t, err, "expected domain/path:tag")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ref, got.Repository()+":"+got.Tag, "the parts join to the reference")
		})
	}
}

// Whatever the input, ParseImageRef either fails or returns parts that
// join back to the input.
func FuzzParseImageRef(f *testing.F) {
	for _, seed := range []string{BusyboxImage, PauseImage, "127.0.0.1:5000/a/b:c", "a/b", "a:b", "a/b:c:d", "@", "/:"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		got, err := ParseImageRef(ref)
		if err != nil {
			return
		}
		if joined := got.Repository() + ":" + got.Tag; joined != ref {
			t.Fatalf("ParseImageRef(%q) = %+v, which joins to %q", ref, got, joined)
		}
	})
}

func TestCRIORegistriesConf(t *testing.T) {
	images := []Image{{Ref: BusyboxImage}, {Ref: PauseImage}, {Ref: "localhost/nri-suite/busybox:other"}, {Ref: "ghcr.io/nri-suite/nri-stats:0.1.0"}}
	got, err := CRIORegistriesConf("127.0.0.1:4000", images)
	require.NoError(t, err)
	assert.Equal(t, `unqualified-search-registries = []
short-name-mode = "disabled"

[[registry]]
prefix = "localhost/nri-suite/busybox"
location = "127.0.0.1:4000/nri-suite/busybox"
insecure = true

[[registry]]
prefix = "localhost/nri-suite/pause"
location = "127.0.0.1:4000/nri-suite/pause"
insecure = true

[[registry]]
prefix = "ghcr.io/nri-suite/nri-stats"
location = "127.0.0.1:4000/nri-suite/nri-stats"
insecure = true
`, got, "one entry per repository, however many tags, whatever the domain")

	_, err = CRIORegistriesConf("127.0.0.1:4000", []Image{{Ref: "busybox"}})
	assert.ErrorContains(t, err, `image reference "busybox"`)
}

func TestCRIOSignaturePolicy(t *testing.T) {
	got, err := CRIOSignaturePolicy("127.0.0.1:4000", []Image{{Ref: BusyboxImage}, {Ref: PauseImage}})
	require.NoError(t, err)
	type requirement struct {
		Type string `json:"type"`
	}
	var policy struct {
		Default    []requirement                       `json:"default"`
		Transports map[string]map[string][]requirement `json:"transports"`
	}
	require.NoError(t, json.Unmarshal([]byte(got), &policy))
	assert.Equal(t, []requirement{{"reject"}}, policy.Default, "anything else is rejected")
	accept := []requirement{{"insecureAcceptAnything"}}
	assert.Equal(t, map[string]map[string][]requirement{"docker": {
		"127.0.0.1:4000":              accept,
		"localhost/nri-suite/busybox": accept,
		"localhost/nri-suite/pause":   accept,
	}}, policy.Transports)

	_, err = CRIOSignaturePolicy("127.0.0.1:4000", []Image{{Ref: "localhost/x@sha256:00"}})
	assert.ErrorContains(t, err, "has a digest")
}

// An OCI archive without a docker-style manifest.json, as `make images`
// writes it, reaches the registry under its reference's path with the
// manifest digest of its index.json, and leaves no unpacked layout behind.
func TestCRIOPushesOCIArchive(t *testing.T) {
	cache := requireBinary(t, "crane")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	archive, digest := writeOCIArchive(t, filepath.Join(dir, "nri-test.tar"), "ghcr.io/nri-suite/nri-test:0.1.0")
	c := &CRIO{env: RuntimeEnv{Dir: dir, Cache: cache, Log: TestLogger(t), Images: []Image{{Ref: "ghcr.io/nri-suite/nri-test:0.1.0", Archive: archive}}},
		paths: CRIOPaths{Temp: t.TempDir()}}
	addr, err := c.startRegistry(ctx)
	t.Cleanup(func() {
		if c.registry != nil {
			c.registry.stop(time.Second)
		}
	})
	require.NoError(t, err)

	require.NoError(t, c.pushImages(ctx, addr))
	out, err := runTool(ctx, nil, cache.Bin("crane"), "digest", "--insecure", addr+"/nri-suite/nri-test:0.1.0")
	require.NoError(t, err)
	assert.Equal(t, digest, strings.TrimSpace(string(out)))
	left, err := os.ReadDir(c.paths.Temp)
	require.NoError(t, err)
	assert.Empty(t, left, "the unpacked layout is removed")
}

// writeOCIArchive writes a tar of an OCI layout of one empty image, named
// ref in index.json and without manifest.json, and returns its path and
// manifest digest.
func writeOCIArchive(t *testing.T, path, ref string) (string, string) {
	t.Helper()
	var layer bytes.Buffer
	require.NoError(t, tar.NewWriter(&layer).Close())
	var gzipped bytes.Buffer
	gz := gzip.NewWriter(&gzipped)
	_, err := gz.Write(layer.Bytes())
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	digest := func(data []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(data)) }
	descriptor := func(mediaType string, data []byte) string {
		return fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d`, mediaType, digest(data), len(data))
	}
	config := []byte(`{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["` + digest(layer.Bytes()) + `"]}}`)
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` +
		descriptor("application/vnd.oci.image.config.v1+json", config) + `},"layers":[` +
		descriptor("application/vnd.oci.image.layer.v1.tar+gzip", gzipped.Bytes()) + `}]}`)
	index := []byte(`{"schemaVersion":2,"manifests":[` + descriptor("application/vnd.oci.image.manifest.v1+json", manifest) +
		`,"annotations":{"io.containerd.image.name":"` + ref + `"}}]}`)
	entries := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": index}
	for _, blob := range [][]byte{gzipped.Bytes(), config, manifest} {
		entries["blobs/sha256/"+strings.TrimPrefix(digest(blob), "sha256:")] = blob
	}
	writeTar(t, path, entries)
	return path, digest(manifest)
}

func TestParseRepoTags(t *testing.T) {
	tags, err := parseRepoTags([]byte(`{"status":{"id":"x","repoTags":["localhost/nri-suite/busybox:latest"]}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{BusyboxImage}, tags)
	_, err = parseRepoTags([]byte(`not json`))
	assert.ErrorContains(t, err, "decoding crictl inspecti output")
}

// The real CRI-O reads the main config and the NRI/CDI drop-in and merges
// them; `crio config` prints the result.
func TestCRIOConfigMergesDropIn(t *testing.T) {
	cache := requireBinary(t, "crio")
	dir := filepath.Join(t.TempDir(), "crio")
	p := crioPaths(dir, cache, PauseImage)
	require.NoError(t, os.MkdirAll(p.DropInDir, 0o755))
	require.NoError(t, os.WriteFile(p.Config, []byte(CRIOConfig(p)), 0o644))
	nri := NRIConfig{Socket: "/sb/nri/nri.sock", PluginPath: "/sb/nri/plugins", PluginConfigPath: "/sb/nri/conf.d",
		RegistrationTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second}
	dropIn, err := CRIONRIDropIn(nri, []string{"/sb/cdi", "/sb/cdi2"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.DropInDir, "50-nri-cdi.conf"), []byte(dropIn), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := runTool(ctx, nil, cache.Bin("crio"), "--config", p.Config, "--config-dir", p.DropInDir, "config")
	require.NoError(t, err)
	lines := crioConfigSettings(string(out))
	for _, want := range []string{
		`root = "` + p.Root + `"`,
		`runroot = "` + p.RunRoot + `"`,
		`listen = "` + p.Socket + `"`,
		`cgroup_manager = "cgroupfs"`,
		`default_runtime = "runc"`,
		`drop_infra_ctr = true`,
		`disable_hostport_mapping = true`,
		`internal_repair = false`,
		`pinns_path = "` + p.PinnsPath + `"`,
		`namespaces_dir = "` + p.Namespaces + `"`,
		`version_file = "` + p.VersionFile + `"`,
		`log_dir = "` + p.LogDir + `"`,
		`runtime_path = "` + p.RuncPath + `"`,
		`runtime_root = "` + p.RuncRoot + `"`,
		`monitor_path = "` + p.ConmonPath + `"`,
		`monitor_cgroup = "pod"`,
		`pause_image = "` + PauseImage + `"`,
		`signature_policy = "` + p.Policy + `"`,
		`network_dir = "` + filepath.Join(p.CNI, "net.d") + `"`,
		`cdi_spec_dirs = ["/sb/cdi", "/sb/cdi2",]`,
		`enable_nri = true`,
		`nri_listen = "/sb/nri/nri.sock"`,
		`nri_plugin_dir = "/sb/nri/plugins"`,
		`nri_plugin_config_dir = "/sb/nri/conf.d"`,
		`nri_plugin_registration_timeout = "5s"`,
		`nri_plugin_request_timeout = "2s"`,
	} {
		assert.Contains(t, lines, strings.Join(strings.Fields(want), ""))
	}
}

// crioConfigSettings turns `crio config` output into one "key=value" per
// setting, without whitespace, arrays on one line. CRI-O comments out the
// settings that equal its defaults, and always cdi_spec_dirs: the comment
// marks are dropped, since the values shown are the merged ones.
func crioConfigSettings(out string) []string {
	var compact []string
	for _, line := range strings.Split(out, "\n") {
		compact = append(compact, strings.Join(strings.Fields(strings.TrimLeft(line, "# \t")), ""))
	}
	joined := strings.Join(compact, "\n")
	joined = strings.NewReplacer("[\n", "[", ",\n", ",", "\n]", "]").Replace(joined)
	return strings.Split(joined, "\n")
}

// crioDefaultHostPaths are where CRI-O v1.34 and the containers libraries
// put things by default (pkg/config, containers/storage, containers/image):
// with the sandbox's configuration none may appear, except those HostDirs
// lists, and those only until teardown.
var crioDefaultHostPaths = []string{
	"/var/lib/containers", "/run/containers", "/run/crio", "/var/log/crio", "/etc/crio", "/var/lib/crio",
	"/etc/containers", "/opt/cni", "/run/nri", "/etc/nri", "/opt/nri", "/etc/cdi", "/run/cdi",
	"/usr/share/containers", "/etc/sysconfig", "/run/netns", "/run/ipcns", "/run/utsns", "/run/userns",
	"/run/runc", "/run/crun", "/var/cache/containers", "/var/log/pods",
}

// A CRI-O sandbox touches no default host path beyond what HostDirs says,
// and teardown removes those that were not there before.
func TestCRIOHostPaths(t *testing.T) {
	RequirePrereqs(t, "crio")
	existed := map[string]bool{}
	for _, p := range crioDefaultHostPaths {
		_, err := os.Lstat(p)
		existed[p] = err == nil
	}
	sb := NewForTest(t, Options{Runtime: "crio"})
	ctx := TestContext(t)
	require.NoError(t, sb.WritePod(BusyboxPod("paths")))
	_, err := sb.WaitContainer(ctx, "paths", "main")
	require.NoError(t, err)

	allowed := sb.Runtime().HostDirs()
	for _, p := range crioDefaultHostPaths {
		if _, err := os.Lstat(p); err == nil && !existed[p] {
			assert.Contains(t, allowed, p, "CRI-O created %s while running, and HostDirs does not list it", p)
		}
	}
	require.NoError(t, sb.Close())
	for _, p := range crioDefaultHostPaths {
		if !existed[p] {
			assert.NoFileExists(t, p, "left after teardown")
			assert.NoDirExists(t, p, "left after teardown")
		}
	}
}

// Guaranteed pods ask for oom_score_adj -997, which CRI-O hands to runc as
// it is. Without CAP_SYS_RESOURCE (these hosts) the container cannot start,
// which is why CRIOGuaranteedSkip exists; with it, the pod runs.
func TestCRIOGuaranteedPod(t *testing.T) {
	RequirePrereqs(t, "crio")
	sb := NewForTest(t, Options{Runtime: "crio"})
	ctx := TestContext(t)
	pod := BusyboxPod("guaranteed")
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: list, Limits: list}
	require.NoError(t, sb.WritePod(pod))

	if canLowerOOMScoreAdj() {
		_, err := sb.WaitContainer(ctx, "guaranteed", "main")
		require.NoError(t, err, "with CAP_SYS_RESOURCE a Guaranteed pod runs on CRI-O")
		return
	}
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !strings.Contains(tailFile(sb.KubeletLog(), 400), "oom_score_adj: Permission denied") {
		select {
		case <-pollCtx.Done():
			t.Fatalf("the kubelet never reported the refused oom_score_adj; last lines:\n%s", tailFile(sb.KubeletLog(), 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
	containers, err := sb.CRI().Containers(ctx)
	require.NoError(t, err)
	for _, c := range containers {
		if c.Pod == sb.PodName("guaranteed") {
			assert.NotEqual(t, ContainerRunning, c.State, "container %s of the Guaranteed pod", c.ID)
		}
	}
}

// CRI-O refuses Guaranteed and system-node-critical pods exactly where
// negative oom_score_adj values are refused; the QoS class is the
// kubelet's, limits without requests included.
func TestCRIOCannotRun(t *testing.T) {
	guaranteedReason, nodeCriticalReason := "", ""
	if !canLowerOOMScoreAdj() {
		guaranteedReason, nodeCriticalReason = CRIOGuaranteedSkip, CRIONodeCriticalSkip
	}
	list := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	tests := []struct {
		name          string
		resources     corev1.ResourceRequirements
		priorityClass string
		want          string
	}{
		{name: "BestEffort", want: ""},
		{name: "Burstable", resources: corev1.ResourceRequirements{Requests: list("100m", "32Mi")}, want: ""},
		{name: "Guaranteed", resources: corev1.ResourceRequirements{Requests: list("1", "32Mi"), Limits: list("1", "32Mi")}, want: guaranteedReason},
		{name: "Guaranteed by limits alone", resources: corev1.ResourceRequirements{Limits: list("1", "32Mi")}, want: guaranteedReason},
		{name: "Burstable system-node-critical", resources: corev1.ResourceRequirements{Requests: list("100m", "32Mi")},
			priorityClass: "system-node-critical", want: nodeCriticalReason},
		{name: "Burstable system-cluster-critical", resources: corev1.ResourceRequirements{Requests: list("100m", "32Mi")},
			priorityClass: "system-cluster-critical", want: ""},
	}
	_, refuses := Runtime(NewContainerd()).(podRefuser)
	assert.False(t, refuses, "containerd clamps oom_score_adj: it runs every pod")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := BusyboxPod("p")
			pod.Spec.Containers[0].Resources = tt.resources
			pod.Spec.PriorityClassName = tt.priorityClass
			assert.Equal(t, tt.want, NewCRIO().CannotRun(pod))
		})
	}
}
