package collect

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/machine"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

const (
	podCgroup = "/kubepods/burstable/poduid-web"
	ctrCgroup = podCgroup + "/ctr-app"
)

// refaults are the fixture cgroups' memory.stat refault lines.
const refaults = "workingset_refault_anon 3\nworkingset_refault_file 30\n"

// writeV1 writes a v1 cgroup under root with cpuacct.usage ns of CPU time
// and usage bytes of memory, 1 MiB of which inactive file cache.
func writeV1(t testing.TB, root, name string, cpuNs, usage int) {
	t.Helper()
	stat := "total_cache 1048576\ntotal_rss " + itoa(usage-1<<20) + "\ntotal_mapped_file 0\ntotal_inactive_file 1048576\n" + refaults
	for path, content := range map[string]string{
		"cpuacct" + name + "/cpuacct.usage":            itoa(cpuNs),
		"cpuacct" + name + "/cpuacct.stat":             "user 1\nsystem 1\n",
		"cpuacct" + name + "/cpuacct.usage_percpu":     itoa(cpuNs),
		"cpu" + name + "/cpu.stat":                     "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
		"cpu" + name + "/cpu.shares":                   "2",
		"cpu" + name + "/cpu.cfs_quota_us":             "-1",
		"cpu" + name + "/cpu.cfs_period_us":            "100000",
		"memory" + name + "/memory.stat":               stat,
		"memory" + name + "/memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		"memory" + name + "/memory.usage_in_bytes":     itoa(usage),
		"memory" + name + "/memory.max_usage_in_bytes": itoa(usage),
		"memory" + name + "/memory.failcnt":            "0",
		"memory" + name + "/memory.limit_in_bytes":     "9223372036854771712",
		"memory" + name + "/cgroup.procs":              "1\n",
		"cpuset" + name + "/cpuset.cpus":               "0-3",
		"cpuset" + name + "/cpuset.mems":               "0",
	} {
		writeFile(t, root, path, content)
	}
}

// writeV2 writes a v2 cgroup under root with the same usage as writeV1.
// The root cgroup gets the files the kernel has there (no memory.current:
// the node's usage comes from newNodeOn's meminfo).
func writeV2(t testing.TB, root, name string, cpuNs, usage int) {
	t.Helper()
	files := map[string]string{
		"cpu.stat":              "usage_usec " + itoa(cpuNs/1000) + "\nuser_usec 1\nsystem_usec 1\n",
		"memory.stat":           "anon " + itoa(usage-1<<20) + "\nfile 1048576\nfile_mapped 0\ninactive_file 1048576\n" + refaults,
		"cgroup.procs":          "1\n",
		"cpuset.cpus.effective": "0-3",
		"cpuset.mems.effective": "0",
	}
	if name == "/" {
		files["cgroup.controllers"] = "cpuset cpu io memory pids"
	} else {
		maps.Copy(files, map[string]string{
			"memory.current": itoa(usage), "memory.peak": itoa(usage), "memory.max": "max",
			"memory.events": "low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n",
			"pids.current":  "1", "pids.max": "max", "cpu.max": "max 100000", "cpu.weight": "1",
		})
	}
	for file, content := range files {
		writeFile(t, root, path.Join(name, file), content)
	}
}

func writeFile(t testing.TB, root, path, content string) {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte(strings.TrimSuffix(content, "\n")+"\n"), 0o644))
}

func itoa(n int) string { return strconv.Itoa(n) }

// writeBlkioV1 writes the v1 blkio files of a cgroup that read 4 KiB (1
// read) and wrote 8 KiB (2 writes) on the disk sda (8:0), and read 512
// bytes once from a loop device (7:0), which cAdvisor leaves unnamed.
func writeBlkioV1(t testing.TB, root, name string) {
	t.Helper()
	writeFile(t, root, "blkio"+name+"/blkio.throttle.io_service_bytes_recursive",
		"8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 12288\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 12288\n7:0 Read 512\n7:0 Write 0\n7:0 Sync 512\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 512\nTotal 12800")
	writeFile(t, root, "blkio"+name+"/blkio.throttle.io_serviced_recursive",
		"8:0 Read 1\n8:0 Write 2\n8:0 Sync 3\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 3\n7:0 Read 1\n7:0 Write 0\n7:0 Sync 1\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 1\nTotal 4")
}

// writeBlkioV2 writes io.stat with the same counts as writeBlkioV1.
func writeBlkioV2(t testing.TB, root, name string) {
	t.Helper()
	writeFile(t, root, path.Join(name, "io.stat"), "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n7:0 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0")
}

type node struct {
	root   string
	shared string
	inv    *inventory.Inventory
	c      *Collector
	now    time.Time
}

func newNode(t *testing.T) *node { return newNodeOn(t, writeV1) }

// newNodeOn writes the node's cgroups with write (writeV1 or writeV2), and
// a meminfo whose MemTotal - MemFree is the root's usage.
func newNodeOn(t *testing.T, write func(t testing.TB, root, name string, cpuNs, usage int)) *node {
	t.Helper()
	n := &node{root: t.TempDir(), shared: t.TempDir(), inv: inventory.New(), now: time.Unix(1_700_000_000, 0)}
	const rootUsage, memTotal = 1 << 30, 8 << 30
	write(t, n.root, "/", 100e9, rootUsage)
	write(t, n.root, podCgroup, 3e9, 65<<20)
	write(t, n.root, ctrCgroup, 2e9, 33<<20)
	dateCgroups(t, n.root)
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	writeFile(t, meminfo, "", "MemTotal: "+itoa(memTotal>>10)+" kB\nMemFree: "+itoa((memTotal-rootUsage)>>10)+" kB\nSwapTotal: 0 kB\nSwapFree: 0 kB")
	layout, err := cgstats.Detect(n.root)
	require.NoError(t, err)
	sysBlock := t.TempDir()
	writeFile(t, sysBlock, "sda/dev", "8:0")
	reader, err := cgstats.NewReader(layout, cgstats.Options{SpecMaxAge: cgstats.DefaultSpecMaxAge, Meminfo: meminfo, SysBlock: sysBlock})
	require.NoError(t, err)
	n.c, err = New(n.inv, reader, Options{CacheFor: time.Second, Workers: 2, SharedDir: n.shared}, "nri_suite_stats", logrus.NewEntry(logrus.New()))
	require.NoError(t, err)
	n.c.now = func() time.Time { return n.now }

	pod := &api.PodSandbox{Id: "sb1", Name: "web", Namespace: "shop", Uid: "uid-web",
		Linux: &api.LinuxPodSandbox{CgroupParent: podCgroup}}
	ctr := &api.Container{Id: "ctr-app", PodSandboxId: "sb1", Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{CgroupsPath: ctrCgroup}, Image: &api.Image{Name: "registry.example/app:1"},
		StartedAt: time.Unix(1_699_999_000, 25e7).UnixNano(), CreatedAt: time.Unix(1_699_998_999, 5e8).UnixNano()}
	n.inv.Replace([]*api.PodSandbox{pod}, []*api.Container{ctr})
	return n
}

// The fixture cgroups' times: the root's directories date from
// rootCreated, the pod's (and its container's) from podCreated, both
// after the boot of the host the tests run on.
var rootCreated, podCreated = time.Unix(2_000_000_000, 0), time.Unix(2_000_000_100, 0)

func dateCgroups(t testing.TB, root string) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		at := rootCreated
		if strings.Contains(path, "poduid-web") {
			at = podCreated
		}
		return os.Chtimes(path, at, at)
	}))
}

func TestCAdvisorMetrics(t *testing.T) {
	n := newNode(t)
	const want = `
# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="",cpu="total",id="/",image="",name="",namespace="",pod=""} 100 1700000000000
container_cpu_usage_seconds_total{container="",cpu="total",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 3 1700000000000
container_cpu_usage_seconds_total{container="app",cpu="total",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 2 1700000000000
# HELP container_memory_working_set_bytes Current working set in bytes.
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} 1.072693248e+09 1700000000000
container_memory_working_set_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 6.7108864e+07 1700000000000
container_memory_working_set_bytes{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 3.3554432e+07 1700000000000
# HELP container_oom_events_total Count of out of memory events observed for the container
# TYPE container_oom_events_total counter
container_oom_events_total{container="",id="/",image="",name="",namespace="",pod=""} 1 1700000000000
container_oom_events_total{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 1 1700000000000
container_oom_events_total{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 1 1700000000000
# HELP container_spec_memory_limit_bytes Memory limit for the container.
# TYPE container_spec_memory_limit_bytes gauge
container_spec_memory_limit_bytes{container="",id="/",image="",name="",namespace="",pod=""} 0 1700000000000
container_spec_memory_limit_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 0 1700000000000
container_spec_memory_limit_bytes{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 0 1700000000000
# HELP container_start_time_seconds Start time of the container since unix epoch in seconds.
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="",id="/",image="",name="",namespace="",pod=""} 2e+09
container_start_time_seconds{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 2.0000001e+09
container_start_time_seconds{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 1.699999e+09
# HELP container_scrape_error 1 if there was an error while getting container metrics, 0 otherwise
# TYPE container_scrape_error gauge
container_scrape_error 0
`
	assertCAdvisor(t, n, want, "container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_oom_events_total",
		"container_spec_memory_limit_bytes", "container_start_time_seconds", "container_scrape_error")
	assert.Equal(t, 1.0, scrapeError(&Snapshot{}), "without the node's stats")
	// No quota: no CFS series, as cAdvisor.
	assert.Zero(t, testutil.CollectAndCount(NewCAdvisor(n.c), "container_cpu_cfs_periods_total", "container_spec_cpu_quota"))
	assert.Equal(t, 3, testutil.CollectAndCount(NewCAdvisor(n.c), "container_spec_cpu_shares"))
}

// The node series are there on v2 too, where the root cgroup has no
// memory.current: its usage comes from meminfo.
func TestResourceMetrics(t *testing.T) {
	const want = `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="shop",pod="web"} 2 1700000000000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="shop",pod="web"} 3.3554432e+07 1700000000000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 100 1700000000000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.072693248e+09 1700000000000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="shop",pod="web"} 3 1700000000000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="shop",pod="web"} 6.7108864e+07 1700000000000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="shop",pod="web"} 1.6999989995e+09
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="shop",pod="web"} 0 1700000000000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 0 1700000000000
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{namespace="shop",pod="web"} 0 1700000000000
`
	for _, tc := range []struct {
		name  string
		write func(t testing.TB, root, name string, cpuNs, usage int)
	}{{"v1", writeV1}, {"v2", writeV2}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeOn(t, tc.write)
			require.NoError(t, testutil.CollectAndCompare(NewResource(n.c), strings.NewReader(want),
				"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "node_cpu_usage_seconds_total",
				"node_memory_working_set_bytes", "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes", "resource_scrape_error",
				"container_swap_usage_bytes", "node_swap_usage_bytes", "pod_swap_usage_bytes", "container_start_time_seconds"))
		})
	}
}

// On v2, the root's cAdvisor memory series come from meminfo and the root
// memory.stat, in /metrics/cadvisor's direct text as in its Collect.
func TestCAdvisorNodeMemoryOnV2(t *testing.T) {
	n := newNodeOn(t, writeV2)
	const want = `
# HELP container_memory_usage_bytes Current memory usage in bytes, including all memory regardless of when it was accessed
# TYPE container_memory_usage_bytes gauge
container_memory_usage_bytes{container="",id="/",image="",name="",namespace="",pod=""} 1.073741824e+09 1700000000000
container_memory_usage_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 6.815744e+07 1700000000000
container_memory_usage_bytes{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 3.4603008e+07 1700000000000
# HELP container_memory_working_set_bytes Current working set in bytes.
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} 1.072693248e+09 1700000000000
container_memory_working_set_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 6.7108864e+07 1700000000000
container_memory_working_set_bytes{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 3.3554432e+07 1700000000000
`
	require.NoError(t, testutil.CollectAndCompare(NewCAdvisor(n.c), strings.NewReader(want),
		"container_memory_usage_bytes", "container_memory_working_set_bytes"))
	var direct strings.Builder
	require.NoError(t, NewCAdvisor(n.c).WriteText(&direct))
	assert.Contains(t, direct.String(), `container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} 1.072693248e+09 1700000000000`)
}

// The samples carry the time of the reading, as the kubelet's do, but the
// start time, which the kubelet serves without one.
func TestSamplesCarryTheReadingTime(t *testing.T) {
	n := newNode(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewResource(n.c))
	families, err := reg.Gather()
	require.NoError(t, err)
	stamped := 0
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "resource_scrape_error":
			case "container_start_time_seconds":
				assert.Nil(t, m.TimestampMs, "the start time carries no timestamp")
			default:
				assert.Equal(t, n.now.UnixMilli(), m.GetTimestampMs(), mf.GetName())
				stamped++
			}
		}
	}
	assert.Equal(t, 10, stamped, "node, pod and container CPU, memory and swap, and the container's swap limit")
}

func TestSnapshotIsCachedAndFollowsTheInventory(t *testing.T) {
	n := newNode(t)
	first := n.c.Snapshot()
	n.inv.RemoveContainer("ctr-app")
	assert.Same(t, first, n.c.Snapshot(), "within the cache period")
	n.now = n.now.Add(time.Second)
	second := n.c.Snapshot()
	require.Len(t, second.Pods, 1)
	assert.Empty(t, second.Pods[0].Containers, "the removed container is no longer read")
}

func TestFailuresAreCountedAndTheScrapeGoesOn(t *testing.T) {
	n := newNode(t)
	// A container whose cgroup is gone, one with a malformed file, one with
	// a path that cannot be resolved, and a broken placement record.
	pod := &api.PodSandbox{Id: "sb1", Name: "web", Namespace: "shop", Linux: &api.LinuxPodSandbox{CgroupParent: podCgroup}}
	for _, c := range []*api.Container{
		{Id: "gone", PodSandboxId: "sb1", Name: "gone", Linux: &api.LinuxContainer{CgroupsPath: podCgroup + "/gone"}},
		{Id: "bad", PodSandboxId: "sb1", Name: "bad", Linux: &api.LinuxContainer{CgroupsPath: podCgroup + "/bad"}},
		{Id: "nopath", PodSandboxId: "sb1", Name: "nopath", Linux: &api.LinuxContainer{CgroupsPath: "a:b"}},
	} {
		n.inv.SetContainer(pod, c)
		n.inv.SetRunning(c.Id, true)
	}
	writeV1(t, n.root, podCgroup+"/bad", 1, 2<<20)
	require.NoError(t, os.WriteFile(filepath.Join(n.root, "memory", podCgroup, "bad", "memory.stat"), []byte("garbage\n"), 0o644))
	placements, err := state.PlacementRecords(n.shared)
	require.NoError(t, err)
	require.NoError(t, placements.Publish("ctr-app", state.PlacementRecord{ContainerID: "ctr-app", Pool: "shared", PoolRecord: "missing"}))
	require.NoError(t, os.MkdirAll(filepath.Join(n.shared, "container-health"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n.shared, "container-health", "torn.json"), []byte(`{"format":`), 0o644))

	got := testutil.CollectAndCount(NewCAdvisor(n.c), "container_cpu_usage_seconds_total")
	assert.Equal(t, 4, got, "node, pod, app and the container with a bad memory.stat still have CPU")
	for reason, want := range map[string]float64{ReasonVanished: 1, ReasonRead: 1, ReasonPath: 1, ReasonStateRecord: 2} {
		assert.Equal(t, want, testutil.ToFloat64(n.c.errors.WithLabelValues(reason)), reason)
	}
}

func TestSuiteMetrics(t *testing.T) {
	n := newNode(t)
	placements, err := state.PlacementRecords(n.shared)
	require.NoError(t, err)
	pools, err := state.PoolRecords(n.shared)
	require.NoError(t, err)
	require.NoError(t, placements.Publish("ctr-app", state.PlacementRecord{ContainerID: "ctr-app", Pool: "shared",
		PoolRecord: state.SharedPoolRecord, NUMANodes: []int{0}}))
	require.NoError(t, pools.Publish(state.SharedPoolRecord, state.PoolRecord{Pool: "shared", CPUs: "1-3", Mems: "0"}))
	health, err := state.ContainerHealthRecords(n.shared)
	require.NoError(t, err)
	require.NoError(t, health.Publish("ctr-app", state.ContainerHealth{ContainerID: "ctr-app",
		Resources: []state.ResourceHealth{{ResourceID: "example.com/gpu=0", Health: state.HealthUnhealthy}}}))
	statuses, err := state.PluginStatuses(n.shared)
	require.NoError(t, err)
	require.NoError(t, statuses.Publish("30-topology-aware", state.PluginStatus{Name: "topology-aware", Index: 30, Connected: true,
		Ready: false, Updated: time.Unix(1_700_000_000, 0)}))

	const wantContainers = `
# HELP nri_suite_stats_container_cpus Number of CPUs in a container's cgroup cpuset.
# TYPE nri_suite_stats_container_cpus gauge
nri_suite_stats_container_cpus{container="app",namespace="shop",pod="web"} 4
# HELP nri_suite_stats_container_device_health Health of each device a container got, as device-injector published it (KEP-4680): 1 for the current value of health (Healthy, Unhealthy, Unknown), 0 for the others.
# TYPE nri_suite_stats_container_device_health gauge
nri_suite_stats_container_device_health{container="app",health="Healthy",namespace="shop",pod="web",resource="example.com/gpu=0"} 0
nri_suite_stats_container_device_health{container="app",health="Unhealthy",namespace="shop",pod="web",resource="example.com/gpu=0"} 1
nri_suite_stats_container_device_health{container="app",health="Unknown",namespace="shop",pod="web",resource="example.com/gpu=0"} 0
# HELP nri_suite_stats_container_placement_info A container's placement as topology-aware published it: pool, CPUs, memory nodes and the NUMA affinity admitted; always 1.
# TYPE nri_suite_stats_container_placement_info gauge
nri_suite_stats_container_placement_info{container="app",cpus="1-3",mems="0",namespace="shop",numa_nodes="0",pod="web",pool="shared"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewSuiteContainers(n.c, "nri_suite_stats"), strings.NewReader(wantContainers),
		"nri_suite_stats_container_cpus", "nri_suite_stats_container_device_health", "nri_suite_stats_container_placement_info"))
	const wantNode = `
# HELP nri_suite_stats_plugin_connected 1 when an nri-suite plugin's last status record says it is registered with the runtime, 0 otherwise.
# TYPE nri_suite_stats_plugin_connected gauge
nri_suite_stats_plugin_connected{index="30",plugin="topology-aware"} 1
# HELP nri_suite_stats_plugin_ready 1 when an nri-suite plugin's last status record says it is registered and synchronized, 0 otherwise.
# TYPE nri_suite_stats_plugin_ready gauge
nri_suite_stats_plugin_ready{index="30",plugin="topology-aware"} 0
# HELP nri_suite_stats_containers Running containers whose cgroups the last collection read.
# TYPE nri_suite_stats_containers gauge
nri_suite_stats_containers 1
`
	require.NoError(t, testutil.CollectAndCompare(NewSuiteNode(n.c, "nri_suite_stats"), strings.NewReader(wantNode),
		"nri_suite_stats_plugin_connected", "nri_suite_stats_plugin_ready", "nri_suite_stats_containers"))

	report := NewReport(n.c.Snapshot())
	require.Len(t, report.Pods, 1)
	require.Len(t, report.Pods[0].Containers, 1)
	app := report.Pods[0].Containers[0]
	assert.Equal(t, &Placement{Pool: "shared", CPUs: "1-3", Mems: "0", NUMANodes: []int{0}}, app.Placement)
	assert.Equal(t, "0-3", app.CPUs)
	assert.Equal(t, 2.0, app.Usage.CPU.UsageSeconds)
	assert.Equal(t, uint64(32<<20), app.Usage.Memory.WorkingSet)
	assert.Equal(t, []state.ResourceHealth{{ResourceID: "example.com/gpu=0", Health: state.HealthUnhealthy}}, app.Devices)
	assert.Equal(t, 3.0, report.Pods[0].Usage.CPU.UsageSeconds)
	assert.Len(t, report.Plugins, 1)
}

// The reader lends each cgroup its previous sample, whose CPU spec is
// reused while young: a reading rereads the usage, not the shares.
func TestReadingsReuseTheSpecOfThePreviousOne(t *testing.T) {
	n := newNode(t)
	first := n.c.Snapshot().Pods[0].Containers[0].Sample
	writeFile(t, n.root, "cpu"+ctrCgroup+"/cpu.shares", "1024")
	writeFile(t, n.root, "cpuacct"+ctrCgroup+"/cpuacct.usage", "4000000000")
	n.now = n.now.Add(time.Second)
	second := n.c.Snapshot().Pods[0].Containers[0].Sample
	assert.Equal(t, uint64(4e9), second.CPU.UsageNs)
	assert.Equal(t, first.Spec.CPUShares, second.Spec.CPUShares)
	assert.Equal(t, uint64(2), second.Spec.CPUShares)
}

// The block I/O families: per cgroup and device, as cAdvisor's (v1: every
// operation the kernel counts; v2: reads and writes); a cgroup without
// block I/O files has none (the root here).
func TestBlockIOMetrics(t *testing.T) {
	const ctr = `container="app",device="/dev/sda",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1"`
	const loop = `container="app",device="",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1"`
	const rest = `name="ctr-app",namespace="shop"`
	fs := `
# HELP container_fs_reads_bytes_total Cumulative count of bytes read
# TYPE container_fs_reads_bytes_total counter
container_fs_reads_bytes_total{` + ctr + `,` + rest + `,pod="web"} 4096 1700000000000
container_fs_reads_bytes_total{` + loop + `,` + rest + `,pod="web"} 512 1700000000000
# HELP container_fs_reads_total Cumulative count of reads completed
# TYPE container_fs_reads_total counter
container_fs_reads_total{` + ctr + `,` + rest + `,pod="web"} 1 1700000000000
container_fs_reads_total{` + loop + `,` + rest + `,pod="web"} 1 1700000000000
# HELP container_fs_writes_bytes_total Cumulative count of bytes written
# TYPE container_fs_writes_bytes_total counter
container_fs_writes_bytes_total{` + ctr + `,` + rest + `,pod="web"} 8192 1700000000000
container_fs_writes_bytes_total{` + loop + `,` + rest + `,pod="web"} 0 1700000000000
# HELP container_fs_writes_total Cumulative count of writes completed
# TYPE container_fs_writes_total counter
container_fs_writes_total{` + ctr + `,` + rest + `,pod="web"} 2 1700000000000
container_fs_writes_total{` + loop + `,` + rest + `,pod="web"} 0 1700000000000
`
	usage := func(ops ...string) string {
		out := "# HELP container_blkio_device_usage_total Blkio Device bytes usage\n# TYPE container_blkio_device_usage_total counter\n"
		for _, op := range ops {
			sda := map[string]string{"Read": "4096", "Write": "8192", "Sync": "12288", "Async": "0", "Discard": "0", "Total": "12288"}[op]
			lp := map[string]string{"Read": "512", "Write": "0", "Sync": "512", "Async": "0", "Discard": "0", "Total": "512"}[op]
			out += `container_blkio_device_usage_total{` + ctr + `,major="8",minor="0",` + rest + `,operation="` + op + `",pod="web"} ` + sda + " 1700000000000\n"
			out += `container_blkio_device_usage_total{` + loop + `,major="7",minor="0",` + rest + `,operation="` + op + `",pod="web"} ` + lp + " 1700000000000\n"
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		write func(t testing.TB, root, name string, cpuNs, usage int)
		blkio func(t testing.TB, root, name string)
		want  string
	}{
		{"v1", writeV1, writeBlkioV1, usage("Read", "Write", "Sync", "Async", "Discard", "Total") + fs},
		{"v2", writeV2, writeBlkioV2, usage("Read", "Write") + fs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeOn(t, tc.write)
			tc.blkio(t, n.root, ctrCgroup)
			m := NewCAdvisor(n.c)
			names := []string{"container_blkio_device_usage_total", "container_fs_reads_bytes_total", "container_fs_reads_total",
				"container_fs_writes_bytes_total", "container_fs_writes_total"}
			require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(tc.want), names...))
			var direct strings.Builder
			require.NoError(t, m.WriteText(&direct))
			assertTextFamilies(t, tc.want, direct.String(), names...)
		})
	}
}

// blk-iocost's counters of io.stat, in seconds, for the device that has
// them only.
func TestIOCostMetrics(t *testing.T) {
	n := newNodeOn(t, writeV2)
	writeFile(t, n.root, path.Join(ctrCgroup, "io.stat"),
		"8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=1500000 cost.wait=250000 cost.indebt=3 cost.indelay=4\n"+
			"7:0 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0")
	const labels = `{container="app",device="/dev/sda",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"}`
	want := ""
	for _, c := range []struct{ name, help, value string }{
		{"indebt", "debt", "3e-06"}, {"indelay", "delay", "4e-06"}, {"usage", "usage", "1.5"}, {"wait", "wait", "0.25"},
	} {
		name := "container_fs_io_cost_" + c.name + "_seconds_total"
		want += "# HELP " + name + " Cumulative IOCost " + c.help + " in seconds\n# TYPE " + name + " counter\n" +
			name + labels + " " + c.value + " 1700000000000\n"
	}
	assertCAdvisor(t, n, want, "container_fs_io_cost_indebt_seconds_total", "container_fs_io_cost_indelay_seconds_total",
		"container_fs_io_cost_usage_seconds_total", "container_fs_io_cost_wait_seconds_total")
}

// container_spec_memory_{swap,reservation}_limit_bytes come with the
// memory limit, and container_last_seen is on every cgroup served, with
// the reading's time.
func TestMemorySpecAndLastSeen(t *testing.T) {
	n := newNode(t)
	writeFile(t, n.root, "memory"+ctrCgroup+"/memory.memsw.limit_in_bytes", "536870912")
	writeFile(t, n.root, "memory"+ctrCgroup+"/memory.soft_limit_in_bytes", "134217728")
	const labels = `container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"`
	const want = `
# HELP container_last_seen Last time a container was seen by the exporter
# TYPE container_last_seen gauge
container_last_seen{container="",id="/",image="",name="",namespace="",pod=""} 1.7e+09 1700000000000
container_last_seen{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 1.7e+09 1700000000000
container_last_seen{` + labels + `} 1.7e+09 1700000000000
# HELP container_spec_memory_reservation_limit_bytes Memory reservation limit for the container.
# TYPE container_spec_memory_reservation_limit_bytes gauge
container_spec_memory_reservation_limit_bytes{container="",id="/",image="",name="",namespace="",pod=""} 0 1700000000000
container_spec_memory_reservation_limit_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 0 1700000000000
container_spec_memory_reservation_limit_bytes{` + labels + `} 1.34217728e+08 1700000000000
# HELP container_spec_memory_swap_limit_bytes Memory swap limit for the container.
# TYPE container_spec_memory_swap_limit_bytes gauge
container_spec_memory_swap_limit_bytes{container="",id="/",image="",name="",namespace="",pod=""} 0 1700000000000
container_spec_memory_swap_limit_bytes{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 0 1700000000000
container_spec_memory_swap_limit_bytes{` + labels + `} 5.36870912e+08 1700000000000
`
	names := []string{"container_last_seen", "container_spec_memory_reservation_limit_bytes", "container_spec_memory_swap_limit_bytes"}
	assertCAdvisor(t, n, want, names...)
}

// The memory failures are four series per cgroup, labelled between and
// after cAdvisor's base labels; v1's kernel memory is its kmem usage, 0
// without the file.
func TestMemoryFailuresAndKernelUsage(t *testing.T) {
	n := newNode(t)
	writeFile(t, n.root, "memory"+ctrCgroup+"/memory.stat",
		"total_cache 1048576\ntotal_rss 1048576\ntotal_mapped_file 0\ntotal_inactive_file 1048576\npgfault 1000\npgmajfault 7\n")
	writeFile(t, n.root, "memory"+ctrCgroup+"/memory.kmem.usage_in_bytes", "3145728")
	const (
		root = `container="",id="/",image="",name="",namespace="",pod=""`
		pod  = `container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"`
		ctr  = `container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"`
	)
	want := `
# HELP container_memory_kernel_usage Size of kernel memory allocated in bytes.
# TYPE container_memory_kernel_usage gauge
container_memory_kernel_usage{` + root + `} 0 1700000000000
container_memory_kernel_usage{` + pod + `} 0 1700000000000
container_memory_kernel_usage{` + ctr + `} 3.145728e+06 1700000000000
# HELP container_memory_failures_total Cumulative count of memory allocation failures.
# TYPE container_memory_failures_total counter
`
	for _, cg := range []struct{ labels, pgfault, pgmajfault string }{{root, "0", "0"}, {pod, "0", "0"}, {ctr, "1000", "7"}} {
		for _, f := range []struct{ kind, value string }{{"pgfault", cg.pgfault}, {"pgmajfault", cg.pgmajfault}} {
			for _, scope := range []string{"container", "hierarchy"} {
				labels := strings.Replace(cg.labels, `,id=`, `,failure_type="`+f.kind+`",id=`, 1) + `,scope="` + scope + `"`
				want += "container_memory_failures_total{" + labels + "} " + f.value + " 1700000000000\n"
			}
		}
	}
	names := []string{"container_memory_kernel_usage", "container_memory_failures_total"}
	assertCAdvisor(t, n, want, names...)
}

// assertCAdvisor checks that /metrics/cadvisor has the families names of
// want, through a registry (Collect) and in the direct text.
func assertCAdvisor(t *testing.T, n *node, want string, names ...string) {
	t.Helper()
	m := NewCAdvisor(n.c)
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want), names...))
	var direct strings.Builder
	require.NoError(t, m.WriteText(&direct))
	assertTextFamilies(t, want, direct.String(), names...)
}

// assertTextFamilies checks that the direct text has the families names
// of want, series for series.
func assertTextFamilies(t *testing.T, want, direct string, names ...string) {
	t.Helper()
	w, d := parsed(t, want), parsed(t, direct)
	for _, name := range names {
		assert.Equal(t, w[name], d[name], "%s in /metrics/cadvisor's direct text", name)
	}
}

// Swap in /metrics/resource is the cgroups' swap in use, as
// container_memory_swap: on v2 memory.swap.current.
func TestResourceSwap(t *testing.T) {
	n := newNodeOn(t, writeV2)
	writeFile(t, n.root, podCgroup[1:]+"/memory.swap.current", "2097152")
	writeFile(t, n.root, ctrCgroup[1:]+"/memory.swap.current", "1048576")
	const want = `
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="shop",pod="web"} 1.048576e+06 1700000000000
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{namespace="shop",pod="web"} 2.097152e+06 1700000000000
`
	require.NoError(t, testutil.CollectAndCompare(NewResource(n.c), strings.NewReader(want), "container_swap_usage_bytes", "pod_swap_usage_bytes"))
}

// container_swap_limit_bytes is served for a container whose swap limit
// is finite, as the kubelet: v1's memory.memsw.limit_in_bytes (memory
// plus swap, the memory limit under the kubelet's NoSwap), v2's
// memory.swap.max (0 under NoSwap); a missing file is 0, as cAdvisor
// reads it.
func TestResourceSwapLimit(t *testing.T) {
	const series = `container_swap_limit_bytes{container="app",namespace="shop",pod="web"} `
	for _, tc := range []struct {
		name        string
		write       func(t testing.TB, root, name string, cpuNs, usage int)
		file, limit string
		want        string // "": no series
	}{
		{"v2 NoSwap", writeV2, ctrCgroup[1:] + "/memory.swap.max", "0", "0"},
		{"v2 limited", writeV2, ctrCgroup[1:] + "/memory.swap.max", "1048576", "1.048576e+06"},
		{"v2 unlimited", writeV2, ctrCgroup[1:] + "/memory.swap.max", "max", ""},
		{"v1 memory limit", writeV1, "memory" + ctrCgroup + "/memory.memsw.limit_in_bytes", "33554432", "3.3554432e+07"},
		{"v1 unlimited", writeV1, "memory" + ctrCgroup + "/memory.memsw.limit_in_bytes", "9223372036854771712", ""},
		{"v1 without swap accounting", writeV1, "", "", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeOn(t, tc.write)
			if tc.file != "" {
				writeFile(t, n.root, tc.file, tc.limit)
			}
			want := ""
			if tc.want != "" {
				want = `
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
` + series + tc.want + " 1700000000000\n"
			}
			require.NoError(t, testutil.CollectAndCompare(NewResource(n.c), strings.NewReader(want), "container_swap_limit_bytes"))
		})
	}
}

// The refaults of every cgroup with memory, from memory.stat (the root's
// too on v2, where its usage comes from meminfo).
func TestCAdvisorRefaults(t *testing.T) {
	const want = `
# HELP container_memory_workingset_refault_anon_total Cumulative number of refaults of previously evicted anonymous pages.
# TYPE container_memory_workingset_refault_anon_total counter
container_memory_workingset_refault_anon_total{container="",id="/",image="",name="",namespace="",pod=""} 3 1700000000000
container_memory_workingset_refault_anon_total{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 3 1700000000000
container_memory_workingset_refault_anon_total{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 3 1700000000000
# HELP container_memory_workingset_refault_file_total Cumulative number of refaults of previously evicted file pages.
# TYPE container_memory_workingset_refault_file_total counter
container_memory_workingset_refault_file_total{container="",id="/",image="",name="",namespace="",pod=""} 30 1700000000000
container_memory_workingset_refault_file_total{container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"} 30 1700000000000
container_memory_workingset_refault_file_total{container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"} 30 1700000000000
`
	for _, tc := range []struct {
		name  string
		write func(t testing.TB, root, name string, cpuNs, usage int)
	}{{"v1", writeV1}, {"v2", writeV2}} {
		t.Run(tc.name, func(t *testing.T) {
			assertCAdvisor(t, newNodeOn(t, tc.write), want,
				"container_memory_workingset_refault_anon_total", "container_memory_workingset_refault_file_total")
		})
	}
}

// The machine families and cadvisor_version_info are the machine info's,
// without timestamps; without one, machine_scrape_error is 1 and no
// machine_* series is served.
func TestMachineAndVersion(t *testing.T) {
	n := newNode(t)
	n.c.opts.Machine = &machine.Info{Cores: 8, PhysicalCores: 2, Sockets: 2, MemoryBytes: 24 << 30, SwapBytes: 2 << 30,
		DIMMs:     map[string]machine.DIMMs{"DDR5": {Count: 2, CapacityBytes: 32 << 30}},
		MachineID: "mid", SystemUUID: "uuid", BootID: "bid"}
	n.c.opts.Version = &machine.Version{Kernel: "6.8.0-1", OS: "Ubuntu 24.04.3 LTS"}
	const ids = `boot_id="bid",machine_id="mid",system_uuid="uuid"`
	const want = `
# HELP cadvisor_version_info A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.
# TYPE cadvisor_version_info gauge
cadvisor_version_info{cadvisorRevision="",cadvisorVersion="",dockerVersion="",kernelVersion="6.8.0-1",osVersion="Ubuntu 24.04.3 LTS"} 1
# HELP machine_cpu_cores Number of logical CPU cores.
# TYPE machine_cpu_cores gauge
machine_cpu_cores{` + ids + `} 8
# HELP machine_cpu_physical_cores Number of physical CPU cores.
# TYPE machine_cpu_physical_cores gauge
machine_cpu_physical_cores{` + ids + `} 2
# HELP machine_cpu_sockets Number of CPU sockets.
# TYPE machine_cpu_sockets gauge
machine_cpu_sockets{` + ids + `} 2
# HELP machine_cpu_books Number of CPU books.
# TYPE machine_cpu_books gauge
machine_cpu_books{` + ids + `} 0
# HELP machine_memory_bytes Amount of memory installed on the machine.
# TYPE machine_memory_bytes gauge
machine_memory_bytes{` + ids + `} 2.5769803776e+10
# HELP machine_swap_bytes Amount of swap memory available on the machine.
# TYPE machine_swap_bytes gauge
machine_swap_bytes{` + ids + `} 2.147483648e+09
# HELP machine_dimm_count Number of RAM DIMM (all types memory modules) value labeled by dimm type.
# TYPE machine_dimm_count gauge
machine_dimm_count{` + ids + `,type="DDR5"} 2
# HELP machine_dimm_capacity_bytes Total RAM DIMM capacity (all types memory modules) value labeled by dimm type.
# TYPE machine_dimm_capacity_bytes gauge
machine_dimm_capacity_bytes{` + ids + `,type="DDR5"} 3.4359738368e+10
# HELP machine_nvm_capacity NVM capacity value labeled by NVM mode (memory mode or app direct mode).
# TYPE machine_nvm_capacity gauge
machine_nvm_capacity{boot_id="bid",machine_id="mid",mode="app_direct_mode",system_uuid="uuid"} 0
machine_nvm_capacity{boot_id="bid",machine_id="mid",mode="memory_mode",system_uuid="uuid"} 0
# HELP machine_nvm_avg_power_budget_watts NVM power budget.
# TYPE machine_nvm_avg_power_budget_watts gauge
machine_nvm_avg_power_budget_watts{` + ids + `} 0
# HELP machine_scrape_error 1 if there was an error while getting machine metrics, 0 otherwise.
# TYPE machine_scrape_error gauge
machine_scrape_error 0
`
	names := []string{"cadvisor_version_info", "machine_cpu_cores", "machine_cpu_physical_cores", "machine_cpu_sockets", "machine_cpu_books",
		"machine_memory_bytes", "machine_swap_bytes", "machine_dimm_count", "machine_dimm_capacity_bytes", "machine_nvm_capacity",
		"machine_nvm_avg_power_budget_watts", "machine_scrape_error"}
	assertCAdvisor(t, n, want, names...)

	n.c.opts.Machine, n.c.opts.Version = nil, nil
	assertCAdvisor(t, n, `
# HELP machine_scrape_error 1 if there was an error while getting machine metrics, 0 otherwise.
# TYPE machine_scrape_error gauge
machine_scrape_error 1
`, names...)
}

// container_health_state is -1 (no health check) on every cgroup; the
// soft limit of open files is that of a container's first process and of
// pid 1 for the root (the fixtures' cgroup.procs hold 1); the creation
// time is the runtime's for a container, its directories' for the root
// and a pod, in whole seconds, without a timestamp.
func TestHealthUlimitsAndCreation(t *testing.T) {
	n := newNode(t)
	proc := t.TempDir()
	writeFile(t, proc, "1/limits", "Max open files            1048576              1048576              files\n")
	// A container's limit is read with its processes, which need the pids
	// controller.
	writeFile(t, n.root, "pids"+ctrCgroup+"/pids.current", "1")
	writeFile(t, n.root, "pids"+ctrCgroup+"/pids.max", "max")
	dateCgroups(t, n.root)
	reader, err := cgstats.NewReader(n.c.reader.Layout(), cgstats.Options{Proc: proc})
	require.NoError(t, err)
	n.c.reader = reader
	const (
		root = `container="",id="/",image="",name="",namespace="",pod=""`
		pod  = `container="",id="/kubepods/burstable/poduid-web",image="",name="",namespace="shop",pod="web"`
		ctr  = `container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop",pod="web"`
	)
	const want = `
# HELP container_health_state The result of the container's health check
# TYPE container_health_state gauge
container_health_state{` + root + `} -1 1700000000000
container_health_state{` + pod + `} -1 1700000000000
container_health_state{` + ctr + `} -1 1700000000000
# HELP container_ulimits_soft Soft ulimit values for the container root process. Unlimited if -1, except priority and nice
# TYPE container_ulimits_soft gauge
container_ulimits_soft{` + root + `,ulimit="max_open_files"} 1.048576e+06 1700000000000
container_ulimits_soft{` + ctr + `,ulimit="max_open_files"} 1.048576e+06 1700000000000
# HELP container_creation_time_seconds Container creation time since unix epoch in seconds.
# TYPE container_creation_time_seconds gauge
container_creation_time_seconds{` + root + `} 2e+09
container_creation_time_seconds{` + pod + `} 2.0000001e+09
container_creation_time_seconds{` + ctr + `} 1.699998999e+09
`
	names := []string{"container_health_state", "container_ulimits_soft", "container_creation_time_seconds"}
	assertCAdvisor(t, n, want, names...)
}
