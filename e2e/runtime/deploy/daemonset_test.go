package deploy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestChartDaemonSets runs the Helm chart's DaemonSets on the sandbox's real
// kubelet, from the images `make images` writes, imported into the sandbox's
// containerd: each plugin connects to the runtime's NRI socket through the
// chart's mounts, passes the kubelet's probes, and the scenario pods get
// from them what they get from the pre-registered plugins.
//
// The sandbox's kubelet is standalone, without an API server (building and
// running kube-apiserver and etcd is beyond what these hosts do within a
// test), so each DaemonSet's pod template, as the chart renders it
// (deployments/kubernetes/nri-suite.yaml, kept equal to the chart by the
// chart's tests), becomes a static pod, changed only where a static pod in
// this sandbox must differ:
//   - the host network, as every sandbox pod (there is no CNI): the plugins
//     then listen on the node's loopback and are probed there, as the chart
//     renders a plugin on the host network (security);
//   - the ConfigMap becomes a host directory holding its config.yaml (static
//     pods cannot use ConfigMaps);
//   - the NRI socket and CDI host directories are the sandbox's;
//   - images are never pulled.
//
// sidecar-order is left out: its helper directory must be the same path on
// the host and in its container (the runtime mounts the helper from the
// host), /opt/nri-suite/bin by default, outside the sandbox. containerd
// only: CRI-O cannot import an archive (the sandbox pushes its images
// through a registry at start).
func TestChartDaemonSets(t *testing.T) {
	const rt = "containerd"
	sandbox.RequirePrereqs(t, rt)
	ctx := sandbox.TestContext(t)
	images := buildImages(ctx, t)
	daemonSets, configs := loadManifests(t)
	installed := map[string]pluginInfo{}
	for name, info := range plugins {
		if name != "sidecar-order" {
			installed[name] = info
		}
	}

	sb := sandbox.NewForTest(t, sandbox.Options{Runtime: rt})
	importImages(ctx, t, sb, images)
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "deploy.yaml"), []byte(deviceSpec), 0o644))
	hostDirs := map[string]string{
		"/var/run/nri": filepath.Dir(sb.NRI().Socket),
		"/etc/cdi":     sb.CDISpecDir(),
		"/var/run/cdi": t.TempDir(),
	}
	for name := range installed {
		ds, ok := daemonSets[name]
		require.True(t, ok, "the chart renders a DaemonSet for %s", name)
		configDir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(configDir, "config.yaml"), []byte(configs[name].Data["config.yaml"]), 0o644))
		require.NoError(t, sb.WritePod(staticPod(t, ds, hostDirs, configDir)))
	}
	waitConnected(ctx, t, installed)
	waitProbes(ctx, t, sb, daemonSets, installed)
	runScenario(ctx, t, sb, installed)
}

// buildImages runs `make images` into a temporary directory and returns
// the archives.
func buildImages(ctx context.Context, t *testing.T) []string {
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "-C", repoRoot(t), "images", "IMAGES_OUT="+out)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "make images: %s", log)
	archives, err := filepath.Glob(filepath.Join(out, "nri-*.tar"))
	require.NoError(t, err)
	require.Len(t, archives, len(plugins), "one image per plugin: %s", log)
	return archives
}

// importImages imports the archives into the sandbox's containerd, in the
// namespace of its CRI.
func importImages(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, archives []string) {
	socket := strings.TrimPrefix(sb.Runtime().Endpoint(), "unix://")
	for _, archive := range archives {
		out, err := exec.CommandContext(ctx, sandbox.DefaultCache().Bin("ctr"), "--address", socket,
			"--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
		require.NoError(t, err, "importing %s: %s", archive, out)
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
		case "":
		default:
			t.Fatalf("unexpected kind %s in the chart's rendering", meta.Kind)
		}
	}
}

// anyAddr matches a listen address on every interface in the plugins' args.
var anyAddr = regexp.MustCompile(`^(--[a-z-]+-addr=)0\.0\.0\.0:`)

// staticPod makes a static pod of a DaemonSet's pod template, changed as
// TestChartDaemonSets says.
func staticPod(t *testing.T, ds *appsv1.DaemonSet, hostDirs map[string]string, configDir string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.HostNetwork = true
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.ImagePullPolicy = corev1.PullNever
			for j, arg := range c.Args {
				c.Args[j] = anyAddr.ReplaceAllString(arg, "${1}127.0.0.1:")
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
			v.VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: configDir}}
		case v.HostPath != nil:
			if dir, ok := hostDirs[v.HostPath.Path]; ok {
				v.HostPath.Path = dir
			}
		}
	}
	require.NoError(t, sandbox.CheckPod(pod))
	return pod
}

// waitProbes waits until the kubelet counted a successful liveness and
// readiness probe of every plugin's container (its /metrics/probes: a
// standalone kubelet reports pod status nowhere else).
func waitProbes(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, daemonSets map[string]*appsv1.DaemonSet, installed map[string]pluginInfo) {
	// The kubelet serves a self-signed certificate on loopback.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err := sandbox.PollUntil(ctx, 90*time.Second, 100*time.Millisecond, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+sb.KubeletAddr()+"/metrics/probes", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for name := range installed {
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
