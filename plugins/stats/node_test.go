package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// TestRealNode is issue 6's acceptance on a real node: the plugin as an
// external plugin of containerd, and as a pre-registered one that containerd
// launches itself (sandbox.Variants), pods from a real kubelet, and the
// values checked against what the containers did and against the kubelet's
// own /metrics/cadvisor and /metrics/resource.
func TestRealNode(t *testing.T) {
	sandbox.RunVariants(t, sandbox.Variants("containerd"), testRealNode)
}

func testRealNode(t *testing.T, v sandbox.Variant) {
	sandbox.RequirePrereqs(t, v.Runtime)
	opts := v.Options()
	// No security plugin runs here, which the shipped containerd drop-in
	// requires: the test's pods tolerate its absence.
	opts.TolerateMissingPlugins = true
	n := &realNode{sb: sandbox.NewForTest(t, opts), ctx: sandbox.TestContext(t)}
	// The stats endpoints on their default address, 127.0.0.1:9191: the
	// runtime launches its plugins without flags, and the host lock keeps
	// other sandboxes off it.
	n.spec = sandbox.PluginSpec{Binary: harness.BuildPlugin(t, pluginPkg), Name: "stats", Idx: "90",
		Config: []byte("cache: 0s\n")}
	n.startPlugin(t)

	burner := n.runPod(t, busybox("burner", "while :; do :; done"))
	hog := n.runPod(t, busybox("hog", fmt.Sprintf("dd if=/dev/zero of=/dev/shm/fill bs=1M count=%d; %s", hogMiB, idle)))
	oomPod := busybox("oom", `while :; do awk 'BEGIN { s = "x"; while (1) s = s s }'; sleep 1; done`)
	oomPod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	oom := n.runPod(t, oomPod)

	t.Run("Labels", func(t *testing.T) {
		for _, c := range []podContainer{burner, hog, oom} {
			s := n.series(t, n.ours(t, "/metrics/cadvisor"), "container_cpu_usage_seconds_total", c.id)
			assert.Equal(t, map[string]string{"container": "main", "cpu": "total", "id": c.cgroup, "image": sandbox.BusyboxImage,
				"name": c.id, "namespace": "default", "pod": c.pod}, s.labels, "labels of %s", c.pod)
		}
	})

	t.Run("NetworkOfTheSandbox", func(t *testing.T) {
		// cAdvisor reads a pod's network from its sandbox's process: here
		// every pod is on the host's network, whose interfaces it then
		// reports, on the sandbox's series.
		sandboxes, err := n.sb.CRI().PodSandboxes(n.ctx)
		require.NoError(t, err)
		sandboxID := ""
		for _, p := range sandboxes {
			if p.Name == burner.pod && p.State == "SANDBOX_READY" {
				sandboxID = p.ID
			}
		}
		require.NotEmpty(t, sandboxID, "the burner's sandbox")
		m := n.ours(t, "/metrics/cadvisor")
		node := byLabel(m["container_network_receive_bytes_total"], map[string]string{"id": "/"}, "interface")
		pod := byLabel(m["container_network_receive_bytes_total"], map[string]string{"name": sandboxID}, "interface")
		require.NotEmpty(t, node, "the node's interfaces")
		assert.NotContains(t, node, "lo", "loopback is left out, as cAdvisor leaves it out")
		assert.Equal(t, sortedKeys(node), sortedKeys(pod), "a host-network pod's interfaces are the node's")
		podCgroup := burner.cgroup[:strings.LastIndex(burner.cgroup, "/")]
		for name, s := range pod {
			delete(s.labels, "interface")
			assert.Equal(t, map[string]string{"container": "", "id": podCgroup + "/" + sandboxID, "image": "", "name": sandboxID,
				"namespace": "default", "pod": burner.pod}, s.labels, "labels of the sandbox's %s", name)
		}
	})

	t.Run("PressureAndReport", func(t *testing.T) {
		// This host is hybrid: PSI comes from the v2 hierarchy's mirror of
		// the container's cgroup, where runc makes one.
		if _, err := os.Stat(filepath.Join(cgstats.DefaultRoot, "unified", burner.cgroup, "cpu.pressure")); err == nil {
			s := n.series(t, n.ours(t, "/metrics/cadvisor"), "container_pressure_cpu_waiting_seconds_total", burner.id)
			assert.Equal(t, burner.cgroup, s.labels["id"])
		} else {
			t.Logf("no PSI for %s on this host: %v", burner.cgroup, err)
		}
		var report collect.Report
		require.NoError(t, json.Unmarshal(n.body(t, "/stats/pods"), &report))
		found := false
		for _, p := range report.Pods {
			for _, c := range p.Containers {
				if c.ID == burner.id {
					found = true
					assert.Equal(t, burner.pod, p.Name)
					require.NotNil(t, c.Usage)
					assert.Positive(t, c.Usage.CPU.UsageSeconds, "the burner's CPU in /stats/pods")
					assert.NotEmpty(t, c.CPUs, "the burner's cpuset in /stats/pods")
				}
			}
		}
		assert.True(t, found, "/stats/pods lists the burner")
	})

	t.Run("RunnerServesNoContainerSeries", func(t *testing.T) {
		body, err := sandbox.HTTPGet(n.ctx, "http://"+n.plugin.HTTPAddr()+"/metrics")
		require.NoError(t, err)
		runner := parseText(t, body, "the runner's /metrics")
		assert.Empty(t, containerFamilies(runner), "the runner's /metrics names no pod, namespace or container")
		assert.Contains(t, runner, "nri_suite_stats_plugin_ready")
		assert.Contains(t, containerFamilies(n.ours(t, "/metrics")), "nri_suite_stats_container_cpuset_info")
	})

	t.Run("CPUBurnerRises", func(t *testing.T) {
		first := n.cpu(t, burner)
		n.poll(t, "the burner's CPU counter to rise by 0.5 s", func() error {
			if now := n.cpu(t, burner); now < first+0.5 {
				return fmt.Errorf("%.3f s, first %.3f s", now, first)
			}
			return nil
		})
	})

	t.Run("WorkingSetOfTheAllocation", func(t *testing.T) {
		want := float64(hogMiB << 20)
		var ws float64
		n.poll(t, "the hog's working set to reach its allocation", func() error {
			ws = n.series(t, n.ours(t, "/metrics/cadvisor"), "container_memory_working_set_bytes", hog.id).value
			if ws < 0.9*want {
				return fmt.Errorf("working set %.1f MiB", ws/(1<<20))
			}
			return nil
		})
		t.Logf("hog allocated %d MiB in /dev/shm; working set %.2f MiB", hogMiB, ws/(1<<20))
		assert.InEpsilon(t, want, ws, 0.10, "working set of %d MiB written to tmpfs", hogMiB)
	})

	t.Run("OOMKillCounted", func(t *testing.T) {
		n.poll(t, "an OOM kill in the oom container", func() error {
			s := n.series(t, n.ours(t, "/metrics/cadvisor"), "container_oom_events_total", oom.id)
			if s.value < 1 {
				return fmt.Errorf("container_oom_events_total %v", s.value)
			}
			return nil
		})
	})

	t.Run("SwapLimit", func(t *testing.T) {
		// The kubelet's NoSwap on v1 sets memory.memsw.limit_in_bytes to the
		// memory limit where swap is accounted: a finite limit for the oom
		// container alone, which /metrics/resource serves, as the kubelet
		// whose cAdvisor sees the containers. (The sandbox's kubelet, whose
		// cAdvisor sees them as raw cgroups, serves CRI's swap, 0, for
		// every container.)
		memsw := filepath.Join(cgstats.DefaultRoot, "memory", "memory.memsw.limit_in_bytes")
		if _, err := os.Stat(memsw); err != nil {
			t.Skipf("no v1 swap accounting on this host: %v", err)
		}
		m := n.ours(t, "/metrics/resource")["container_swap_limit_bytes"]
		o, ok := find(m, map[string]string{"pod": oom.pod, "container": "main"})
		require.True(t, ok, "the oom container's container_swap_limit_bytes")
		assert.Equal(t, float64(32<<20), o.value, "memory plus swap: the memory limit")
		_, ok = find(m, map[string]string{"pod": burner.pod})
		assert.False(t, ok, "the burner's swap is unlimited")
	})

	t.Run("AgreesWithTheKubelet", func(t *testing.T) {
		if v.Launch == sandbox.LaunchByRuntime {
			// Who launched the plugin changes nothing it reads or serves, and
			// the comparison waits on the kubelet's housekeeping (25 s).
			t.Skip("independent of who launches the plugin: compared in the external variant")
		}
		n.compareWithKubelet(t, burner, hog)
	})

	t.Run("PluginRestartContinuesTheSeries", func(t *testing.T) {
		before := n.series(t, n.ours(t, "/metrics/cadvisor"), "container_cpu_usage_seconds_total", burner.id)
		n.plugin.Kill()
		n.startPlugin(t)
		after := n.series(t, n.ours(t, "/metrics/cadvisor"), "container_cpu_usage_seconds_total", burner.id)
		assert.Equal(t, before.labels, after.labels, "the same series")
		assert.GreaterOrEqual(t, after.value, before.value, "the counter did not reset")
	})
}

const (
	hogMiB = 48 // below containerd's 64 MiB /dev/shm
	idle   = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"
)

func busybox(name, script string) *corev1.Pod {
	pod := sandbox.BusyboxPod(name)
	pod.Spec.Containers[0].Command = []string{"sh", "-c", script}
	return pod
}

type realNode struct {
	ctx    context.Context
	sb     *sandbox.Sandbox
	spec   sandbox.PluginSpec
	plugin *sandbox.Plugin
}

// podContainer is a pod's container "main".
type podContainer struct {
	pod, id, cgroup string
}

func (n *realNode) startPlugin(t *testing.T) {
	t.Helper()
	p, err := n.sb.StartPlugin(n.spec)
	require.NoError(t, err)
	require.NoError(t, p.WaitReady(n.ctx))
	n.plugin = p
}

func (n *realNode) runPod(t *testing.T, pod *corev1.Pod) podContainer {
	t.Helper()
	require.NoError(t, n.sb.WritePod(pod))
	c, err := n.sb.WaitContainer(n.ctx, pod.Name, "main")
	require.NoError(t, err)
	pc := podContainer{pod: n.sb.PodName(pod.Name), id: c.ID}
	n.poll(t, "the stats of "+pod.Name, func() error {
		m := n.ours(t, "/metrics/cadvisor")
		for _, s := range all(m["container_cpu_usage_seconds_total"]) {
			if s.labels["name"] == c.ID {
				pc.cgroup = s.labels["id"]
				return nil
			}
		}
		return fmt.Errorf("no series of container %s", c.ID)
	})
	return pc
}

// ours scrapes the plugin's stats endpoint.
func (n *realNode) ours(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	return parseText(t, n.body(t, path), path)
}

// body GETs path from the plugin's stats endpoint.
func (n *realNode) body(t *testing.T, path string) []byte {
	t.Helper()
	addr := n.plugin.LoggedAddr(statsListening)
	require.NotEmpty(t, addr, "the plugin logs its stats address")
	body, err := sandbox.HTTPGet(n.ctx, "http://"+addr+path)
	require.NoError(t, err)
	return body
}

// kubelet scrapes the kubelet's HTTPS port (self-signed, loopback only).
func (n *realNode) kubelet(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	body, err := n.sb.KubeletGet(n.ctx, path)
	require.NoError(t, err)
	return parseText(t, body, path)
}

func parseText(t *testing.T, body []byte, what string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, what)
	return families
}

// sample is one series: labels, value and timestamp (zero: none).
type sample struct {
	labels map[string]string
	value  float64
	at     time.Time
}

func all(mf *dto.MetricFamily) []sample {
	var out []sample
	for _, m := range mf.GetMetric() {
		s := sample{labels: map[string]string{}}
		for _, l := range m.GetLabel() {
			s.labels[l.GetName()] = l.GetValue()
		}
		switch {
		case m.Counter != nil:
			s.value = m.GetCounter().GetValue()
		case m.Gauge != nil:
			s.value = m.GetGauge().GetValue()
		}
		if m.TimestampMs != nil {
			s.at = time.UnixMilli(m.GetTimestampMs())
		}
		out = append(out, s)
	}
	return out
}

// series returns the one series of name whose name label is the container id.
func (n *realNode) series(t *testing.T, m map[string]*dto.MetricFamily, name, id string) sample {
	t.Helper()
	for _, s := range all(m[name]) {
		if s.labels["name"] == id {
			return s
		}
	}
	t.Fatalf("no %s series of container %s", name, id)
	return sample{}
}

func (n *realNode) cpu(t *testing.T, c podContainer) float64 {
	t.Helper()
	return n.series(t, n.ours(t, "/metrics/cadvisor"), "container_cpu_usage_seconds_total", c.id).value
}

// poll waits for check to pass, within 60 s.
func (n *realNode) poll(t *testing.T, what string, check func() error) {
	t.Helper()
	sandbox.Eventually(t, n.ctx, 60*time.Second, 200*time.Millisecond, what, check)
}

// compareWithKubelet checks, for the same containers at the same moments,
// that the plugin's values match the kubelet's: CPU counters within 2% of
// their increase over the same interval, working sets within 5%; and that
// the two serve the same help and label names for the metrics both have.
// The kubelet's samples carry the time they were read (cAdvisor's every
// housekeeping, about 10 s; CRI's at the request), the plugin's too; the
// plugin is sampled every 100 ms and interpolated at the kubelet's times.
func (n *realNode) compareWithKubelet(t *testing.T, burner, hog podContainer) {
	cpuSeries := []struct {
		what                 string
		kubeletPath, ourPath string
		family               string
		match                map[string]string
	}{
		{"container CPU (cAdvisor)", "/metrics/cadvisor", "/metrics/cadvisor", "container_cpu_usage_seconds_total", map[string]string{"id": burner.cgroup}},
		{"container CPU (resource)", "/metrics/resource", "/metrics/resource", "container_cpu_usage_seconds_total", map[string]string{"pod": burner.pod, "container": "main"}},
		{"pod CPU (resource)", "/metrics/resource", "/metrics/resource", "pod_cpu_usage_seconds_total", map[string]string{"pod": burner.pod}},
		{"node CPU (resource)", "/metrics/resource", "/metrics/resource", "node_cpu_usage_seconds_total", map[string]string{}},
	}
	ours := make([][]sample, len(cpuSeries))
	kubelet := make([][]sample, len(cpuSeries))
	start := time.Now()
	complete := func() bool {
		for i := range cpuSeries {
			if k := kubelet[i]; len(k) < 2 || k[len(k)-1].at.Sub(k[0].at) < 3*time.Second || !ours[i][len(ours[i])-1].at.After(k[len(k)-1].at) {
				return false
			}
		}
		return true
	}
	lastKubelet := time.Time{}
	n.poll(t, "two samples of each CPU counter from the kubelet", func() error {
		scrapes := map[string]map[string]*dto.MetricFamily{}
		for i, c := range cpuSeries {
			if scrapes["ours"+c.ourPath] == nil {
				scrapes["ours"+c.ourPath] = n.ours(t, c.ourPath)
			}
			if s, ok := find(scrapes["ours"+c.ourPath][c.family], c.match); ok {
				ours[i] = append(ours[i], s)
			}
		}
		if time.Since(lastKubelet) > time.Second {
			lastKubelet = time.Now()
			for i, c := range cpuSeries {
				if scrapes["kubelet"+c.kubeletPath] == nil {
					scrapes["kubelet"+c.kubeletPath] = n.kubelet(t, c.kubeletPath)
				}
				s, ok := find(scrapes["kubelet"+c.kubeletPath][c.family], c.match)
				k := kubelet[i]
				// Only samples the plugin's history brackets, each once.
				if ok && s.at.After(start) && (len(k) == 0 || s.at.After(k[len(k)-1].at)) {
					kubelet[i] = append(k, s)
				}
			}
		}
		if !complete() {
			return fmt.Errorf("kubelet samples so far: %d %d %d %d", len(kubelet[0]), len(kubelet[1]), len(kubelet[2]), len(kubelet[3]))
		}
		return nil
	})
	for i, c := range cpuSeries {
		k := kubelet[i]
		first, last := k[0], k[len(k)-1]
		o1, ok1 := interpolate(ours[i], first.at)
		o2, ok2 := interpolate(ours[i], last.at)
		require.True(t, ok1 && ok2, "%s: the plugin's samples bracket the kubelet's", c.what)
		kubeletDelta, ourDelta := last.value-first.value, o2-o1
		t.Logf("%s over %s: kubelet +%.3f s (%.3f -> %.3f), plugin +%.3f s (%.3f -> %.3f)", c.what, last.at.Sub(first.at),
			kubeletDelta, first.value, last.value, ourDelta, o1, o2)
		require.Positive(t, kubeletDelta, c.what)
		assert.InEpsilon(t, kubeletDelta, ourDelta, 0.02, "%s: increase over the same interval", c.what)
	}

	// Working sets: the hog holds its allocation, so the moments need not
	// be exact.
	for _, c := range []struct {
		what, path, family string
		match              map[string]string
	}{
		{"container working set (cAdvisor)", "/metrics/cadvisor", "container_memory_working_set_bytes", map[string]string{"id": hog.cgroup}},
		{"container working set (resource)", "/metrics/resource", "container_memory_working_set_bytes", map[string]string{"pod": hog.pod, "container": "main"}},
		{"pod working set (resource)", "/metrics/resource", "pod_memory_working_set_bytes", map[string]string{"pod": hog.pod}},
	} {
		k, ok := find(n.kubelet(t, c.path)[c.family], c.match)
		require.True(t, ok, "the kubelet serves the %s", c.what)
		o, ok := find(n.ours(t, c.path)[c.family], c.match)
		require.True(t, ok, "the plugin serves the %s", c.what)
		t.Logf("%s: kubelet %.2f MiB, plugin %.2f MiB", c.what, k.value/(1<<20), o.value/(1<<20))
		assert.InEpsilon(t, k.value, o.value, 0.05, c.what)
	}

	// Same help and label names for every metric both serve; the same label
	// values for the series the kubelet can name (its cAdvisor sees the
	// pod cgroups through the kubelet, the containers only as raw cgroups).
	for _, path := range []string{"/metrics/cadvisor", "/metrics/resource"} {
		k, o := n.kubelet(t, path), n.ours(t, path)
		shared := 0
		for name, of := range o {
			kf, ok := k[name]
			if !ok {
				continue
			}
			shared++
			assert.Equal(t, kf.GetHelp(), of.GetHelp(), "%s %s: help", path, name)
			assert.Equal(t, kf.GetType(), of.GetType(), "%s %s: type", path, name)
			assert.Equal(t, labelNames(kf), labelNames(of), "%s %s: label names", path, name)
		}
		t.Logf("%s: %d metric families served by both; the kubelet's: %s", path, shared, strings.Join(sortedKeys(k), " "))
		assert.Positive(t, shared)
		for _, name := range kubeletFamiliesServed[path] {
			if _, ok := k[name]; ok {
				assert.Contains(t, o, name, "%s: the kubelet serves %s, so must the plugin", path, name)
			}
		}
	}
	// The documented rule that drops nri-stats' copy of the kubelet's
	// families drops every one the kubelet serves.
	drop := documentedDropRule(t)
	for name := range n.kubelet(t, "/metrics/cadvisor") {
		assert.Regexp(t, drop, name, "the README's metric_relabel_configs rule leaves the kubelet's %s twice", name)
	}
	// The node's network, read by both from pid 1's /proc/<pid>/net/dev: the
	// same interfaces, and counters that the plugin, scraped after the
	// kubelet, has at or above the kubelet's (its cAdvisor's reading is up
	// to a housekeeping old) and within 2%. The kubelet's cAdvisor serves
	// no pod's network here: it sees the containers as raw cgroups (it
	// cannot reach the sandbox's private containerd socket), and a raw
	// cgroup's network it reads only for the root.
	kubeletScrape := n.kubelet(t, "/metrics/cadvisor")
	ourScrape := n.ours(t, "/metrics/cadvisor")
	for _, family := range []string{"container_network_receive_bytes_total", "container_network_receive_packets_total",
		"container_network_transmit_bytes_total", "container_network_transmit_packets_total"} {
		k := byLabel(kubeletScrape[family], map[string]string{"id": "/"}, "interface")
		o := byLabel(ourScrape[family], map[string]string{"id": "/"}, "interface")
		require.NotEmpty(t, k, "the kubelet serves the node's %s", family)
		assert.Equal(t, sortedKeys(k), sortedKeys(o), "%s: the node's interfaces", family)
		for name, ks := range k {
			t.Logf("%s{interface=%q}: kubelet %.0f, plugin %.0f", family, name, ks.value, o[name].value)
			assert.GreaterOrEqual(t, o[name].value, ks.value, "%s{interface=%q}: read later", family, name)
			assert.InDelta(t, ks.value, o[name].value, 0.02*ks.value, "%s{interface=%q}", family, name)
		}
		for _, s := range all(kubeletScrape[family]) {
			if s.labels["id"] != "/" {
				t.Logf("the kubelet also serves %s %v", family, s.labels)
			}
		}
	}

	// The memory families from memory.stat, memory.events and the kernel
	// memory of the hog's container, idle while it holds its allocation:
	// gauges within 5% (and a page cache's MiB), counters at or above the
	// kubelet's earlier reading and within 5% (and 16 events).
	kubeletScrape, ourScrape = n.kubelet(t, "/metrics/cadvisor"), n.ours(t, "/metrics/cadvisor")
	for _, c := range []struct {
		family  string
		counter bool
		match   map[string]string
	}{
		{"container_memory_kernel_usage", false, nil},
		{"container_memory_total_active_file_bytes", false, nil},
		{"container_memory_total_inactive_file_bytes", false, nil},
		{"container_memory_file_dirty_bytes", false, nil},
		{"container_memory_file_writeback_bytes", false, nil},
		{"container_memory_failures_total", true, map[string]string{"failure_type": "pgfault", "scope": "container"}},
		{"container_memory_failures_total", true, map[string]string{"failure_type": "pgmajfault", "scope": "hierarchy"}},
		{"container_memory_events_high_total", true, nil},
		{"container_memory_events_max_total", true, nil},
		{"container_memory_pgscan_total", true, nil},
		{"container_memory_pgsteal_total", true, nil},
		{"container_memory_workingset_refault_anon_total", true, nil},
		{"container_memory_workingset_refault_file_total", true, nil},
	} {
		match := map[string]string{"id": hog.cgroup}
		maps.Copy(match, c.match)
		k, ok := find(kubeletScrape[c.family], match)
		require.True(t, ok, "the kubelet serves %s%v", c.family, match)
		o, ok := find(ourScrape[c.family], match)
		require.True(t, ok, "the plugin serves %s%v", c.family, match)
		t.Logf("%s %v: kubelet %.0f, plugin %.0f", c.family, c.match, k.value, o.value)
		slack := float64(1 << 20)
		if c.counter {
			slack = 16
			assert.GreaterOrEqual(t, o.value, k.value, "%s%v: read later", c.family, c.match)
		}
		assert.InDelta(t, k.value, o.value, 0.05*k.value+slack, "%s%v", c.family, c.match)
	}

	// The open files of the hog's processes (a shell waiting for a sleep):
	// the same for both.
	for _, family := range []string{"container_file_descriptors", "container_sockets"} {
		k, ok := find(kubeletScrape[family], map[string]string{"id": hog.cgroup})
		require.True(t, ok, "the kubelet serves the hog's %s", family)
		o, ok := find(ourScrape[family], map[string]string{"id": hog.cgroup})
		require.True(t, ok, "the plugin serves the hog's %s", family)
		t.Logf("%s of the hog: kubelet %.0f, plugin %.0f", family, k.value, o.value)
		assert.Equal(t, k.value, o.value, "%s of the hog", family)
	}

	n.compareMachine(t, kubeletScrape, ourScrape, hog)
	compareFilesystems(t, kubeletScrape, ourScrape)
	compareRawCgroups(t, kubeletScrape, ourScrape, burner, hog)

	// Both read the node.
	for what, scrape := range map[string]map[string]*dto.MetricFamily{"kubelet": kubeletScrape, "plugin": ourScrape} {
		s, ok := find(scrape["container_scrape_error"], nil)
		require.True(t, ok, "the %s serves container_scrape_error", what)
		assert.Zero(t, s.value, "the %s's container_scrape_error", what)
	}

	for _, pod := range []podContainer{burner, hog} {
		podCgroup := pod.cgroup[:strings.LastIndex(pod.cgroup, "/")]
		k, ok := find(n.kubelet(t, "/metrics/cadvisor")["container_memory_usage_bytes"], map[string]string{"id": podCgroup})
		require.True(t, ok, "the kubelet serves pod cgroup %s", podCgroup)
		o, ok := find(n.ours(t, "/metrics/cadvisor")["container_memory_usage_bytes"], map[string]string{"id": podCgroup})
		require.True(t, ok, "the plugin serves pod cgroup %s", podCgroup)
		assert.Equal(t, k.labels, o.labels, "labels of the pod cgroup of %s", pod.pod)
	}
}

// kubeletFamiliesServed are families of the kubelet's that the plugin
// serves whenever the kubelet does: those of every cgroup with memory.
// The block I/O families are compared (help, type, labels) only when both
// serve them: the kubelet's come from every cgroup of the node, the
// plugin's from pods that may have read nothing from a disk.
var kubeletFamiliesServed = map[string][]string{
	"/metrics/cadvisor": {"container_last_seen", "container_spec_memory_swap_limit_bytes", "container_spec_memory_reservation_limit_bytes",
		"container_memory_kernel_usage", "container_memory_total_active_file_bytes", "container_memory_total_inactive_file_bytes",
		"container_memory_failures_total", "container_memory_events_high_total", "container_memory_events_max_total",
		"container_memory_file_dirty_bytes", "container_memory_file_writeback_bytes", "container_memory_pgscan_total",
		"container_memory_pgsteal_total", "container_scrape_error", "container_file_descriptors", "container_sockets",
		"container_ulimits_soft", "container_creation_time_seconds", "container_health_state", "cadvisor_version_info",
		"container_memory_workingset_refault_anon_total", "container_memory_workingset_refault_file_total", "container_processes",
		"container_threads", "container_start_time_seconds",
		"machine_cpu_cores", "machine_cpu_physical_cores", "machine_cpu_sockets", "machine_cpu_books", "machine_cpu_drawers",
		"machine_memory_bytes", "machine_swap_bytes", "machine_dimm_count", "machine_dimm_capacity_bytes", "machine_nvm_capacity",
		"machine_nvm_avg_power_budget_watts", "machine_scrape_error",
		"container_fs_inodes_free", "container_fs_inodes_total", "container_fs_io_current", "container_fs_io_time_seconds_total",
		"container_fs_io_time_weighted_seconds_total", "container_fs_limit_bytes", "container_fs_read_seconds_total",
		"container_fs_reads_merged_total", "container_fs_reads_total", "container_fs_sector_reads_total",
		"container_fs_sector_writes_total", "container_fs_usage_bytes", "container_fs_write_seconds_total",
		"container_fs_writes_merged_total", "container_fs_writes_total"},
	"/metrics/resource": {"node_swap_usage_bytes", "pod_swap_usage_bytes", "container_swap_usage_bytes"},
}

// compareMachine checks the node's families, which both read from the
// same host: every machine_* series (ids, CPUs, memory, swap, DIMMs) and
// cadvisor_version_info's kernel and OS equal, the root's soft limit of
// open files (pid 1's) equal, every cgroup's health state -1; and the
// hog's creation time close to the kubelet's (the runtime's creation
// against its cgroup directory's time, for the kubelet's raw cgroups).
func (n *realNode) compareMachine(t *testing.T, kubelet, ours map[string]*dto.MetricFamily, hog podContainer) {
	t.Helper()
	for name, kf := range kubelet {
		if !strings.HasPrefix(name, "machine_") {
			continue
		}
		k, o := all(kf), all(ours[name])
		t.Logf("%s: kubelet %v, plugin %v", name, k, o)
		assert.ElementsMatch(t, k, o, "%s: the same series, values and (no) timestamps", name)
	}
	cores, ok := find(ours["machine_cpu_cores"], nil)
	require.True(t, ok, "the plugin serves machine_cpu_cores")
	memory, ok := find(ours["machine_memory_bytes"], nil)
	require.True(t, ok, "the plugin serves machine_memory_bytes")
	t.Logf("machine_cpu_cores %v, machine_memory_bytes %v", cores.value, memory.value)

	k, ok := find(kubelet["cadvisor_version_info"], nil)
	require.True(t, ok, "the kubelet serves cadvisor_version_info")
	o, ok := find(ours["cadvisor_version_info"], nil)
	require.True(t, ok, "the plugin serves cadvisor_version_info")
	t.Logf("cadvisor_version_info: kubelet %v, plugin %v", k.labels, o.labels)
	for _, label := range []string{"kernelVersion", "osVersion"} {
		assert.Equal(t, k.labels[label], o.labels[label], "cadvisor_version_info's %s", label)
	}
	assert.Empty(t, o.labels["cadvisorVersion"], "nri-stats claims no cAdvisor version")

	root := map[string]string{"id": "/", "ulimit": "max_open_files"}
	k, ok = find(kubelet["container_ulimits_soft"], root)
	require.True(t, ok, "the kubelet serves the root's container_ulimits_soft")
	o, ok = find(ours["container_ulimits_soft"], root)
	require.True(t, ok, "the plugin serves the root's container_ulimits_soft")
	assert.Equal(t, k.value, o.value, "pid 1's soft limit of open files")
	h, ok := find(ours["container_ulimits_soft"], map[string]string{"id": hog.cgroup})
	require.True(t, ok, "the plugin serves the hog's container_ulimits_soft")
	t.Logf("container_ulimits_soft: root %v (kubelet %v), hog %v", o.value, k.value, h.value)

	for what, scrape := range map[string]map[string]*dto.MetricFamily{"kubelet": kubelet, "plugin": ours} {
		health := all(scrape["container_health_state"])
		require.NotEmpty(t, health, "the %s serves container_health_state", what)
		for _, s := range health {
			assert.Equal(t, -1.0, s.value, "the %s's container_health_state of %s: no health check", what, s.labels["id"])
		}
	}

	o, ok = find(ours["container_creation_time_seconds"], map[string]string{"id": hog.cgroup})
	require.True(t, ok, "the plugin serves the hog's container_creation_time_seconds")
	if k, ok := find(kubelet["container_creation_time_seconds"], map[string]string{"id": hog.cgroup}); ok {
		t.Logf("container_creation_time_seconds of the hog: kubelet %.0f, plugin %.0f", k.value, o.value)
		assert.InDelta(t, k.value, o.value, 10, "the hog's creation")
	}
}

// compareFilesystems checks the node's filesystems on the root's series,
// which both read from the same host (the plugin lists them when it
// starts, the kubelet's cAdvisor when it did): the same devices; equal
// capacity and inodes; usage and free inodes within 1% (files come and go
// between the two readings); the disks' counters, which the plugin read
// later, at or above the kubelet's and within 5% (the kubelet's are up to
// a housekeeping old, and the host's builds write).
func compareFilesystems(t *testing.T, kubelet, ours map[string]*dto.MetricFamily) {
	t.Helper()
	root := map[string]string{"id": "/"}
	devices := byLabel(kubelet["container_fs_limit_bytes"], root, "device")
	require.NotEmpty(t, devices, "the kubelet serves the node's filesystems")
	assert.Equal(t, sortedKeys(devices), sortedKeys(byLabel(ours["container_fs_limit_bytes"], root, "device")), "the node's filesystems")
	for _, c := range []struct {
		family         string
		exact, counter bool
		slack          float64
	}{
		{"container_fs_limit_bytes", true, false, 0},
		{"container_fs_inodes_total", true, false, 0},
		{"container_fs_usage_bytes", false, false, 1 << 20},
		{"container_fs_inodes_free", false, false, 100},
		{"container_fs_reads_total", false, true, 16},
		{"container_fs_reads_merged_total", false, true, 16},
		{"container_fs_sector_reads_total", false, true, 1024},
		{"container_fs_writes_total", false, true, 16},
		{"container_fs_writes_merged_total", false, true, 16},
		{"container_fs_sector_writes_total", false, true, 1024},
		{"container_fs_read_seconds_total", false, true, 1e-6},
		{"container_fs_write_seconds_total", false, true, 1e-6},
		{"container_fs_io_time_seconds_total", false, true, 1e-6},
		{"container_fs_io_time_weighted_seconds_total", false, true, 1e-6},
	} {
		k, o := byLabel(kubelet[c.family], root, "device"), byLabel(ours[c.family], root, "device")
		for device := range devices {
			ks, ok := k[device]
			require.True(t, ok, "the kubelet serves %s{device=%q}", c.family, device)
			ps, ok := o[device]
			if !assert.True(t, ok, "the plugin serves %s{device=%q}", c.family, device) {
				continue
			}
			t.Logf("%s{device=%q}: kubelet %v, plugin %v", c.family, device, ks.value, ps.value)
			switch {
			case c.exact:
				assert.Equal(t, ks.value, ps.value, "%s{device=%q}", c.family, device)
			case c.counter:
				assert.GreaterOrEqual(t, ps.value, ks.value, "%s{device=%q}: read later", c.family, device)
				assert.InDelta(t, ks.value, ps.value, 0.05*ks.value+c.slack, "%s{device=%q}", c.family, device)
			default:
				assert.InDelta(t, ks.value, ps.value, 0.01*ks.value+c.slack, "%s{device=%q}", c.family, device)
			}
		}
	}
}

// documentedDropRule is the regex of the README's and docs/install.md's
// metric_relabel_configs rule (the same in both), anchored as Prometheus
// anchors it.
func documentedDropRule(t *testing.T) *regexp.Regexp {
	t.Helper()
	var rules []string
	for _, doc := range []string{"README.md", "../../docs/install.md"} {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^\s*regex: (container_\S+)$`).FindSubmatch(text)
		require.NotNil(t, m, "%s has the drop rule", doc)
		rules = append(rules, string(m[1]))
	}
	require.Equal(t, rules[0], rules[1], "the README's and docs/install.md's drop rules")
	return regexp.MustCompile("^(?:" + rules[0] + ")$")
}

// compareRawCgroups checks what cAdvisor serves for the cgroups it sees
// as raw ones, the root and the pods: the root's processes (those directly
// in it, which come and go: within 10%, and 5) and threads (0: cAdvisor
// reads no pids.current there), its open files and sockets served, its
// refaults at or above the kubelet's earlier reading and within 5%; the
// root's and the pods' start and creation times equal (their
// directories', in whole seconds); the containers' start times in whole
// seconds.
func compareRawCgroups(t *testing.T, kubelet, ours map[string]*dto.MetricFamily, burner, hog podContainer) {
	t.Helper()
	root := map[string]string{"id": "/"}
	for _, c := range []struct {
		family  string
		counter bool
		delta   func(k float64) float64
	}{
		{"container_processes", false, func(k float64) float64 { return max(5, 0.1*k) }},
		{"container_threads", false, func(float64) float64 { return 0 }},
		{"container_file_descriptors", false, nil},
		{"container_sockets", false, nil},
		{"container_memory_workingset_refault_anon_total", true, func(k float64) float64 { return 0.05*k + 64 }},
		{"container_memory_workingset_refault_file_total", true, func(k float64) float64 { return 0.05*k + 64 }},
	} {
		k, ok := find(kubelet[c.family], root)
		require.True(t, ok, "the kubelet serves the root's %s", c.family)
		o, ok := find(ours[c.family], root)
		require.True(t, ok, "the plugin serves the root's %s", c.family)
		t.Logf("%s of the root: kubelet %.0f, plugin %.0f", c.family, k.value, o.value)
		if c.counter {
			assert.GreaterOrEqual(t, o.value, k.value, "the root's %s: read later", c.family)
		}
		if c.delta != nil {
			assert.InDelta(t, k.value, o.value, c.delta(k.value), "the root's %s", c.family)
		}
	}
	cgroups := []string{"/"}
	for _, pod := range []podContainer{burner, hog} {
		cgroups = append(cgroups, pod.cgroup[:strings.LastIndex(pod.cgroup, "/")])
	}
	for _, family := range []string{"container_start_time_seconds", "container_creation_time_seconds"} {
		for _, id := range cgroups {
			k, ok := find(kubelet[family], map[string]string{"id": id})
			require.True(t, ok, "the kubelet serves %s of %s", family, id)
			o, ok := find(ours[family], map[string]string{"id": id})
			require.True(t, ok, "the plugin serves %s of %s", family, id)
			t.Logf("%s of %s: kubelet %.0f, plugin %.0f", family, id, k.value, o.value)
			assert.Equal(t, k.value, o.value, "%s of %s", family, id)
		}
		o, ok := find(ours[family], map[string]string{"id": hog.cgroup})
		require.True(t, ok, "the plugin serves the hog's %s", family)
		assert.Equal(t, math.Trunc(o.value), o.value, "the hog's %s in whole seconds", family)
	}
}

// find returns the series of mf whose labels include match.
func find(mf *dto.MetricFamily, match map[string]string) (sample, bool) {
	for _, s := range all(mf) {
		if s.matches(match) {
			return s, true
		}
	}
	return sample{}, false
}

// matches says whether s's labels include match.
func (s sample) matches(match map[string]string) bool {
	for k, v := range match {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// byLabel returns the series of mf whose labels include match, by their
// label's value.
func byLabel(mf *dto.MetricFamily, match map[string]string, label string) map[string]sample {
	out := map[string]sample{}
	for _, s := range all(mf) {
		if s.matches(match) {
			out[s.labels[label]] = s
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// labelNames are the label names of a family's series, sorted and unique.
func labelNames(mf *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, s := range all(mf) {
		for k := range s.labels {
			seen[k] = true
		}
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// interpolate returns the value of a counter sampled in points at a moment
// they bracket.
func interpolate(points []sample, at time.Time) (float64, bool) {
	for i := 1; i < len(points); i++ {
		a, b := points[i-1], points[i]
		if at.Before(a.at) || at.After(b.at) {
			continue
		}
		if !b.at.After(a.at) {
			return a.value, true
		}
		f := at.Sub(a.at).Seconds() / b.at.Sub(a.at).Seconds()
		return a.value + f*(b.value-a.value), true
	}
	return 0, false
}
