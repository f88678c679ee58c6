package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/deployments"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestChartDaemonSets runs the Helm chart's DaemonSets on the sandbox's real
// kubelet, on every runtime, from the images `make images` writes, which the
// sandbox loads at start as it loads its own: each plugin connects to the
// runtime's NRI socket through the chart's mounts, passes the kubelet's
// probes, and the scenario pods get from them what they get from the
// pre-registered plugins. All five pods start at once, security's among
// them, as on a booting node: on containerd the shipped drop-in refuses
// every other container until security is connected, and only the chart's
// tolerate annotation lets the plugins' own start first.
//
// The sandbox's kubelet is standalone, without an API server. kube-apiserver
// does build here from the Go module proxy, as the kubelet does, but it cost
// 500 CPU-seconds (v1.37.2, empty build cache: about 5 minutes on these 2
// cores) before etcd and Helm's install path, and a cold CI run, which
// takes 21 of its 30 minutes already with the runtimes it builds, has no
// room for them. So each
// DaemonSet's pod template, as the chart renders it
// (deployments/kubernetes/nri-suite.yaml, kept equal to the chart by the
// chart's tests), becomes a static pod, changed only where a static pod in
// this sandbox must differ:
//   - the host network, as every sandbox pod (there is no CNI): the plugins
//     then listen on the node's loopback and are probed there, as the chart
//     renders a plugin on the host network (security);
//   - the ConfigMap becomes a host directory holding its config.yaml (static
//     pods cannot use ConfigMaps), as the chart renders it, on CRI-O too
//     (security's seccomp rule audits there by default), with the moved
//     directories below moved in it too;
//   - the NRI socket and CDI host directories are the sandbox's;
//   - sidecar-order's helper directory (helperDir) is one in the test's
//     temporary directory, on the host and in the containers alike: the
//     runtime bind-mounts the helper into workload containers from the host
//     path the plugin names, so both must be the same path, and the chart's
//     is outside the sandbox;
//   - images are never pulled;
//   - on CRI-O on hosts that refuse negative oom_score_adj values, no
//     priority class: the kubelet gives a static system-node-critical pod
//     -997, which CRI-O, unlike containerd, does not clamp
//     (sandbox.CRIONodeCriticalSkip).
func TestChartDaemonSets(t *testing.T) {
	for _, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) { testChartDaemonSets(t, rt) })
	}
}

// helperDir is the chart's sidecar-order helperDir (values.yaml).
const helperDir = "/opt/nri-suite/bin"

func testChartDaemonSets(t *testing.T, rt string) {
	sandbox.RequirePrereqs(t, rt)
	ctx := sandbox.TestContext(t)
	images := buildImages(ctx, t)
	daemonSets, configs := loadManifests(t)
	// Made before the sandbox, so that it is removed after the teardown
	// stopped the containers that mount the helper.
	paths := podPaths{moved: map[string]string{helperDir: t.TempDir()}}

	sb := sandbox.NewForTest(t, sandbox.Options{Runtime: rt, Images: images})
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "deploy.yaml"), []byte(deviceSpec), 0o644))
	paths.host = map[string]string{
		"/var/run/nri": filepath.Dir(sb.NRI().Socket),
		"/etc/cdi":     sb.CDISpecDir(),
		"/var/run/cdi": t.TempDir(),
	}
	for name := range plugins {
		ds, ok := daemonSets[name]
		require.True(t, ok, "the chart renders a DaemonSet for %s", name)
		config := configs[name].Data["config.yaml"]
		for from, to := range paths.moved {
			// security's policy names sidecar-order's helper where it is.
			config = strings.ReplaceAll(config, from+"/", to+"/")
		}
		paths.config = t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(paths.config, "config.yaml"), []byte(config), 0o644))
		pod := staticPod(t, ds, paths)
		if sb.CannotRun(pod) == sandbox.CRIONodeCriticalSkip {
			pod.Spec.PriorityClassName = ""
		}
		requireImages(t, pod, images)
		require.NoError(t, sb.WritePod(pod))
	}
	waitConnected(ctx, t, sb)
	waitProbes(ctx, t, sb, daemonSets)
	runScenario(ctx, t, sb)
}

// buildImages runs `make images` (with makeVars) into a temporary directory
// and returns the archives under the references they name.
func buildImages(ctx context.Context, t *testing.T, makeVars ...string) []sandbox.Image {
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", append([]string{"-C", repoRoot(t), "images", "IMAGES_OUT=" + out}, makeVars...)...)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "make images: %s", log)
	archives, err := filepath.Glob(filepath.Join(out, "nri-*.tar"))
	require.NoError(t, err)
	require.Len(t, archives, len(plugins), "one image per plugin: %s", log)
	images := make([]sandbox.Image, len(archives))
	for i, archive := range archives {
		images[i], err = sandbox.ArchiveImage(archive)
		require.NoError(t, err)
	}
	return images
}

// requireImages fails unless every container of pod runs one of images:
// the pod never pulls.
func requireImages(t *testing.T, pod *corev1.Pod, images []sandbox.Image) {
	refs := make([]string, len(images))
	for i, img := range images {
		refs[i] = img.Ref
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		require.Contains(t, refs, c.Image, "container %s of %s runs an image that `make images` did not write", c.Name, pod.Name)
	}
}

// loadManifests decodes the chart's rendering strictly: DaemonSets and
// ConfigMaps by plugin.
func loadManifests(t *testing.T) (map[string]*appsv1.DaemonSet, map[string]*corev1.ConfigMap) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deployments/kubernetes/nri-suite.yaml"))
	require.NoError(t, err)
	daemonSets, configs := map[string]*appsv1.DaemonSet{}, map[string]*corev1.ConfigMap{}
	reader := yamlutil.NewYAMLReader(bufio.NewReader(strings.NewReader(string(data))))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return daemonSets, configs
		}
		require.NoError(t, err)
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		switch meta.Kind {
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			require.NoError(t, yaml.UnmarshalStrict(doc, ds))
			daemonSets[strings.TrimPrefix(ds.Labels["app.kubernetes.io/name"], "nri-")] = ds
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			require.NoError(t, yaml.UnmarshalStrict(doc, cm))
			configs[strings.TrimPrefix(cm.Labels["app.kubernetes.io/name"], "nri-")] = cm
		case "", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			// The API server's; there is none here (deployments/helm
			// evaluates the policy with its code).
		default:
			t.Fatalf("unexpected kind %s in the chart's rendering", meta.Kind)
		}
	}
}

// anyAddr matches a listen address on every interface in the plugins' args.
var anyAddr = regexp.MustCompile(`^(--[a-z-]+-addr=)0\.0\.0\.0:`)

// podPaths are the sandbox's places for a static pod's host paths.
type podPaths struct {
	// host maps hostPath volumes' paths to the sandbox's directories; the
	// containers mount them where the chart says.
	host map[string]string
	// moved maps directories that must be the same path on the host and in
	// the containers to one in the sandbox: hostPath volumes, mount paths
	// and paths in commands and args alike.
	moved map[string]string
	// config is the host directory standing for the plugin's ConfigMap.
	config string
}

// staticPod makes a static pod of a DaemonSet's pod template, changed as
// TestChartDaemonSets says.
func staticPod(t *testing.T, ds *appsv1.DaemonSet, paths podPaths) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels,
			Annotations: ds.Spec.Template.Annotations},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.HostNetwork = true
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.ImagePullPolicy = corev1.PullNever
			for j, arg := range c.Command {
				c.Command[j] = movePath(arg, paths.moved)
			}
			for j, arg := range c.Args {
				c.Args[j] = movePath(anyAddr.ReplaceAllString(arg, "${1}127.0.0.1:"), paths.moved)
			}
			for j := range c.VolumeMounts {
				c.VolumeMounts[j].MountPath = movePath(c.VolumeMounts[j].MountPath, paths.moved)
			}
			for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if probe != nil && probe.HTTPGet != nil {
					probe.HTTPGet.Host = "127.0.0.1"
				}
			}
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.ConfigMap != nil:
			v.VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: paths.config}}
		case v.HostPath != nil:
			if dir, ok := paths.host[v.HostPath.Path]; ok {
				v.HostPath.Path = dir
			}
			v.HostPath.Path = movePath(v.HostPath.Path, paths.moved)
		}
	}
	require.NoError(t, sandbox.CheckPod(pod))
	// A path the chart adds later, in a field not moved above, would make
	// the plugin and the runtime disagree on where the helper is.
	manifest, err := yaml.Marshal(pod)
	require.NoError(t, err)
	for dir := range paths.moved {
		require.NotContains(t, string(manifest), dir, "the static pod of %s still names %s", ds.Name, dir)
	}
	return pod
}

// movePath moves a path, alone or as a flag's value ("--flag=PATH"), that
// is or lies below a directory in moved to the same place below the
// directory's new path; anything else is returned as it is.
func movePath(arg string, moved map[string]string) string {
	flag, path := "", arg
	if name, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(name, "--") {
		flag, path = name+"=", value
	}
	for from, to := range moved {
		if rest, ok := strings.CutPrefix(path, from); ok && (rest == "" || rest[0] == '/') {
			return flag + to + rest
		}
	}
	return arg
}

// The static pod of sidecar-order names the moved helper directory wherever
// the chart names helperDir, and the sandbox's directories as host paths
// only; the rest is the chart's.
func TestStaticPodOfSidecarOrder(t *testing.T) {
	daemonSets, _ := loadManifests(t)
	ds := daemonSets["sidecar-order"]
	require.NotNil(t, ds, "the chart renders a DaemonSet for sidecar-order")
	pod := staticPod(t, ds, podPaths{
		host:   map[string]string{"/var/run/nri": "/sb/nri"},
		moved:  map[string]string{helperDir: "/sb/helper"},
		config: "/sb/config",
	})

	assert.Equal(t, "true", pod.Annotations[deployments.TolerateMissingPlugins],
		"the pod's containers start while security is not connected, as the containerd drop-in requires")
	require.Len(t, pod.Spec.InitContainers, 1)
	install := pod.Spec.InitContainers[0]
	assert.Equal(t, []string{"/usr/local/bin/nri-suite-copy", "/usr/local/bin/nri-sidecar-helper", "/sb/helper"}, install.Command,
		"the init container copies the helper to the moved directory")
	assert.Equal(t, []corev1.VolumeMount{{Name: "helper", MountPath: "/sb/helper"}}, install.VolumeMounts)
	require.Len(t, pod.Spec.Containers, 1)
	plugin := pod.Spec.Containers[0]
	assert.Contains(t, plugin.Args, "--helper=/sb/helper/nri-sidecar-helper", "the plugin names the helper where it is on the host")
	assert.Contains(t, plugin.Args, "--http-addr=127.0.0.1:9120")
	assert.Contains(t, plugin.VolumeMounts, corev1.VolumeMount{Name: "helper", MountPath: "/sb/helper", ReadOnly: true})
	assert.Contains(t, plugin.VolumeMounts, corev1.VolumeMount{Name: "nri", MountPath: "/var/run/nri"}, "a host-only directory keeps the chart's mount path")
	for _, c := range []corev1.Container{install, plugin} {
		assert.Equal(t, corev1.PullNever, c.ImagePullPolicy, "container %s", c.Name)
	}

	hostPaths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		require.NotNil(t, v.HostPath, "volume %s is a host path", v.Name)
		hostPaths[v.Name] = v.HostPath.Path
	}
	assert.Equal(t, map[string]string{"nri": "/sb/nri", "shared": "/run/nri-suite", "config": "/sb/config", "helper": "/sb/helper"}, hostPaths)
}

func TestMovePath(t *testing.T) {
	moved := map[string]string{"/opt/x/bin": "/sb/bin"}
	for arg, want := range map[string]string{
		"/opt/x/bin":             "/sb/bin",
		"/opt/x/bin/helper":      "/sb/bin/helper",
		"--helper=/opt/x/bin/h":  "--helper=/sb/bin/h",
		"/opt/x/binary":          "/opt/x/binary",
		"/usr/opt/x/bin":         "/usr/opt/x/bin",
		"-helper=/opt/x/bin/h":   "-helper=/opt/x/bin/h",
		"--http-addr=0.0.0.0:80": "--http-addr=0.0.0.0:80",
	} {
		assert.Equal(t, want, movePath(arg, moved), "movePath(%q)", arg)
	}
}

// waitProbes waits until the kubelet counted a successful liveness and
// readiness probe of every plugin's container (its /metrics/probes: a
// standalone kubelet reports pod status nowhere else).
func waitProbes(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, daemonSets map[string]*appsv1.DaemonSet) {
	err := sandbox.PollUntil(ctx, 90*time.Second, 100*time.Millisecond, func() error {
		body, err := sb.KubeletGet(ctx, "/metrics/probes")
		if err != nil {
			return err
		}
		for name := range plugins {
			pod := sb.PodName(daemonSets[name].Name)
			for _, probe := range []string{"Liveness", "Readiness"} {
				if n := probeCount(string(body), name, pod, probe); n == 0 {
					return fmt.Errorf("no successful %s probe of %s in pod %s yet", probe, name, pod)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// probeCount returns the kubelet's count of successful probes of a kind for
// a container.
func probeCount(metrics, container, pod, probe string) int {
	labels := []string{`container="` + container + `"`, `pod="` + pod + `"`, `probe_type="` + probe + `"`, `result="successful"`}
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "prober_probe_total{") || !containsAll(line, labels) {
			continue
		}
		if n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			return int(n)
		}
	}
	return 0
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
