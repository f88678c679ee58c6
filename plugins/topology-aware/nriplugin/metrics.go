package nriplugin

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// Allocation operations, the values of the operation label.
const (
	opAllocate = "allocate"
	opResize   = "resize"
	opRelease  = "release"
	opRestore  = "restore"
)

// rejectionReasons maps the policy's error classes to reason labels; other
// errors count as "other".
var rejectionReasons = []struct {
	err    error
	reason string
}{
	{policy.ErrInsufficientCPUs, "insufficient-cpus"},
	{policy.ErrInsufficientMemory, "insufficient-memory"},
	{policy.ErrTopologyAffinity, "topology-affinity"},
	{policy.ErrInvalidRequest, "invalid-request"},
	{policy.ErrUnknownContainer, "unknown-container"},
}

// rejectionReason labels why a request was refused.
func rejectionReason(err error) string {
	var reqErr *requestError
	if errors.As(err, &reqErr) {
		return reqErr.reason
	}
	for _, r := range rejectionReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "other"
}

// metrics are the plugin's own metrics. The per-node and per-pool figures
// are read from the policy when Prometheus scrapes (see usageCollector), so
// that a request pays nothing for them.
type metrics struct {
	grants          *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	checkpointSaves *prometheus.CounterVec
	checkpointTime  prometheus.Histogram
	reapplied       *prometheus.CounterVec
}

// latencyBuckets resolve the range below NRI's 2 s timeout, finely below 1 ms.
var latencyBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 2}

func newMetrics(namespace string) *metrics {
	return &metrics{
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "grants_total",
			Help: "Containers placed (created or resized), by pool.",
		}, []string{"pool"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rejections_total",
			Help: "Containers refused (creation or resize failed), by reason.",
		}, []string{"reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "allocation_duration_seconds",
			Help:    "Time the policy took per operation (allocate, resize, release, restore), without I/O.",
			Buckets: latencyBuckets,
		}, []string{"operation"}),
		checkpointSaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "checkpoint_saves_total",
			Help: "Checkpoint writes, by outcome (ok, error).",
		}, []string{"outcome"}),
		checkpointTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "checkpoint_save_duration_seconds",
			Help:    "Time a checkpoint write took (encode, write, fsync, rename), behind the NRI handlers.",
			Buckets: latencyBuckets,
		}),
		reapplied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "reapplied_updates_total",
			Help: "Placements pushed again to containers after their start (an update before the start may be lost, or the runtime shows them elsewhere), by outcome (applied, failed, error).",
		}, []string{"outcome"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer, usage *usageCollector, more ...prometheus.Collector) error {
	return plugin.RegisterMetrics(reg, append([]prometheus.Collector{m.grants, m.rejections, m.latency, m.checkpointSaves, m.checkpointTime, m.reapplied, usage}, more...)...)
}

func (m *metrics) observe(op string, start time.Time) {
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (m *metrics) checkpointWrite(took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.checkpointSaves.WithLabelValues(outcome).Inc()
	m.checkpointTime.Observe(took.Seconds())
}

// usageCollector reports the policy's usage at scrape time.
type usageCollector struct {
	// read returns the usage and placements under the plugin's lock; ok is
	// false before the first Synchronize.
	read func() (usage []policy.NodeUsage, placements []policy.Placement, ok bool)

	capacityCPUs, grantedCPUs, freeCPUs, nodeContainers *prometheus.Desc
	memCapacity, memGranted, memFree                    *prometheus.Desc
	containers, unplaced                                *prometheus.Desc
}

func newUsageCollector(namespace string, read func() ([]policy.NodeUsage, []policy.Placement, bool)) *usageCollector {
	nodePool := []string{"node", "pool"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &usageCollector{
		read:           read,
		capacityCPUs:   desc("pool_capacity_cpus", "CPUs of the pool on the NUMA node (exclusive, isolated: grantable CPUs).", nodePool),
		grantedCPUs:    desc("pool_granted_cpus", "CPUs granted on the NUMA node: exclusive grants, or shared containers' requests spread over the pool's nodes.", nodePool),
		freeCPUs:       desc("pool_free_cpus", "CPUs of the pool on the NUMA node not granted exclusively.", nodePool),
		nodeContainers: desc("pool_node_containers", "Containers of the pool with CPUs or memory on the NUMA node.", nodePool),
		memCapacity:    desc("memory_capacity_bytes", "Memory the Memory Manager accounts on the NUMA node (total minus reserved).", []string{"node"}),
		memGranted:     desc("memory_granted_bytes", "Memory granted to Guaranteed containers on the NUMA node.", []string{"node"}),
		memFree:        desc("memory_free_bytes", "Memory not granted on the NUMA node.", []string{"node"}),
		containers:     desc("containers", "Containers placed, by pool.", []string{"pool"}),
		unplaced:       desc("unplaced_containers", "Containers that could not be placed as they ask after a restart, confined to the shared pool.", nil),
	}
}

// Describe implements prometheus.Collector.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.capacityCPUs, c.grantedCPUs, c.freeCPUs, c.nodeContainers,
		c.memCapacity, c.memGranted, c.memFree, c.containers, c.unplaced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	usage, placements, ok := c.read()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	memoryDone := map[int]bool{}
	for _, u := range usage {
		node, pool := strconv.Itoa(u.Node), string(u.Pool)
		gauge(c.capacityCPUs, float64(u.CapacityCPUs), node, pool)
		gauge(c.grantedCPUs, float64(u.GrantedMilliCPU)/1000, node, pool)
		gauge(c.freeCPUs, float64(u.FreeCPUs), node, pool)
		gauge(c.nodeContainers, float64(u.Containers), node, pool)
		// Memory is accounted per node, on the exclusive pool's row.
		if u.MemoryCapacity > 0 && !memoryDone[u.Node] {
			memoryDone[u.Node] = true
			gauge(c.memCapacity, float64(u.MemoryCapacity), node)
			gauge(c.memGranted, float64(u.MemoryGranted), node)
			gauge(c.memFree, float64(u.MemoryFree), node)
		}
	}
	perPool := map[policy.PoolKind]int{
		policy.PoolShared: 0, policy.PoolReserved: 0, policy.PoolExclusive: 0, policy.PoolIsolated: 0, policy.PoolPodShared: 0,
	}
	unplaced := 0
	for _, pl := range placements {
		perPool[pl.Pool]++
		if pl.Unplaced {
			unplaced++
		}
	}
	for pool, n := range perPool {
		gauge(c.containers, float64(n), string(pool))
	}
	gauge(c.unplaced, float64(unplaced))
}
