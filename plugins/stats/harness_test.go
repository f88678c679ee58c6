package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
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

// startHarness starts the plugin with the flags a test adds to the harness's.
func startHarness(t *testing.T, args ...string) *harnessNode {
	t.Helper()
	n := &harnessNode{rt: harness.New(t), cgroup: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(n.cgroup, "cgroup.controllers"), []byte("cpuset cpu memory pids\n"), 0o644))
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "90", "stats",
		harness.WithConfig("cache: 0s\n"),
		harness.WithArgs(append([]string{"--log-level", "debug", "--http-addr", "127.0.0.1:0", "--stats-addr", "127.0.0.1:0",
			"--cgroup-root", n.cgroup}, args...)...))
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
		"cpu.stat":              fmt.Sprintf("usage_usec %d\nuser_usec 0\nsystem_usec 0\n", cpuSeconds*1e6),
		"memory.current":        "1048576\n",
		"memory.stat":           "anon 1048576\ninactive_file 0\n",
		"cpuset.cpus.effective": "0-1\n",
		"cpuset.mems.effective": "0\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
	}
}

// get GETs path from the stats listener, which must answer 200.
func (n *harnessNode) get(t *testing.T, path string) string {
	t.Helper()
	status, body := n.fetch(t, statsListening, path, "")
	require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	return body
}

// fetch GETs path from the listener whose address the plugin logged with
// msg, with token as a bearer token unless it is empty.
func (n *harnessNode) fetch(t *testing.T, msg, path, token string) (int, string) {
	t.Helper()
	addr := sandbox.LoggedAddr(n.plugin.Log(), msg)
	require.NotEmpty(t, addr, "the plugin logs the address of %q", msg)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
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

// runnerServing starts the line the runner logs when its own listener
// (--http-addr) serves.
const runnerServing = "serving /metrics"

// With a token, every series that names a pod, namespace or container is
// served only behind it: the runner's /metrics, which has no
// authentication, serves the plugin's own operational series alone.
func TestContainerSeriesOnlyBehindTheToken(t *testing.T) {
	const token = "s3cret"
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	n := startHarness(t, "--stats-token-file", tokenFile)
	app := n.runPod(t, "web", "app").Container("app")
	publishSuiteRecords(t, n.rt.SharedDir(), app.ID())

	status, body := n.fetch(t, runnerServing, "/metrics", "")
	require.Equal(t, http.StatusOK, status, body)
	runner := parseText(t, []byte(body), "the runner's /metrics")
	assert.Empty(t, containerFamilies(runner), "the runner's /metrics names no pod, namespace or container")
	for _, name := range []string{"nri_suite_stats_requests_total", "nri_suite_stats_collection_duration_seconds",
		"nri_suite_stats_containers", "nri_suite_stats_plugin_ready"} {
		assert.Contains(t, runner, name, "the runner's /metrics keeps the operational series")
	}

	for _, path := range []string{"/metrics/cadvisor", "/metrics/resource", "/metrics", "/stats/pods"} {
		status, _ := n.fetch(t, statsListening, path, "")
		assert.Equal(t, http.StatusUnauthorized, status, "%s without the token", path)
		status, _ = n.fetch(t, statsListening, path, "wrong")
		assert.Equal(t, http.StatusUnauthorized, status, "%s with a wrong token", path)
	}
	served := map[string][]string{}
	for _, path := range []string{"/metrics/cadvisor", "/metrics/resource", "/metrics"} {
		status, body := n.fetch(t, statsListening, path, token)
		require.Equal(t, http.StatusOK, status, "%s with the token: %s", path, body)
		served[path] = containerFamilies(parseText(t, []byte(body), path))
	}
	assert.Contains(t, served["/metrics/cadvisor"], "container_cpu_usage_seconds_total")
	assert.Contains(t, served["/metrics/resource"], "pod_cpu_usage_seconds_total")
	assert.Subset(t, served["/metrics"], []string{"nri_suite_stats_container_cpuset_info", "nri_suite_stats_container_cpus",
		"nri_suite_stats_container_placement_info", "nri_suite_stats_container_device_health"})
	status, body = n.fetch(t, statsListening, "/stats/pods", token)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, app.ID())
}

// publishSuiteRecords publishes what topology-aware and device-injector
// would for a container: its placement and the health of its device.
func publishSuiteRecords(t *testing.T, dir, id string) {
	t.Helper()
	placements, err := state.PlacementRecords(dir)
	require.NoError(t, err)
	require.NoError(t, placements.Publish(id, state.PlacementRecord{ContainerID: id, Pool: "shared", CPUs: "0-1", Mems: "0"}))
	health, err := state.ContainerHealthRecords(dir)
	require.NoError(t, err)
	require.NoError(t, health.Publish(id, state.ContainerHealth{ContainerID: id,
		Resources: []state.ResourceHealth{{ResourceID: "example.com/gpu=0", Health: state.HealthHealthy}}}))
}

// containerFamilies are the families with a series labelled pod, namespace
// or container, sorted.
func containerFamilies(families map[string]*dto.MetricFamily) []string {
	var names []string
	for name, mf := range families {
		if slices.ContainsFunc(labelNames(mf), func(l string) bool { return l == "pod" || l == "namespace" || l == "container" }) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// A TLS file that is missing or broken leaves the plugin not ready, its
// /readyz naming the file, until the file is fixed: then the stats
// listener serves HTTPS without a restart.
func TestTLSFilesHoldTheStatsListener(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	n := startHarness(t, "--stats-tls-cert", certFile, "--stats-tls-key", keyFile)
	readyz := func() (int, string) { return n.fetch(t, runnerServing, "/readyz", "") }
	waitReadyz := func(code int, want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, body := readyz()
			return got == code && strings.Contains(body, want)
		}, 30*time.Second, 50*time.Millisecond, "want /readyz %d %q", code, want)
	}
	waitReadyz(http.StatusServiceUnavailable, "not ready: stats endpoints: loading --stats-tls-cert: reading "+certFile)
	assert.Contains(t, n.plugin.Log(), "cannot serve the stats endpoints")

	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate\n"), 0o600))
	require.NoError(t, os.WriteFile(keyFile, []byte("not a key\n"), 0o600))
	waitReadyz(http.StatusServiceUnavailable, "loading --stats-tls-cert "+certFile+" and --stats-tls-key "+keyFile+": tls: failed to find any PEM data")

	ca, err := pki.NewCA("test CA")
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "nri-stats", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.Server})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	waitReadyz(http.StatusOK, "ready")

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca.CertPEM()))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + sandbox.LoggedAddr(n.plugin.Log(), statsListening) + "/metrics/resource")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
