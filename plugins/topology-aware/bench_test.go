package main_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

// The harness benchmarks drive the real plugin binary through the runtime's
// NRI adaptation, as containerd does. Their figures, with the commands that
// produce them, are in docs/benchmarks.md. Durations are per operation:
// percentiles come from every measured operation, not from b.N averages.

// qualifiedName is how the runtime knows the plugin.
const qualifiedName = "30-topology-aware"

// manifests are the pod manifests of testdata/pods, each parsed once: the
// benchmarks create thousands of pods, and parsing YAML in between would
// add garbage for the runtime's collector that no runtime makes.
type manifests map[string]*v1.Pod

// pod returns a copy of the manifest file named name.
func (m manifests) pod(b *testing.B, file, name string) *v1.Pod {
	if m[file] == nil {
		m[file] = pod(b, file)
	}
	out := m[file].DeepCopy()
	out.Name = name
	return out
}

// BenchmarkCreateContainer measures the CreateContainer round trip (the
// runtime's request, the plugin's placement, the adjustment and the updates
// applied to the specs) on the 256-CPU fixture with live shared containers.
// "alternating": every other created container is exclusive (2 CPUs), so
// the shared pool changes and every live container is updated in that call;
// the others are shared and update nothing. "shared": shared containers
// only. Each created pod is removed again, untimed.
func BenchmarkCreateContainer(b *testing.B) {
	for _, live := range []int{0, 100, 250, 500, 1000, 10000} {
		for _, mix := range []struct {
			name  string
			files []string
		}{{"alternating", []string{"guaranteed-2cpu.yaml", "burstable.yaml"}}, {"shared", []string{"burstable.yaml"}}} {
			b.Run(fmt.Sprintf("live=%d/%s", live, mix.name), func(b *testing.B) {
				benchmarkCreateContainer(b, live, mix.files)
			})
		}
	}
}

func benchmarkCreateContainer(b *testing.B, live int, files []string) {
	// Info, as in production: debug logs every update.
	n := startNode(b, "nps4-2s-12n-256c-cpuless", nodeOptions{logLevel: "info", tmpfs: true})
	for i := range live {
		manifest := pod(b, "burstable.yaml")
		manifest.Name = fmt.Sprintf("live-%d", i)
		n.rt.RunPod(b, manifest)
	}
	templates := manifests{}
	cost := n.startCost(b, "CreateContainer")
	var all, exclusive, shared, rpc []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		file := files[i%len(files)]
		p := n.rt.NewPod(b, templates.pod(b, file, fmt.Sprintf("bench-%d", i)))
		require.NoError(b, n.rt.RunPodSandbox(p))
		c := p.Containers()[0]
		b.StartTimer()
		start := time.Now()
		err := n.rt.CreateContainer(c)
		took := time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		all = append(all, took)
		if file != "burstable.yaml" {
			exclusive = append(exclusive, took)
			rpc = append(rpc, n.rt.PluginLatency(qualifiedName, "CreateContainer"))
		} else {
			shared = append(shared, took)
		}
		i++
		n.rt.RemovePod(b, p)
		b.StartTimer()
	}
	harness.ReportPercentiles(b, "", all)
	if len(exclusive) > 0 {
		harness.ReportPercentiles(b, "excl-", exclusive)
		harness.ReportPercentiles(b, "excl-rpc-", rpc)
	}
	harness.ReportPercentiles(b, "shared-", shared)
	cost.report(b, len(all))
}

// BenchmarkChurn is the scenario of the peer's published figures: about 100
// live kubelet-like pods of every QoS class, with churn: each iteration
// removes a random pod and creates another (two operations). The peer's
// machine (a recorded 112-CPU, 2-socket, 4-NUMA server) is not among our
// fixtures; snc-2s-4n-80c (80 CPUs, 2 sockets, 4 NUMA nodes) is the closest.
// Run it with -benchtime=500x for the peer's 1,000 operations. It reports
// the CreateContainer and StopContainer round trips, the plugin's CPU per
// operation and its memory.
func BenchmarkChurn(b *testing.B) {
	const livePods = 100
	// Kinds, weighted; about a fifth of the pods hold exclusive CPUs.
	kinds := []struct {
		file   string
		weight int
	}{
		{"besteffort.yaml", 20}, {"burstable.yaml", 40}, {"guaranteed-fractional.yaml", 20},
		{"guaranteed-2cpu.yaml", 15}, {"guaranteed-4cpu.yaml", 5},
	}
	rng := rand.New(rand.NewPCG(7, 30))
	pick := func() string {
		w := rng.IntN(100)
		for _, k := range kinds {
			if w < k.weight {
				return k.file
			}
			w -= k.weight
		}
		return kinds[len(kinds)-1].file
	}
	n := startNode(b, "snc-2s-4n-80c", nodeOptions{logLevel: "info", tmpfs: true})
	templates := manifests{}
	var pods []*harness.Pod
	created, refused := 0, 0
	var creates, stops []time.Duration
	// create runs a new pod, timing its container's creation; a creation
	// the policy refuses (the random mix asked for more exclusive CPUs, or
	// memory on more NUMA nodes, than are free) is counted and its pod
	// removed.
	create := func(timed bool) {
		manifest := templates.pod(b, pick(), fmt.Sprintf("churn-%d", created))
		created++
		p := n.rt.NewPod(b, manifest)
		require.NoError(b, n.rt.RunPodSandbox(p))
		c := p.Containers()[0]
		start := time.Now()
		err := n.rt.CreateContainer(c)
		took := time.Since(start)
		if err != nil {
			// A refusal names the plugin and the container.
			require.ErrorContains(b, err, "topology-aware: ")
			require.ErrorContains(b, err, "container default/"+manifest.Name+"/app:")
			refused++
			n.rt.RemovePod(b, p)
			return
		}
		require.NoError(b, n.rt.StartContainer(c))
		if timed {
			creates = append(creates, took)
		}
		pods = append(pods, p)
	}
	for len(pods) < livePods {
		create(false)
	}
	cost := n.startCost(b, "")
	for b.Loop() {
		i := rng.IntN(len(pods))
		p := pods[i]
		pods = slices.Delete(pods, i, i+1)
		start := time.Now()
		require.NoError(b, n.rt.StopContainer(p.Containers()[0]))
		stops = append(stops, time.Since(start))
		n.rt.RemovePod(b, p)
		create(true)
	}
	harness.ReportPercentiles(b, "create-", creates)
	harness.ReportPercentiles(b, "stop-", stops)
	cost.report(b, len(creates)+len(stops))
	b.ReportMetric(float64(refused)/float64(len(stops)), "refused/op")
	reportMemory(b, n.plugin.PID())
}

// liveNode is a node of live containers for the restart benchmarks: count
// single-container pods on fixture, every exclusiveEvery-th exclusive (pod
// file exclusive), the others shared.
type liveNode struct {
	fixture        string
	count          int
	exclusiveEvery int
	exclusive      string
}

// restartNodes: 500 and 1,000 live containers (1 in 10 exclusive, 2 CPUs)
// on 256 CPUs, and 10,000 (500 exclusive, 1 CPU) on 512 CPUs.
var restartNodes = []liveNode{
	{"nps4-2s-12n-256c-cpuless", 500, 10, "guaranteed-2cpu.yaml"},
	{"nps4-2s-12n-256c-cpuless", 1000, 10, "guaranteed-2cpu.yaml"},
	{"smt-8s-8n-512c", 10000, 20, "guaranteed-1cpu.yaml"},
}

// BenchmarkRestart measures how long the plugin takes to resynchronize
// with the live containers of each of restartNodes:
//
//   - runtime: the runtime restarts with the plugin pre-registered, as
//     containerd runs it from its plugin directory; timed from the new
//     adaptation's start until it has launched the plugin and the plugin
//     has synchronized (Start returns);
//   - plugin: the external plugin is killed and started again; timed from
//     the new process's start until it has synchronized.
//
// Both report the Synchronize call as the runtime timed it (sync-rpc-ms:
// above 4 MiB the runtime pages its request), the plugin's own Synchronize
// handler time (sync-handler-ms) and the plugin's memory after the last
// restart (rss-MiB, and its peak, peak-rss-MiB), and check that nothing
// moved.
func BenchmarkRestart(b *testing.B) {
	for _, ln := range restartNodes {
		b.Run(fmt.Sprintf("containers=%d", ln.count), func(b *testing.B) { benchmarkRestart(b, ln) })
	}
}

func benchmarkRestart(b *testing.B, ln liveNode) {
	b.Run("runtime", func(b *testing.B) {
		root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", ln.fixture, "sysfs"))
		require.NoError(b, err)
		// The checkpoint on a tmpfs, as startNode's tmpfs option puts it.
		n := &node{stateDir: tmpfsDir(b), httpAddr: freeLoopbackAddr(b)}
		n.rt = harness.New(b, harness.WithPreRegistered(harness.PreRegisteredPlugin{
			Index: "30", Name: "topology-aware", Binary: harness.BuildPlugin(b, pluginPkg),
			Args: []string{"--log-level", "info", "--http-addr", n.httpAddr, "--sysfs-root", root, "--state-dir", n.stateDir},
		}))
		ctrs := populateMixed(b, n, ln)
		want := specCPUs(ctrs)
		measureRestarts(b, n, func() time.Duration {
			n.rt.Stop()
			start := time.Now()
			n.rt.Start(b)
			return time.Since(start)
		})
		require.Equal(b, want, specCPUs(ctrs), "a runtime restart moved containers")
		reportMemory(b, preRegisteredPID(b, n))
	})
	b.Run("plugin", func(b *testing.B) {
		n := startNode(b, ln.fixture, nodeOptions{logLevel: "info", tmpfs: true})
		ctrs := populateMixed(b, n, ln)
		want := specCPUs(ctrs)
		measureRestarts(b, n, func() time.Duration {
			n.plugin.Kill(b)
			start := time.Now()
			n.plugin.Restart(b)
			return time.Since(start)
		})
		require.Equal(b, want, specCPUs(ctrs), "a plugin restart moved containers")
		reportMemory(b, n.plugin.PID())
	})
}

// preRegisteredPID is the process id of the plugin the runtime launched, as
// its status record in the shared state says.
func preRegisteredPID(b *testing.B, n *node) int {
	statuses, err := state.PluginStatuses(n.rt.SharedDir())
	require.NoError(b, err)
	st, found, err := statuses.Read(qualifiedName)
	require.NoError(b, err)
	require.True(b, found, "the plugin's status record")
	return st.PID
}

// reportMemory reports the resident memory of process pid now and at its
// peak.
func reportMemory(b *testing.B, pid int) {
	rss, peak := memoryOf(b, pid)
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(peak, "peak-rss-MiB")
}

// measureRestarts times restart once per iteration and reports it with
// the Synchronize call's and handler's times.
func measureRestarts(b *testing.B, n *node, restart func() time.Duration) {
	var took, rpc, handler []time.Duration
	for b.Loop() {
		took = append(took, restart())
		rpc = append(rpc, n.rt.PluginLatency(qualifiedName, "Synchronize"))
		// A new process: its handler metric holds this Synchronize only.
		seconds, _ := n.handlerTime(b, "Synchronize")
		handler = append(handler, time.Duration(seconds*float64(time.Second)))
	}
	reportMillis(b, "resync-", took)
	reportMillis(b, "sync-rpc-", rpc)
	reportMillis(b, "sync-handler-", handler)
}

// populateMixed runs the node's single-container pods.
func populateMixed(b *testing.B, n *node, ln liveNode) []*harness.Container {
	var ctrs []*harness.Container
	templates := manifests{}
	for i := range ln.count {
		file := "burstable.yaml"
		if i%ln.exclusiveEvery == 0 {
			file = ln.exclusive
		}
		ctrs = append(ctrs, n.rt.RunPod(b, templates.pod(b, file, fmt.Sprintf("live-%d", i))).Containers()...)
	}
	return ctrs
}

// specCPUs is every container's cpuset.cpus and cpuset.mems.
func specCPUs(ctrs []*harness.Container) map[string]string {
	out := make(map[string]string, len(ctrs))
	for _, c := range ctrs {
		spec := c.Spec()
		out[c.ID()] = spec.CPUs() + " mems " + spec.Mems()
	}
	return out
}

// reportMillis reports the p50 and the maximum of durations in
// milliseconds, for operations measured a few times only.
func reportMillis(b *testing.B, prefix string, took []time.Duration) {
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(harness.Percentile(took, 50)), prefix+"p50-ms")
	b.ReportMetric(ms(took[len(took)-1]), prefix+"max-ms")
}

// cost is the plugin's cost from a starting point: its process's CPU time
// and the time of its handler for event ("" for none).
type cost struct {
	n       *node
	event   string
	cpu     time.Duration
	handler float64
	calls   float64
}

func (n *node) startCost(b *testing.B, event string) cost {
	c := cost{n: n, event: event, cpu: cpuTimeOf(b, n.plugin.PID())}
	if event != "" {
		c.handler, c.calls = n.handlerTime(b, event)
	}
	return c
}

// report reports the plugin's CPU per operation (ops operations since the
// start, with whatever its writer did behind them) and the average time of
// its handler.
func (c cost) report(b *testing.B, ops int) {
	cpu := cpuTimeOf(b, c.n.plugin.PID()) - c.cpu
	b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "plugin-cpu-µs/op")
	if c.event != "" {
		seconds, calls := c.n.handlerTime(b, c.event)
		b.ReportMetric((seconds-c.handler)/(calls-c.calls)*1e6, "handler-µs/op")
	}
}

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTimeOf is the CPU time (user and system) process pid has used.
func cpuTimeOf(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis, where field 3 (state) starts.
	_, rest, ok := strings.Cut(string(data), ") ")
	require.True(b, ok, "/proc/%d/stat: %q", pid, data)
	fields := strings.Fields(rest)
	require.Greater(b, len(fields), 12, "/proc/%d/stat: %q", pid, data)
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15
		v, err := strconv.ParseInt(f, 10, 64)
		require.NoError(b, err, "/proc/%d/stat: %q", pid, data)
		ticks += v
	}
	return time.Duration(ticks) * clockTick
}

// memoryOf is the resident memory of process pid now and at its peak, in MiB.
func memoryOf(b *testing.B, pid int) (rss, peak float64) {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer f.Close()
	kib := map[string]float64{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if ok && (key == "VmRSS" || key == "VmHWM") {
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
			require.NoError(b, err, "/proc/%d/status: %s", pid, scanner.Text())
			kib[key] = v
		}
	}
	require.NoError(b, scanner.Err())
	require.Contains(b, kib, "VmRSS", "/proc/%d/status", pid)
	return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024
}

// handlerTime reads the runner's total time and count of the plugin's
// handler for event from /metrics.
func (n *node) handlerTime(t testing.TB, event string) (seconds, count float64) {
	t.Helper()
	text := n.scrape(t)
	for _, line := range strings.Split(text, "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, `nri_suite_topology_aware_handler_duration_seconds_sum{event="`+event+`"} %g`, &v); err == nil {
			seconds = v
		}
		if _, err := fmt.Sscanf(line, `nri_suite_topology_aware_handler_duration_seconds_count{event="`+event+`"} %g`, &v); err == nil {
			count = v
		}
	}
	return seconds, count
}
