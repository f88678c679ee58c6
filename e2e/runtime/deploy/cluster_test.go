package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestCluster installs the chart with Helm into the cluster sandbox, from
// the images `make images` writes, and runs through the API what needs it:
// every plugin's DaemonSet pod becomes Ready through the DaemonSet
// controller, all five at once as on a booting node (on containerd the
// shipped drop-in refuses every other container until security is
// connected, and only the chart's tolerate annotation lets the plugins' own
// start first), and pods created through the API server afterwards get each
// plugin's effect, checked inside their containers (runScenario, the same
// checks as the pre-registered plugins').
func TestCluster(t *testing.T) {
	for _, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) { testCluster(t, rt) })
	}
}

// release is the Helm release and namespace the tests install the chart as.
const release = "nri-suite"

func testCluster(t *testing.T, rt string) {
	sandbox.RequireClusterPrereqs(t, rt)
	ctx := sandbox.TestContext(t)
	images := append(buildImages(ctx, t), buildImages(ctx, t, "IMAGE_TAG="+upgradeTag)...)
	// Made before the sandbox, so that it is removed after the teardown
	// stopped the containers that mount the helper.
	helperDir := t.TempDir()
	start := time.Now()
	sb := sandbox.NewForTest(t, sandbox.Options{Runtime: rt, Cluster: true, Images: images})
	nodeReady := time.Since(start)
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "deploy.yaml"), []byte(deviceSpec), 0o644))

	values := clusterValues(t, sb, helperDir)
	chart := filepath.Join(repoRoot(t), "deployments/helm/nri-suite")
	out, err := sb.Helm(ctx, "install", release, chart,
		"--namespace", release, "--create-namespace", "--values", values, "--wait", "--timeout", "3m")
	require.NoError(t, err, "helm install: %s", out)
	waitConnected(ctx, t, sb)
	// The figure docs/benchmarks.md quotes; never asserted.
	t.Logf("cluster start: node Ready after %s, every plugin Ready after %s", nodeReady.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond))
	t.Run("new pods", func(t *testing.T) { runScenario(ctx, t, sb) })
	for _, sc := range clusterScenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(ctx, t, sb) })
	}
	t.Run("helm lifecycle", func(t *testing.T) { helmLifecycle(ctx, t, sb, chart, values) })
}

// clusterScenario is a scenario that needs the API server, run on the
// cluster with the chart installed, one after the other. Each removes what
// it made, so that the next one starts from the installed suite alone.
type clusterScenario struct {
	name string
	run  func(ctx context.Context, t *testing.T, sb *sandbox.Sandbox)
}

// clusterScenarios run in this order after the deploy scenario.
var clusterScenarios = []clusterScenario{
	{"refusals", refusals},
	{"bad values", badValues},
	{"bad config", badConfig},
	{"API server restart", apiServerRestart},
	{"plugin crash under load", pluginCrash},
}

// clusterValues writes the chart values for the sandbox: its NRI socket
// and CDI directories in place of the host's, the local images only, and
// sidecar-order's helper directory (the same path on the host and in the
// containers) in a test directory, which security's policy then names.
func clusterValues(t *testing.T, sb *sandbox.Sandbox, helperDir string) string {
	values := map[string]any{
		"image":       map[string]any{"pullPolicy": "Never"},
		"nri":         map[string]any{"socketDir": filepath.Dir(sb.NRI().Socket)},
		"cdiSpecDirs": sb.CDISpecDirs(),
		"plugins": map[string]any{
			"sidecar-order": map[string]any{"helperDir": helperDir},
			"security": map[string]any{"config": map[string]any{"validator": map[string]any{
				"mounts": map[string]any{"plugins": map[string]any{
					"20-sidecar-order": []string{helperDir + "/nri-sidecar-helper", "/run/nri-suite/sidecar-order/*"},
				}},
			}}},
		},
	}
	critical := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "system-node-critical",
		Containers: []corev1.Container{{Name: "c"}}}}
	if sb.CannotRun(critical) == sandbox.CRIONodeCriticalSkip {
		values["priorityClassName"] = ""
	}
	data, err := yaml.Marshal(values)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
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
