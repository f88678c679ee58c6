package nriplugin

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// classesConfig gives BestEffort containers a block I/O class of weights
// only, which resolves on any machine.
const classesConfig = `
blockio:
  config:
    Classes:
      throttled: [{Weight: 50}]
      fast: [{Weight: 800}]
  qos:
    BestEffort: throttled
    Guaranteed: fast
`

// newClassesPlugin is a plugin on the 12-CPU fixture whose classes resolve
// block devices on this machine (never RDT), in stateDir.
func newClassesPlugin(t *testing.T, stateDir string) *testPlugin {
	t.Helper()
	root := fixtureRoot("smt-2s-12c-interleaved")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	log := logrus.NewEntry(logger)
	reg := prometheus.NewRegistry()
	opts := Options{Topology: topo, SysfsRoot: root, StateDir: stateDir,
		Classes: classes.NewNode(log, classes.NodeOptions{BlockDevices: true})}
	p, err := New(plugin.Deps{Name: "topology-aware", Log: log, Registry: reg, MetricsNamespace: "test", SharedDir: t.TempDir()}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return &testPlugin{Plugin: p, opts: opts, registry: reg}
}

// createAnnotated creates a container of testdata/pods with pod annotations.
func createAnnotated(t *testing.T, p *Plugin, v *runtimeView, file, container string, annotations map[string]string) (string, string, error) {
	t.Helper()
	pod, ctr := nriPod(t, file, container)
	pod.Annotations = annotations
	adjust, updates, err := p.CreateContainer(context.Background(), pod, ctr)
	if err != nil {
		return "", "", err
	}
	v.pods[pod.GetId()], v.ctrs[ctr.GetId()] = pod, ctr
	v.setCPUs(ctr.GetId(), adjust.GetLinux().GetResources().GetCpu().GetCpus(), adjust.GetLinux().GetResources().GetCpu().GetMems())
	v.apply(t, updates)
	return ctr.GetId(), adjust.GetLinux().GetResources().GetBlockioClass().GetValue(), nil
}

// TestBadClassInputAffectsNoOtherContainer: a configuration that cannot
// apply (a device pattern that matches no block device, a malformed class)
// is refused naming what is wrong, and the classes in effect stay; an
// annotation naming a class that does not exist refuses its container
// alone.
func TestBadClassInputAffectsNoOtherContainer(t *testing.T) {
	p := newClassesPlugin(t, t.TempDir())
	require.NoError(t, p.Configure([]byte(classesConfig), "classes.yaml"))
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)

	for _, bad := range []struct{ config, want string }{
		{"blockio:\n  config:\n    Classes:\n      slow:\n      - Devices: [/dev/nri-suite-no-such-disk]\n        ThrottleReadBps: 1Mi\n",
			`config bad.yaml: blockio: class "slow": device wildcard "/dev/nri-suite-no-such-disk" does not match any device nodes`},
		{"blockio:\n  config:\n    Classes:\n      slow: {Weight: 10}\n",
			`config bad.yaml: blockio: config (line 3): expected goresctrl's blockio configuration: json: cannot unmarshal object into Go struct field Config.Classes of type []blockio.DevicesParameters`},
		{"blockio:\n  qos:\n    BestEffort: slow\n",
			`config bad.yaml: blockio: qos: BestEffort: class "slow" is not defined`},
	} {
		err := p.Configure([]byte(bad.config), "bad.yaml")
		require.Error(t, err)
		assert.Contains(t, err.Error(), bad.want)
	}
	_, class, err := createAnnotated(t, p.Plugin, v, "besteffort.yaml", "idle", nil)
	require.NoError(t, err)
	assert.Equal(t, "throttled", class, "the classes configured before")

	_, _, err = createAnnotated(t, p.Plugin, v, "guaranteed-2cpu.yaml", "app", map[string]string{"blockio.nri-suite.io/container.app": "turbo"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `annotation blockio.nri-suite.io/container.app="turbo": want one of "fast", "throttled"`)
	assert.Equal(t, 1.0, testutil.ToFloat64(p.metrics.rejections.WithLabelValues(invalidAnnotationReason)))
	_, class, err = createAnnotated(t, p.Plugin, v, "burstable.yaml", "web", map[string]string{"blockio.nri-suite.io": "fast"})
	require.NoError(t, err, "the next container is created")
	assert.Equal(t, "fast", class)
}

// TestCheckpointWithoutClassesLoads: a checkpoint written before containers
// had classes (its payload a policy.Snapshot alone, the same schema
// version) restores every placement; the containers created since get
// classes, which the next checkpoint holds.
func TestCheckpointWithoutClassesLoads(t *testing.T) {
	stateDir := t.TempDir()
	first, v, before := withSavedState(t, stateDir)
	require.NoError(t, first.Close())
	old, err := state.NewCheckpoint[policy.Snapshot](filepath.Join(stateDir, CheckpointFile), CheckpointVersion)
	require.NoError(t, err)
	require.NoError(t, old.Save(before), "the checkpoint as the plugin wrote it before classes")

	next := newClassesPlugin(t, stateDir)
	require.NoError(t, next.Configure([]byte(classesConfig), "classes.yaml"))
	synchronize(t, next.Plugin, v)
	assert.Equal(t, before, next.pol.Snapshot(), "every placement restored from the old checkpoint")
	assert.Empty(t, next.classes.Saved(), "no classes known of the containers created before")

	id, class, err := createAnnotated(t, next.Plugin, v, "besteffort.yaml", "idle", nil)
	require.NoError(t, err)
	assert.Equal(t, "throttled", class)
	require.NoError(t, next.persist.Flush())
	saved, found, err := next.checkpoint.Load()
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, map[string]classes.Assignment{id: {BlockIO: "throttled"}}, saved.Classes)
}
