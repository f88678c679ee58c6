package nriplugin

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// fixtureRoot is the sysfs tree of a topology fixture.
func fixtureRoot(name string) string {
	return filepath.Join("..", "..", "..", "common", "topology", "testdata", name, "sysfs")
}

// testPlugin is a plugin on a fixture with private state directories.
type testPlugin struct {
	*Plugin
	opts     Options
	registry *prometheus.Registry
	shared   string // the shared state directory
}

func newTestPlugin(t testing.TB, fixture string, devices DeviceSource) *testPlugin {
	t.Helper()
	return newTestPluginIn(t, fixture, devices, t.TempDir(), t.TempDir())
}

// newTestPluginIn is a plugin with the given state and shared state
// directories: a new process of an earlier plugin when they are its.
func newTestPluginIn(t testing.TB, fixture string, devices DeviceSource, stateDir, shared string) *testPlugin {
	t.Helper()
	return newTestPluginWith(t, fixture, devices, stateDir, shared, nil)
}

// newTestPluginWith is newTestPluginIn with the runner's Updater.
func newTestPluginWith(t testing.TB, fixture string, devices DeviceSource, stateDir, shared string, updater plugin.Updater) *testPlugin {
	t.Helper()
	root := fixtureRoot(fixture)
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	reg := prometheus.NewRegistry()
	opts := Options{Topology: topo, SysfsRoot: root, StateDir: stateDir, Devices: devices}
	p, err := New(plugin.Deps{Name: "topology-aware", Log: logrus.NewEntry(logger), Registry: reg,
		MetricsNamespace: "test", SharedDir: shared, Updater: updater}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return &testPlugin{Plugin: p, opts: opts, registry: reg, shared: shared}
}

// nriPod converts a pod manifest from testdata/pods the way the harness does
// and returns the NRI view of the sandbox and of the named container.
func nriPod(t testing.TB, file, container string) (*api.PodSandbox, *api.Container) {
	t.Helper()
	manifest, err := kubepod.LoadFile(filepath.Join("..", "testdata", "pods", file))
	require.NoError(t, err)
	pod, err := kubepod.Config{}.Convert(manifest)
	require.NoError(t, err)
	c := pod.Container(container)
	require.NotNil(t, c, "container %s in %s", container, file)
	return kubepod.NRIPodSandbox(pod), kubepod.NRIContainer(c, c.Spec, kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_UNKNOWN})
}
