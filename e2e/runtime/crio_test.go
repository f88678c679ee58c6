package runtime

import (
	"context"
	"encoding/json"
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
	images := []Image{{Ref: BusyboxImage}, {Ref: PauseImage}, {Ref: "localhost/nri-suite/busybox:other"}}
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
`, got, "one entry per repository, however many tags")

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

// CRI-O refuses Guaranteed pods exactly where negative oom_score_adj values
// are refused; the QoS class is the kubelet's, limits without requests
// included.
func TestCRIOCannotRun(t *testing.T) {
	guaranteedReason := ""
	if !canLowerOOMScoreAdj() {
		guaranteedReason = CRIOGuaranteedSkip
	}
	list := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	tests := []struct {
		name      string
		resources corev1.ResourceRequirements
		want      string
	}{
		{name: "BestEffort", want: ""},
		{name: "Burstable", resources: corev1.ResourceRequirements{Requests: list("100m", "32Mi")}, want: ""},
		{name: "Guaranteed", resources: corev1.ResourceRequirements{Requests: list("1", "32Mi"), Limits: list("1", "32Mi")}, want: guaranteedReason},
		{name: "Guaranteed by limits alone", resources: corev1.ResourceRequirements{Limits: list("1", "32Mi")}, want: guaranteedReason},
	}
	_, refuses := Runtime(NewContainerd()).(podRefuser)
	assert.False(t, refuses, "containerd clamps oom_score_adj: it runs every pod")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := BusyboxPod("p")
			pod.Spec.Containers[0].Resources = tt.resources
			assert.Equal(t, tt.want, NewCRIO().CannotRun(pod))
		})
	}
}
