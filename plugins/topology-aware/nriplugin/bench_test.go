package nriplugin

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// The handlers called directly, without NRI: the plugin's own share of a
// round trip (the harness benchmarks in ../bench_test.go measure the whole).

const benchFixture = "nps4-2s-12n-256c-cpuless"

// livePod is the container of a testdata pod as the i-th of many: its own
// pod (id, name and uid, in the kubelet's labels too, which the plugin reads
// first: pods sharing a uid would be one pod) and container id. Each file is
// parsed once: a benchmark makes thousands.
func livePod(b testing.TB, file, container string, i int) (*api.PodSandbox, *api.Container) {
	key := [2]string{file, container}
	tpl, ok := liveTemplates.Load(key)
	if !ok {
		pod, ctr := nriPod(b, file, container)
		tpl, _ = liveTemplates.LoadOrStore(key, [2]proto.Message{pod, ctr})
	}
	pod := proto.Clone(tpl.([2]proto.Message)[0]).(*api.PodSandbox)
	ctr := proto.Clone(tpl.([2]proto.Message)[1]).(*api.Container)
	pod.Id, pod.Uid, pod.Name = fmt.Sprintf("pod-%d", i), fmt.Sprintf("uid-%d", i), fmt.Sprintf("%s-%d", pod.Name, i)
	for _, labels := range []map[string]string{pod.Labels, ctr.Labels} {
		labels[k8s.LabelPodUID], labels[k8s.LabelPodName] = pod.Uid, pod.Name
	}
	ctr.Id, ctr.PodSandboxId = fmt.Sprintf("ctr-%d", i), pod.Id
	return pod, ctr
}

// liveTemplates are livePod's parsed files: [file, container] to the pod
// and the container.
var liveTemplates sync.Map

// node is a machine and the containers a benchmark keeps running on it:
// count containers, every exclusiveEvery-th one exclusive (pod file
// exclusive), the others shared.
type node struct {
	fixture        string
	count          int
	exclusiveEvery int
	exclusive      string
}

func (n node) String() string {
	return fmt.Sprintf("containers=%d/%s", n.count, n.fixture)
}

// nodes are the benchmarks' sizes: 500 containers (1 in 10 exclusive, 2
// CPUs) on 256 CPUs, and 10,000 (500 exclusive, 1 CPU) on 512 CPUs.
var nodes = []node{
	{benchFixture, 500, 10, "guaranteed-2cpu.yaml"},
	{"smt-8s-8n-512c", 10000, 20, "guaranteed-1cpu.yaml"},
}

// populate creates the node's containers and returns the runtime's view of
// them.
func populate(b *testing.B, p *Plugin, n node) *runtimeView {
	v := newRuntimeView()
	synchronize(b, p, v)
	for i := range n.count {
		file, name := "burstable.yaml", "web"
		if i%n.exclusiveEvery == 0 {
			file, name = n.exclusive, "app"
		}
		pod, ctr := livePod(b, file, name, i)
		adjust, updates, err := p.CreateContainer(context.Background(), pod, ctr)
		require.NoError(b, err)
		v.pods[pod.GetId()], v.ctrs[ctr.GetId()] = pod, ctr
		cpu := adjust.GetLinux().GetResources().GetCpu()
		v.setCPUs(ctr.GetId(), cpu.GetCpus(), cpu.GetMems())
		v.apply(b, updates)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	exclusive := 0
	for id := range v.ctrs {
		if pl, _ := p.pol.Placement(id); pl.Pool == policy.PoolExclusive {
			exclusive++
		}
	}
	require.Equal(b, (n.count+n.exclusiveEvery-1)/n.exclusiveEvery, exclusive, "exclusive containers on the node")
	return v
}

// BenchmarkCreateContainer measures the plugin's CreateContainer handler
// in-process (no NRI transport) with live shared containers on the 256-CPU
// fixture, each created container stopped again; the writer behind the
// handlers runs meanwhile. "alternating" alternates an exclusive container,
// which updates every live container, and a shared one, which updates none,
// each reported apart (excl-, shared-); "shared" creates shared containers
// only, so that nothing else (the exclusive grants' garbage, the writer's
// snapshots after them) weighs on them.
func BenchmarkCreateContainer(b *testing.B) {
	exclusive := [2]string{"guaranteed-2cpu.yaml", "app"}
	shared := [2]string{"burstable.yaml", "web"}
	for _, live := range []int{0, 100, 250, 500, 1000, 10000} {
		for _, mix := range []struct {
			name  string
			files [][2]string
		}{{"alternating", [][2]string{exclusive, shared}}, {"shared", [][2]string{shared}}} {
			b.Run(fmt.Sprintf("live=%d/%s", live, mix.name), func(b *testing.B) {
				benchmarkCreateContainer(b, newTestPlugin(b, benchFixture, nil), live, mix.files, nil)
			})
		}
	}
}

// benchmarkCreateContainer creates and stops containers of files in turn,
// their pods annotated with annotations, on p with live shared containers.
func benchmarkCreateContainer(b *testing.B, p *testPlugin, live int, files [][2]string, annotations map[string]string) {
	v := newRuntimeView()
	synchronize(b, p.Plugin, v)
	for i := range live {
		pod, ctr := nriPod(b, "burstable.yaml", "web")
		ctr.Id = fmt.Sprintf("live-%d", i)
		_, _, err := p.CreateContainer(context.Background(), pod, ctr)
		require.NoError(b, err)
	}
	// Parsed once: parsing YAML between the calls would make garbage that
	// the calls pay for in collections.
	type template struct {
		pod       *api.PodSandbox
		ctr       *api.Container
		exclusive bool
	}
	var templates []template
	for _, f := range files {
		pod, ctr := nriPod(b, f[0], f[1])
		pod.Annotations = annotations
		templates = append(templates, template{pod, ctr, f[0] != "burstable.yaml"})
	}
	var took, exclusive, shared []time.Duration
	updates := 0
	i := 0
	for b.Loop() {
		// The plugin keeps nothing of the request's objects: a new id
		// makes the template a new container.
		tpl := templates[i%len(templates)]
		pod, ctr := tpl.pod, tpl.ctr
		ctr.Id = fmt.Sprintf("bench-%d", i)
		i++
		start := time.Now()
		_, u, err := p.CreateContainer(context.Background(), pod, ctr)
		d := time.Since(start)
		took = append(took, d)
		if tpl.exclusive {
			exclusive = append(exclusive, d)
		} else {
			shared = append(shared, d)
		}
		require.NoError(b, err)
		updates += len(u)
		_, err = p.StopContainer(context.Background(), pod, &api.Container{Id: ctr.Id})
		require.NoError(b, err)
	}
	harness.ReportPercentiles(b, "", took)
	if len(exclusive) > 0 {
		harness.ReportPercentiles(b, "excl-", exclusive)
	}
	harness.ReportPercentiles(b, "shared-", shared)
	b.ReportMetric(float64(updates)/float64(len(took)), "updates/op")
}

// BenchmarkCreateContainerClasses is BenchmarkCreateContainer's alternating
// mix without live containers, without classes and with both kinds
// configured (the block I/O and RDT classes by QoS class, and by the
// suite's and the kubelet's annotations): the difference is what the class
// step costs the handler.
func BenchmarkCreateContainerClasses(b *testing.B) {
	const config = classesConfig + `
rdt:
  config:
    partitions:
      all:
        classes: {gold: {}, bronze: {}}
  qos:
    Guaranteed: gold
    Burstable: bronze
`
	annotated := map[string]string{
		"blockio.nri-suite.io/container.web":                 "fast",
		"blockio.resources.beta.kubernetes.io/container.app": "throttled",
		"rdt.nri-suite.io/pod":                               "gold",
	}
	files := [][2]string{{"guaranteed-2cpu.yaml", "app"}, {"burstable.yaml", "web"}}
	for _, tc := range []struct {
		name, config string
		annotations  map[string]string
	}{{"none", "", nil}, {"by-qos", config, nil}, {"annotated", config, annotated}} {
		b.Run("classes="+tc.name, func(b *testing.B) {
			p := newTestPlugin(b, benchFixture, nil)
			require.NoError(b, p.Configure([]byte(tc.config), "bench.yaml"))
			benchmarkCreateContainer(b, p, 0, files, tc.annotations)
		})
	}
}

// BenchmarkSynchronize measures the Synchronize handler with the running
// containers of each node (the checkpoint is written behind it, untimed):
//
//   - plugin-restart: a new plugin process restores from the checkpoint
//     and the records the previous one left;
//   - runtime-restart: the same plugin synchronizes again (its live state).
func BenchmarkSynchronize(b *testing.B) {
	for _, n := range nodes {
		b.Run(n.String(), func(b *testing.B) { benchmarkSynchronize(b, n) })
	}
}

func benchmarkSynchronize(b *testing.B, n node) {
	b.Run("plugin-restart", func(b *testing.B) {
		first := newTestPlugin(b, n.fixture, nil)
		v := populate(b, first.Plugin, n)
		require.NoError(b, first.Close())
		pods, ctrs := v.list()
		var m syncTimes
		for b.Loop() {
			b.StopTimer()
			p := newTestPluginIn(b, n.fixture, nil, first.opts.StateDir, first.shared)
			b.StartTimer()
			m.synchronize(b, p.Plugin, pods, ctrs)
			b.StopTimer()
			require.NoError(b, p.Close())
			b.StartTimer()
		}
		m.report(b)
	})
	b.Run("runtime-restart", func(b *testing.B) {
		p := newTestPlugin(b, n.fixture, nil)
		v := populate(b, p.Plugin, n)
		pods, ctrs := v.list()
		var m syncTimes
		for b.Loop() {
			m.synchronize(b, p.Plugin, pods, ctrs)
			// The write behind it is not the next call's.
			b.StopTimer()
			require.NoError(b, p.persist.Flush())
			b.StartTimer()
		}
		m.report(b)
	})
}

// syncTimes are the wall and the process CPU times of Synchronize calls.
// The CPU time counts the garbage collector's work too, and no other
// process's: on a machine shared with other jobs it is the steadier figure.
type syncTimes struct {
	wall, cpu []time.Duration
}

// synchronize calls p's Synchronize with the running containers, times
// it, and checks that it moved nothing.
func (m *syncTimes) synchronize(b *testing.B, p *Plugin, pods []*api.PodSandbox, ctrs []*api.Container) {
	start, startCPU := time.Now(), processCPU(b)
	updates, err := p.Synchronize(context.Background(), pods, ctrs)
	m.wall, m.cpu = append(m.wall, time.Since(start)), append(m.cpu, processCPU(b)-startCPU)
	require.NoError(b, err)
	require.Empty(b, updates, "a restart moves nothing")
}

func (m *syncTimes) report(b *testing.B) {
	harness.ReportPercentiles(b, "", m.wall)
	slices.Sort(m.cpu)
	b.ReportMetric(float64(harness.Percentile(m.cpu, 50).Microseconds())/1000, "cpu-p50-ms")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteState measures the writer behind the handlers with 500
// live containers on the 256-CPU fixture, after an exclusive grant (which
// changes the shared pool of every shared container): taking the state
// under the plugin's lock (collect-p50-µs), and writing the checkpoint and
// the records (p50-µs, p99-µs, with the collection). It reports the records
// written per grant.
func BenchmarkWriteState(b *testing.B) {
	p := newTestPlugin(b, benchFixture, nil)
	populate(b, p.Plugin, nodes[0])
	require.NoError(b, p.persist.Flush())
	var collect, write []time.Duration
	written := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		pod, ctr := livePod(b, "guaranteed-2cpu.yaml", "app", 1000+i)
		_, _, err := p.CreateContainer(context.Background(), pod, ctr)
		require.NoError(b, err)
		pools, placements := maps.Clone(p.persist.pools.published), maps.Clone(p.persist.placements.published)
		b.StartTimer()
		start := time.Now()
		_, ok := p.collect()
		collect = append(collect, time.Since(start))
		err = p.persist.Flush()
		write = append(write, time.Since(start))
		b.StopTimer()
		require.True(b, ok)
		require.NoError(b, err)
		written += changedRecords(p.persist.pools, pools) + changedRecords(p.persist.placements, placements)
		_, err = p.StopContainer(context.Background(), pod, ctr)
		require.NoError(b, err)
		require.NoError(b, p.RemoveContainer(context.Background(), pod, ctr))
		require.NoError(b, p.persist.Flush())
		b.StartTimer()
	}
	slices.Sort(collect)
	b.ReportMetric(float64(collect[len(collect)/2].Microseconds()), "collect-p50-µs")
	harness.ReportPercentiles(b, "", write)
	b.ReportMetric(float64(written)/float64(len(write)), "records-written/op")
}

// changedRecords counts the records set publishes now that before lacks or
// differs in.
func changedRecords[T any](set *recordSet[T], before map[string]T) int {
	n := 0
	for key, rec := range set.published {
		if old, ok := before[key]; !ok || !set.equal(old, rec) {
			n++
		}
	}
	return n
}

// BenchmarkSynchronizeRequest measures what the runtime's Synchronize
// request of each node weighs in the plugin's process before the handler
// runs: its size on the wire (request-MB, all pages) and the heap its
// decoded objects hold (decoded-MiB), which the NRI stub keeps until the
// handler returns. The plugin's code cannot free it: it bounds the peak
// memory of a Synchronize from below.
func BenchmarkSynchronizeRequest(b *testing.B) {
	for _, n := range nodes {
		b.Run(n.String(), func(b *testing.B) {
			p := newTestPlugin(b, n.fixture, nil)
			pods, ctrs := populate(b, p.Plugin, n).list()
			wire, err := (&api.SynchronizeRequest{Pods: pods, Containers: ctrs}).MarshalVT()
			require.NoError(b, err)
			var decoded uint64
			for b.Loop() {
				before := heapInUse()
				req := &api.SynchronizeRequest{}
				require.NoError(b, req.UnmarshalVT(wire))
				decoded = heapInUse() - before
				require.Len(b, req.Containers, len(ctrs))
			}
			b.ReportMetric(float64(len(wire))/1e6, "request-MB")
			b.ReportMetric(float64(decoded)/(1<<20), "decoded-MiB")
		})
	}
}

// heapInUse is the heap's live bytes after a full collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
