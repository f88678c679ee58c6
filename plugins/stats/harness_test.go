package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/plugins/stats/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
)

const pluginPkg = "./plugins/stats"

func TestMain(m *testing.M) { harness.Main(m) }

// statsListening starts the line the plugin logs when its stats listener serves.
const statsListening = "stats endpoints listening"

// harnessNode is the in-process runtime, the plugin, and a fake v2 cgroup
// tree where the test writes the cgroups of the containers it runs.
type harnessNode struct {
	rt     *harness.Runtime
	plugin *harness.Plugin
	cgroup string
}

func startHarness(t *testing.T) *harnessNode {
	t.Helper()
	n := &harnessNode{rt: harness.New(t), cgroup: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(n.cgroup, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644))
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "90", "stats",
		harness.WithConfig("cache: 0s\n"),
		harness.WithArgs("--log-level", "debug", "--http-addr", "127.0.0.1:0", "--stats-addr", "127.0.0.1:0", "--cgroup-root", n.cgroup))
	return n
}

// writeCgroup gives a cgroups path (as the runtime passed it) a v2 cgroup
// with cpuSeconds of CPU time.
func (n *harnessNode) writeCgroup(t *testing.T, cgroupsPath string, cpuSeconds int) {
	t.Helper()
	name, err := cgstats.Name(cgroupsPath)
	require.NoError(t, err)
	dir := filepath.Join(n.cgroup, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for file, content := range map[string]string{
		"cpu.stat":       fmt.Sprintf("usage_usec %d\nuser_usec 0\nsystem_usec 0\n", cpuSeconds*1e6),
		"memory.current": "1048576\n",
		"memory.stat":    "anon 1048576\ninactive_file 0\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
	}
}

func (n *harnessNode) get(t *testing.T, path string) string {
	t.Helper()
	addr := sandbox.LoggedAddr(n.plugin.Log(), statsListening)
	require.NotEmpty(t, addr, "the plugin logs its stats address")
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	return string(body)
}

// pods returns namespace/pod -> container -> CPU seconds (-1: not read).
func (n *harnessNode) pods(t *testing.T) map[string]map[string]float64 {
	t.Helper()
	var report collect.Report
	require.NoError(t, json.Unmarshal([]byte(n.get(t, "/stats/pods")), &report))
	out := map[string]map[string]float64{}
	for _, p := range report.Pods {
		ctrs := map[string]float64{}
		for _, c := range p.Containers {
			ctrs[c.Name] = -1
			if c.Usage != nil && c.Usage.CPU != nil {
				ctrs[c.Name] = c.Usage.CPU.UsageSeconds
			}
		}
		out[p.Namespace+"/"+p.Name] = ctrs
	}
	return out
}

func podManifest(name string, containers ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  uid: uid-%s\nspec:\n  containers:\n", name, name)
	for _, c := range containers {
		s += fmt.Sprintf("  - name: %s\n    image: busybox\n", c)
	}
	return s
}

func (n *harnessNode) runPod(t *testing.T, name string, containers ...string) *harness.Pod {
	t.Helper()
	p := n.rt.RunPod(t, harness.ParsePod(t, podManifest(name, containers...)))
	for i, c := range p.Containers() {
		n.writeCgroup(t, c.NRI().GetLinux().GetCgroupsPath(), i+1)
	}
	n.writeCgroup(t, p.NRI().GetLinux().GetCgroupParent(), 10)
	return p
}

func TestInventoryFollowsEvents(t *testing.T) {
	n := startHarness(t)
	web := n.runPod(t, "web", "app", "sidecar")
	assert.Equal(t, map[string]map[string]float64{"default/web": {"app": 1, "sidecar": 2}}, n.pods(t))

	metrics := n.get(t, "/metrics/cadvisor")
	app := web.Container("app")
	name, err := cgstats.Name(app.NRI().GetLinux().GetCgroupsPath())
	require.NoError(t, err)
	assert.Contains(t, metrics, fmt.Sprintf(`container_cpu_usage_seconds_total{container="app",cpu="total",id="%s",image="busybox",name="%s",namespace="default",pod="web"} 1 `, name, app.ID()))
	assert.Contains(t, n.get(t, "/metrics/resource"), `pod_cpu_usage_seconds_total{namespace="default",pod="web"} 10 `)

	require.NoError(t, n.rt.StopContainer(web.Container("sidecar")))
	assert.Equal(t, map[string]map[string]float64{"default/web": {"app": 1}}, n.pods(t), "a stopped container is no longer read")

	n.rt.RemovePod(t, web)
	assert.Empty(t, n.pods(t), "the removed pod is gone")
}

func TestInventoryIsRebuiltAfterRestarts(t *testing.T) {
	n := startHarness(t)
	n.runPod(t, "kept", "app")
	gone := n.runPod(t, "gone", "app")

	// The plugin misses events while it is down; Synchronize brings it back
	// in line.
	n.plugin.Kill(t)
	n.rt.RemovePod(t, gone)
	n.runPod(t, "late", "app")
	n.plugin.Restart(t)
	want := map[string]map[string]float64{"default/kept": {"app": 1}, "default/late": {"app": 1}}
	assert.Equal(t, want, n.pods(t), "after the plugin's restart")

	n.rt.Restart(t)
	n.plugin.WaitSynchronized(t)
	assert.Equal(t, want, n.pods(t), "after the runtime's restart")
	assert.Contains(t, n.plugin.Log(), "inventory rebuilt from the runtime")
}

// A broken cgroup file does not fail the scrape: it is counted.
func TestBrokenCgroupIsCounted(t *testing.T) {
	n := startHarness(t)
	p := n.runPod(t, "web", "app", "broken")
	name, err := cgstats.Name(p.Container("broken").NRI().GetLinux().GetCgroupsPath())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(n.cgroup, name, "cpu.stat"), []byte("usage_usec many\n"), 0o644))

	assert.Equal(t, map[string]map[string]float64{"default/web": {"app": 1, "broken": -1}}, n.pods(t))
	assert.Regexp(t, `nri_suite_stats_collection_errors_total\{reason="cgroup_read"\} [1-9]`, n.get(t, "/metrics"))
}
