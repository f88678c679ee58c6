package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
)

// classesBlockIO are block I/O classes of weights only, which resolve on
// any machine, in goresctrl's format: what the runtime has as its
// blockio_config_file, and the plugin under blockio.config.
const classesBlockIO = `Classes:
  throttled: [{Weight: 50}]
  fast: [{Weight: 800}]
`

// classesConfig gives BestEffort containers the block I/O class bestEffort,
// Guaranteed ones fast, the namespace batch fast, and RDT classes by QoS.
func classesConfig(bestEffort string) string {
	indented := "    " + strings.ReplaceAll(strings.TrimSuffix(classesBlockIO, "\n"), "\n", "\n    ")
	return fmt.Sprintf(`blockio:
  config:
%s
  qos:
    BestEffort: %s
    Guaranteed: fast
  namespaces:
    batch: fast
rdt:
  config:
    partitions:
      all:
        classes:
          gold: {}
          bronze: {}
  qos:
    Guaranteed: gold
    BestEffort: bronze
`, indented, bestEffort)
}

// startClassesNode is the 12-CPU node with the runtime's and the plugin's
// block I/O classes. The plugin finds RDT as the machine has it: these tests
// expect none.
func startClassesNode(t *testing.T, bestEffort string) *node {
	t.Helper()
	if _, err := os.Stat("/sys/fs/resctrl/info"); err == nil {
		t.Skip("this machine has RDT: the plugin would configure its resctrl")
	}
	return startNode(t, "smt-2s-12c-interleaved", nodeOptions{
		config:  classesConfig(bestEffort),
		runtime: []harness.Option{harness.WithBlockIOConfig([]byte(classesBlockIO))},
	})
}

// blockIOWeight is the block I/O weight in the container's spec, as the
// runtime resolved its class; 0 when it has none.
func blockIOWeight(c *harness.Container) uint16 {
	s := c.Spec()
	if s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.BlockIO == nil || s.Linux.Resources.BlockIO.Weight == nil {
		return 0
	}
	return *s.Linux.Resources.BlockIO.Weight
}

func named(t *testing.T, file, name, namespace string, annotations map[string]string) *v1.Pod {
	manifest := pod(t, file)
	manifest.Name, manifest.Namespace, manifest.Annotations = name, namespace, annotations
	return manifest
}

// TestClassesByQOSNamespaceAndAnnotations: through the runtime's NRI and the
// real plugin, each container's block I/O class comes from its pod's QoS
// class, its namespace, the kubelet's annotations and the suite's, in that
// order of strength; the runtime resolves it into the spec's
// linux.resources.blockIO. This machine has no RDT: one log line says so,
// rdt_available is 0, and no container gets an RDT adjustment.
func TestClassesByQOSNamespaceAndAnnotations(t *testing.T) {
	n := startClassesNode(t, "throttled")
	tests := []struct {
		name   string
		pod    *v1.Pod
		ctr    string
		class  string
		weight uint16
		rdt    bool // has an RDT class by its QoS
	}{
		{"BestEffort", named(t, "besteffort.yaml", "be", "default", nil), "idle", "throttled", 50, true},
		{"Guaranteed", named(t, "guaranteed-2cpu.yaml", "g", "default", nil), "app", "fast", 800, true},
		{"Burstable gets none", named(t, "burstable.yaml", "b", "default", nil), "web", "", 0, false},
		{"the namespace beats the QoS class", named(t, "besteffort.yaml", "be-batch", "batch", nil), "idle", "fast", 800, true},
		{"the kubelet's pod annotation", named(t, "besteffort.yaml", "be-kubelet", "default",
			map[string]string{"blockio.resources.beta.kubernetes.io/pod": "fast"}), "idle", "fast", 800, true},
		{"the kubelet's container annotation beats the namespace", named(t, "guaranteed-2cpu.yaml", "g-kubelet", "batch",
			map[string]string{"blockio.resources.beta.kubernetes.io/container.app": "throttled"}), "app", "throttled", 50, true},
		{"the suite's annotation beats the kubelet's", named(t, "besteffort.yaml", "be-suite", "default", map[string]string{
			"blockio.resources.beta.kubernetes.io/container.idle": "throttled",
			"blockio.nri-suite.io/pod":                            "fast",
		}), "idle", "fast", 800, true},
		{"the suite's container annotation beats its pod annotation", named(t, "burstable.yaml", "b-suite", "default", map[string]string{
			"blockio.nri-suite.io/pod":            "fast",
			"blockio.nri-suite.io/container.web":  "throttled",
			"blockio.nri-suite.io/container.else": "fast",
		}), "web", "throttled", 50, false},
	}
	withRDT := 0
	for _, tc := range tests {
		c := n.rt.RunPod(t, tc.pod).Container(tc.ctr)
		res := c.Adjustment().GetLinux().GetResources()
		assert.Equal(t, tc.class, res.GetBlockioClass().GetValue(), "%s: the block I/O class in the adjustment", tc.name)
		assert.Equal(t, tc.weight, blockIOWeight(c), "%s: the weight the runtime resolved the class to", tc.name)
		assert.Nil(t, res.GetRdtClass(), "%s: no RDT class without RDT", tc.name)
		assert.Nil(t, c.Spec().Linux.IntelRdt, "%s: no intelRdt in the spec", tc.name)
		if tc.rdt {
			withRDT++
		}
	}

	// An annotation naming a class that does not exist refuses its
	// container alone.
	bad := n.rt.NewPod(t, named(t, "besteffort.yaml", "be-bad", "default", map[string]string{"blockio.nri-suite.io": "turbo"}))
	err := n.rt.StartPod(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `annotation blockio.nri-suite.io="turbo": want one of "fast", "throttled"`)
	n.rt.RunPod(t, named(t, "besteffort.yaml", "be-after", "default", nil))
	withRDT++

	metrics := n.scrape(t)
	for _, want := range []string{
		`nri_suite_topology_aware_rdt_available 0`,
		`nri_suite_topology_aware_class_containers{class="fast",kind="blockio"} 4`,
		`nri_suite_topology_aware_class_containers{class="throttled",kind="blockio"} 4`,
		`nri_suite_topology_aware_classes_applied_total{class="throttled",kind="blockio"} 4`,
		`nri_suite_topology_aware_classes_refused_total{kind="blockio",reason="invalid-annotation"} 1`,
		fmt.Sprintf(`nri_suite_topology_aware_classes_refused_total{kind="rdt",reason="rdt-unavailable"} %d`, withRDT),
	} {
		assert.Contains(t, metrics, want)
	}
	assert.NotRegexp(t, `class_containers\{class="[^"]*",kind="rdt"\}`, metrics, "no container in an RDT class")
	assert.Regexp(t, `class_containers\{class="[^"]*",kind="blockio"\}`, metrics, "the pattern matches the series it rules out")
	assert.Equal(t, 1, strings.Count(n.plugin.Log(), "RDT is unavailable on this node"), "one log line says RDT is missing")
}

// TestClassesSurviveRestarts: a container keeps the classes it was created
// with across a restart of the plugin that comes back with another
// configuration, and across a restart of the runtime; new containers get
// the classes of the configuration in effect; one created while the plugin
// was away has none it knows of.
func TestClassesSurviveRestarts(t *testing.T) {
	n := startClassesNode(t, "throttled")
	early := n.rt.RunPod(t, named(t, "besteffort.yaml", "early", "default", nil)).Container("idle")
	require.Equal(t, uint16(50), blockIOWeight(early))
	requireSavedClasses(t, n.stateDir, map[string]classes.Assignment{early.ID(): {BlockIO: "throttled"}})
	n.plugin.Kill(t)
	away := n.rt.RunPod(t, named(t, "besteffort.yaml", "away", "default", nil)).Container("idle")
	require.Zero(t, blockIOWeight(away), "created without the plugin")

	root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", "smt-2s-12c-interleaved", "sysfs"))
	require.NoError(t, err)
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "30", "topology-aware",
		harness.WithConfig(classesConfig("fast")),
		harness.WithArgs("--log-level", "debug", "--http-addr", n.httpAddr, "--sysfs-root", root, "--state-dir", n.stateDir))
	late := n.rt.RunPod(t, named(t, "besteffort.yaml", "late", "default", nil)).Container("idle")
	assert.Equal(t, uint16(800), blockIOWeight(late), "a new BestEffort container gets the new configuration's class")

	want := map[string]classes.Assignment{early.ID(): {BlockIO: "throttled"}, late.ID(): {BlockIO: "fast"}}
	requireSavedClasses(t, n.stateDir, want)
	kept := `nri_suite_topology_aware_class_containers{class="throttled",kind="blockio"} 1`
	assert.Contains(t, n.scrape(t), kept, "the restarted plugin counts the container in the class it was created with")

	n.rt.Restart(t)
	n.plugin.WaitSynchronized(t)
	assert.Contains(t, n.scrape(t), kept, "the plugin keeps the classes across the runtime's restart")
	requireSavedClasses(t, n.stateDir, want)
	assert.Equal(t, uint16(50), blockIOWeight(early), "the runtime never changed the container")
}

// requireSavedClasses waits, bounded, until the checkpoint holds exactly
// these classes: the writer saves behind the handlers.
func requireSavedClasses(t *testing.T, stateDir string, want map[string]classes.Assignment) {
	t.Helper()
	var got map[string]classes.Assignment
	ok := assert.Eventually(t, func() bool {
		saved, _ := loadCheckpoint(t, stateDir)
		got = saved.Classes
		return assert.ObjectsAreEqual(want, got)
	}, 10*time.Second, 10*time.Millisecond)
	require.True(t, ok, "the checkpoint's classes: got %v, want %v", got, want)
}
