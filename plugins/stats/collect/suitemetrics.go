package collect

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// healthValues are KEP-4680's device health values, each exported as its
// own series so that a change shows as 1 moving between them.
var healthValues = []state.Health{state.HealthHealthy, state.HealthUnhealthy, state.HealthUnknown}

// SuiteContainers serves the suite's own view of each container: where it
// runs and how its devices are. Every series names a pod and a container, so
// it is served only on the stats listener, behind its authentication.
type SuiteContainers struct {
	c                                   *Collector
	cpusetInfo, cpus, placement, health *prometheus.Desc
}

// NewSuiteContainers returns the per-container nri_suite_stats_container_*
// metrics of c's snapshots.
func NewSuiteContainers(c *Collector, namespace string) *SuiteContainers {
	ctr := []string{"namespace", "pod", "container"}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &SuiteContainers{
		c: c,
		cpusetInfo: prometheus.NewDesc(name("container_cpuset_info"),
			"The CPUs and memory (NUMA) nodes a container may use, from its cgroup's cpuset (v1 cpuset.cpus/mems, v2 cpuset.cpus.effective/mems.effective); always 1.",
			append(ctr, "cpus", "mems"), nil),
		cpus: prometheus.NewDesc(name("container_cpus"),
			"Number of CPUs in a container's cgroup cpuset.", ctr, nil),
		placement: prometheus.NewDesc(name("container_placement_info"),
			"A container's placement as topology-aware published it: pool, CPUs, memory nodes and the NUMA affinity admitted; always 1.",
			append(ctr, "pool", "cpus", "mems", "numa_nodes"), nil),
		health: prometheus.NewDesc(name("container_device_health"),
			"Health of each device a container got, as device-injector published it (KEP-4680): 1 for the current value of health (Healthy, Unhealthy, Unknown), 0 for the others.",
			append(ctr, "resource", "health"), nil),
	}
}

// Describe implements prometheus.Collector.
func (m *SuiteContainers) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.cpusetInfo, m.cpus, m.placement, m.health} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *SuiteContainers) Collect(ch chan<- prometheus.Metric) {
	snap := m.c.Snapshot()
	for _, p := range snap.Pods {
		for _, c := range p.Containers {
			ids := []string{p.Namespace, p.Name, c.Name}
			if c.Sample != nil {
				if set := c.Sample.CPUSet; set != nil {
					gauge(ch, m.cpusetInfo, 1, append(ids, set.CPUs, set.Mems)...)
					if cpus, err := cpuset.Parse(set.CPUs); err == nil {
						gauge(ch, m.cpus, float64(cpus.Size()), ids...)
					}
				}
			}
			if pl, ok := snap.Suite.Placements[c.ID]; ok {
				gauge(ch, m.placement, 1, append(ids, pl.Pool, pl.CPUs, pl.Mems, joinInts(pl.NUMANodes))...)
			}
			for _, r := range snap.Suite.Health[c.ID].Resources {
				for _, h := range healthValues {
					gauge(ch, m.health, boolValue(r.Health == h), append(ids, r.ResourceID, string(h))...)
				}
			}
		}
	}
}

// SuiteNode serves what of the suite is the node's, naming no pod or
// container: whether the other plugins are ready, and how many containers a
// reading read. These are operational series, served on the runner's
// listener too.
type SuiteNode struct {
	c                                           *Collector
	pluginReady, pluginConnected, pluginUpdated *prometheus.Desc
	containers                                  *prometheus.Desc
}

// NewSuiteNode returns the node-wide nri_suite_stats_* metrics of c's
// snapshots.
func NewSuiteNode(c *Collector, namespace string) *SuiteNode {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	plugin := []string{"plugin", "index"}
	return &SuiteNode{
		c: c,
		pluginReady: prometheus.NewDesc(name("plugin_ready"),
			"1 when an nri-suite plugin's last status record says it is registered and synchronized, 0 otherwise.", plugin, nil),
		pluginConnected: prometheus.NewDesc(name("plugin_connected"),
			"1 when an nri-suite plugin's last status record says it is registered with the runtime, 0 otherwise.", plugin, nil),
		pluginUpdated: prometheus.NewDesc(name("plugin_status_updated_timestamp_seconds"),
			"When an nri-suite plugin last published its status; an old one is left by a plugin that was killed.", plugin, nil),
		containers: prometheus.NewDesc(name("containers"),
			"Running containers whose cgroups the last collection read.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *SuiteNode) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.pluginReady, m.pluginConnected, m.pluginUpdated, m.containers} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *SuiteNode) Collect(ch chan<- prometheus.Metric) {
	snap := m.c.Snapshot()
	read := 0
	for _, p := range snap.Pods {
		for _, c := range p.Containers {
			if c.Sample != nil {
				read++
			}
		}
	}
	gauge(ch, m.containers, float64(read))
	for _, p := range snap.Suite.Plugins {
		labels := []string{p.Name, strconv.Itoa(p.Index)}
		gauge(ch, m.pluginReady, boolValue(p.Ready), labels...)
		gauge(ch, m.pluginConnected, boolValue(p.Connected), labels...)
		gauge(ch, m.pluginUpdated, float64(p.Updated.UnixNano())/1e9, labels...)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
