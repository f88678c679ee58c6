package collect

import (
	"cmp"

	"github.com/prometheus/client_golang/prometheus"
)

// The kubelet's /metrics/resource (pkg/kubelet/metrics/collectors), which
// metrics-server reads; the kubelet marks them [STABLE] in their help (Kubernetes 1.37).
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	// The swap series are ALPHA: the kubelet prefixes their help so.
	nodeSwapDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerSwapDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	// Only for a container with a finite swap limit (the kubelet's NoSwap
	// sets v2's memory.swap.max to 0), as the kubelet: the limit.
	containerSwapLimitDesc = prometheus.NewDesc("container_swap_limit_bytes",
		"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", []string{"container", "pod", "namespace"}, nil)
	podSwapDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", []string{"pod", "namespace"}, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// Resource serves the snapshot as the kubelet's resource metrics.
type Resource struct{ c *Collector }

// NewResource returns the kubelet-resource-named metrics of c's snapshots.
func NewResource(c *Collector) *Resource { return &Resource{c: c} }

// Describe implements prometheus.Collector.
func (m *Resource) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, nodeSwapDesc, containerCPUDesc, containerMemoryDesc,
		containerSwapDesc, containerSwapLimitDesc, containerStartDesc, podCPUDesc, podMemoryDesc, podSwapDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Resource) Collect(ch chan<- prometheus.Metric) {
	snap := m.c.Snapshot()
	send := func(d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(snap.Time, prometheus.MustNewConstMetric(d, kind, v, labels...))
	}
	failed := 0.0
	if n := snap.Node; n != nil && n.CPU != nil && n.Memory != nil {
		send(nodeCPUDesc, prometheus.CounterValue, seconds(n.CPU.UsageNs))
		send(nodeMemoryDesc, prometheus.GaugeValue, float64(n.Memory.WorkingSet))
		send(nodeSwapDesc, prometheus.GaugeValue, float64(n.Memory.Swap))
	} else {
		failed = 1 // as the kubelet: the node's stats are the minimum
	}
	for _, p := range snap.Pods {
		for _, c := range p.Containers {
			if s := c.Sample; s != nil {
				if s.CPU != nil {
					send(containerCPUDesc, prometheus.CounterValue, seconds(s.CPU.UsageNs), c.Name, p.Name, p.Namespace)
				}
				if s.Memory != nil {
					send(containerMemoryDesc, prometheus.GaugeValue, float64(s.Memory.WorkingSet), c.Name, p.Name, p.Namespace)
					send(containerSwapDesc, prometheus.GaugeValue, float64(s.Memory.Swap), c.Name, p.Name, p.Namespace)
					if s.Spec.HasMemory && s.Spec.MemorySwapLimited {
						send(containerSwapLimitDesc, prometheus.GaugeValue, float64(s.Spec.MemorySwapLimit), c.Name, p.Name, p.Namespace)
					}
				}
			}
			// The kubelet's is the runtime's creation time (its summary's
			// StartTime), without a timestamp.
			if started := cmp.Or(c.Created, c.Started); !started.IsZero() {
				ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue, float64(started.UnixNano())/1e9, c.Name, p.Name, p.Namespace)
			}
		}
		if s := p.Sample; s != nil {
			if s.CPU != nil {
				send(podCPUDesc, prometheus.CounterValue, seconds(s.CPU.UsageNs), p.Name, p.Namespace)
			}
			if s.Memory != nil {
				send(podMemoryDesc, prometheus.GaugeValue, float64(s.Memory.WorkingSet), p.Name, p.Namespace)
				send(podSwapDesc, prometheus.GaugeValue, float64(s.Memory.Swap), p.Name, p.Namespace)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
}
