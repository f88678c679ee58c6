package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
//
// The scenarios that do not depend on the runtime (the chart's schema, the
// runner's handling of a bad config, the API server's restart) run on the
// first runtime only, and the crash scenario kills each plugin one way on
// the others: what differs between runtimes is their NRI, which every
// scenario exercises either way.
func TestCluster(t *testing.T) {
	root := repoRoot(t)
	images := sync.OnceValues(func() ([]sandbox.Image, error) { return bothTags(sandbox.TestContext(t), root, t.TempDir()) })
	for i, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) {
			sandbox.RequireClusterPrereqs(t, rt)
			imgs, err := images()
			require.NoError(t, err)
			testCluster(t, rt, imgs, i == 0)
		})
	}
}

func testCluster(t *testing.T, rt string, images []sandbox.Image, first bool) {
	ctx := sandbox.TestContext(t)
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
		t.Run(sc.name, func(t *testing.T) {
			if sc.runtimeIndependent && !first {
				t.Skipf("independent of the runtime: run on %s", sandbox.RuntimeNames()[0])
			}
			sc.run(ctx, t, sb)
		})
	}
	t.Run("helm lifecycle", func(t *testing.T) { helmLifecycle(ctx, t, sb, chart) })
}

// release is the Helm release, and namespace, of the installed suite.
const release = suite.Release

// clusterScenario is a scenario that needs the API server, run on the
// cluster with the chart installed, one after the other. Each removes what
// it made, so that the next one starts from the installed suite alone.
type clusterScenario struct {
	name string
	// runtimeIndependent scenarios run on the first runtime only.
	runtimeIndependent bool
	run                func(ctx context.Context, t *testing.T, sb *sandbox.Sandbox)
}

// clusterScenarios run in this order after the deploy scenario.
var clusterScenarios = []clusterScenario{
	{"refusals", false, refusals},
	{"device health", false, deviceHealth},
	{"in-place resize", false, resize},
	{"jobs with sidecars", false, jobs},
	{"node resource topology", false, nodeResourceTopology},
	{"bad values", true, badValues},
	{"bad config", true, badConfig},
	{"API server restart", true, apiServerRestart},
	{"plugin crash under load", false, pluginCrash},
	{"pod network", false, podNetwork},
	// Last: metrics-server keeps running (and scraping) until the end.
	{"metrics-server and scrapes", true, metricsServer},
}

// bothTags returns the archives of the images with the chart's tag, as
// docs/install.md builds them (docImages, which TestImageCommands
// distributes), and of those `make images` writes into dir with upgradeTag
// (the host's platform only), one per plugin each.
func bothTags(ctx context.Context, root, dir string) ([]sandbox.Image, error) {
	docDir, err := docImages(ctx, root)
	if err != nil {
		return nil, err
	}
	chartTag, err := suite.LoadImages(docDir)
	if err != nil {
		return nil, err
	}
	upgrade, err := suite.BuildImages(ctx, root, dir, "IMAGE_TAG="+upgradeTag)
	if err != nil {
		return nil, err
	}
	for _, images := range [][]sandbox.Image{chartTag, upgrade} {
		if len(images) != len(plugins) {
			return nil, fmt.Errorf("make images wrote %d images into %s, want one per plugin (%d)", len(images), filepath.Dir(images[0].Archive), len(plugins))
		}
	}
	return slices.Concat(chartTag, upgrade), nil
}
