package collect

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// cAdvisor's base labels, as the kubelet's /metrics/cadvisor sets them.
var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

// series is one metric of a cgroup sample: its value, and whether the
// sample has it. Consecutive series of one name are one family, told apart
// by their labels.
type series struct {
	name, help string
	kind       prometheus.ValueType
	// labels are the series' labels besides cAdvisor's base labels, as
	// name, value pairs in name order: cpu="total" on the CPU usage (no
	// per-CPU stats, as the kubelet runs it), failure_type and scope on
	// the memory failures.
	labels []string
	value  func(s *cgstats.Sample) (float64, bool)
}

// labelPart is every other element of s.labels from i: the names (0) or
// the values (1).
func (s *series) labelPart(i int) []string {
	var out []string
	for ; i < len(s.labels); i += 2 {
		out = append(out, s.labels[i])
	}
	return out
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }

func usecSeconds(us uint64) float64 { return float64(us) / 1e6 }

func cpuValue(f func(c *cgstats.CPU) float64) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		if s.CPU == nil {
			return 0, false
		}
		return f(s.CPU), true
	}
}

// cfsValue is reported only for a cgroup with a quota, as cAdvisor does.
func cfsValue(f func(c *cgstats.CPU) float64) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		if s.CPU == nil || s.Spec.CPUQuota == 0 {
			return 0, false
		}
		return f(s.CPU), true
	}
}

func memValue(f func(m *cgstats.Memory) uint64) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		if s.Memory == nil {
			return 0, false
		}
		return float64(f(s.Memory)), true
	}
}

// memoryFailures are cAdvisor's four series of container_memory_failures_total:
// its container and hierarchy scopes both hold memory.stat's value.
func memoryFailures() []series {
	var out []series
	for _, f := range []struct {
		kind  string
		value func(m *cgstats.Memory) uint64
	}{{"pgfault", func(m *cgstats.Memory) uint64 { return m.Pgfault }}, {"pgmajfault", func(m *cgstats.Memory) uint64 { return m.Pgmajfault }}} {
		for _, scope := range []string{"container", "hierarchy"} {
			out = append(out, series{name: "container_memory_failures_total", help: "Cumulative count of memory allocation failures.",
				kind: prometheus.CounterValue, labels: []string{"failure_type", f.kind, "scope", scope}, value: memValue(f.value)})
		}
	}
	return out
}

func pidsValue(f func(p *cgstats.Pids) uint64) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		if s.Pids == nil {
			return 0, false
		}
		return float64(f(s.Pids)), true
	}
}

// fdsValue is reported only where the processes' open files were counted.
func fdsValue(f func(p *cgstats.Pids) uint64) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		if s.Pids == nil || !s.Pids.FDsRead {
			return 0, false
		}
		return float64(f(s.Pids)), true
	}
}

func psiValue(resource func(p *cgstats.Pressure) *cgstats.PSI, full bool) func(*cgstats.Sample) (float64, bool) {
	return func(s *cgstats.Sample) (float64, bool) {
		p := resource(&s.Pressure)
		if p == nil {
			return 0, false
		}
		if full {
			return usecSeconds(p.FullUsec), true
		}
		return usecSeconds(p.SomeUsec), true
	}
}

func psiCPU(p *cgstats.Pressure) *cgstats.PSI    { return p.CPU }
func psiMemory(p *cgstats.Pressure) *cgstats.PSI { return p.Memory }
func psiIO(p *cgstats.Pressure) *cgstats.PSI     { return p.IO }

// cadvisorSeries are the metrics served under cAdvisor's names, help
// strings and types (google/cadvisor metrics/prometheus.go).
var cadvisorSeries = append([]series{
	{name: "container_cpu_user_seconds_total", help: "Cumulative user cpu time consumed in seconds.", kind: prometheus.CounterValue,
		value: cpuValue(func(c *cgstats.CPU) float64 { return seconds(c.UserNs) })},
	{name: "container_cpu_system_seconds_total", help: "Cumulative system cpu time consumed in seconds.", kind: prometheus.CounterValue,
		value: cpuValue(func(c *cgstats.CPU) float64 { return seconds(c.SystemNs) })},
	{name: "container_cpu_usage_seconds_total", help: "Cumulative cpu time consumed in seconds.", kind: prometheus.CounterValue, labels: []string{"cpu", "total"},
		value: cpuValue(func(c *cgstats.CPU) float64 { return seconds(c.UsageNs) })},
	{name: "container_cpu_cfs_periods_total", help: "Number of elapsed enforcement period intervals.", kind: prometheus.CounterValue,
		value: cfsValue(func(c *cgstats.CPU) float64 { return float64(c.Periods) })},
	{name: "container_cpu_cfs_throttled_periods_total", help: "Number of throttled period intervals.", kind: prometheus.CounterValue,
		value: cfsValue(func(c *cgstats.CPU) float64 { return float64(c.ThrottledPeriods) })},
	{name: "container_cpu_cfs_throttled_seconds_total", help: "Total time duration the container has been throttled.", kind: prometheus.CounterValue,
		value: cfsValue(func(c *cgstats.CPU) float64 { return seconds(c.ThrottledNs) })},
	{name: "container_cpu_cfs_burst_periods_total", help: "Number of periods when burst occurs.", kind: prometheus.CounterValue,
		value: cfsValue(func(c *cgstats.CPU) float64 { return float64(c.BurstPeriods) })},
	{name: "container_cpu_cfs_burst_seconds_total", help: "Total time duration the container has been bursted.", kind: prometheus.CounterValue,
		value: cfsValue(func(c *cgstats.CPU) float64 { return seconds(c.BurstNs) })},
	{name: "container_memory_cache", help: "Number of bytes of page cache memory.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Cache })},
	{name: "container_memory_rss", help: "Size of RSS in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.RSS })},
	{name: "container_memory_mapped_file", help: "Size of memory mapped files in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.MappedFile })},
	{name: "container_memory_swap", help: "Container swap usage in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Swap })},
	{name: "container_memory_failcnt", help: "Number of memory usage hits limits", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Failcnt })},
	{name: "container_memory_usage_bytes", help: "Current memory usage in bytes, including all memory regardless of when it was accessed", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Usage })},
	{name: "container_memory_max_usage_bytes", help: "Maximum memory usage recorded in bytes", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.MaxUsage })},
	{name: "container_memory_working_set_bytes", help: "Current working set in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.WorkingSet })},
	{name: "container_memory_kernel_usage", help: "Size of kernel memory allocated in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.KernelUsage })},
	{name: "container_memory_total_active_file_bytes", help: "Current total active file in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.ActiveFile })},
	{name: "container_memory_total_inactive_file_bytes", help: "Current total inactive file in bytes.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.InactiveFile })},
	{name: "container_memory_events_high_total", help: "Cumulative count of memory.high throttle events for the container", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.EventsHigh })},
	{name: "container_memory_events_max_total", help: "Cumulative count of memory.max limit hit events for the container", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.EventsMax })},
	{name: "container_memory_file_dirty_bytes", help: "Number of bytes of file cache that has been modified but not yet written back to disk.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.FileDirty })},
	{name: "container_memory_file_writeback_bytes", help: "Number of bytes of file cache that is currently being written back to disk.", kind: prometheus.GaugeValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.FileWriteback })},
	{name: "container_memory_pgscan_total", help: "Cumulative number of pages scanned by the page reclaim algorithm.", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Pgscan })},
	{name: "container_memory_pgsteal_total", help: "Cumulative number of pages reclaimed by the page reclaim algorithm.", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Pgsteal })},
	{name: "container_memory_workingset_refault_anon_total", help: "Cumulative number of refaults of previously evicted anonymous pages.", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Refaults.Anon })},
	{name: "container_memory_workingset_refault_file_total", help: "Cumulative number of refaults of previously evicted file pages.", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.Refaults.File })},
	{name: "container_oom_events_total", help: "Count of out of memory events observed for the container", kind: prometheus.CounterValue,
		value: memValue(func(m *cgstats.Memory) uint64 { return m.OOMKills })},
	// cAdvisor's is -1 for a container without a (Docker) health check:
	// every one the kubelet's runtimes run.
	{name: "container_health_state", help: "The result of the container's health check", kind: prometheus.GaugeValue,
		value: func(*cgstats.Sample) (float64, bool) { return -1, true }},
	{name: "container_ulimits_soft", help: "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice",
		kind: prometheus.GaugeValue, labels: []string{"ulimit", "max_open_files"},
		value: func(s *cgstats.Sample) (float64, bool) {
			if s.MaxOpenFiles == nil {
				return 0, false
			}
			return float64(*s.MaxOpenFiles), true
		}},
	{name: "container_processes", help: "Number of processes running inside the container.", kind: prometheus.GaugeValue,
		value: pidsValue(func(p *cgstats.Pids) uint64 { return p.Processes })},
	{name: "container_file_descriptors", help: "Number of open file descriptors for the container.", kind: prometheus.GaugeValue,
		value: fdsValue(func(p *cgstats.Pids) uint64 { return p.FDs })},
	{name: "container_sockets", help: "Number of open sockets for the container.", kind: prometheus.GaugeValue,
		value: fdsValue(func(p *cgstats.Pids) uint64 { return p.Sockets })},
	{name: "container_threads", help: "Number of threads running inside the container", kind: prometheus.GaugeValue,
		value: pidsValue(func(p *cgstats.Pids) uint64 { return p.Threads })},
	{name: "container_threads_max", help: "Maximum number of threads allowed inside the container, infinity if value is zero", kind: prometheus.GaugeValue,
		value: pidsValue(func(p *cgstats.Pids) uint64 { return p.ThreadsMax })},
	{name: "container_pressure_cpu_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to CPU congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiCPU, true)},
	{name: "container_pressure_cpu_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to CPU congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiCPU, false)},
	{name: "container_pressure_memory_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to memory congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiMemory, true)},
	{name: "container_pressure_memory_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to memory congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiMemory, false)},
	{name: "container_pressure_io_stalled_seconds_total", help: "Total time duration no tasks in the container could make progress due to IO congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiIO, true)},
	{name: "container_pressure_io_waiting_seconds_total", help: "Total time duration tasks in the container have waited due to IO congestion.", kind: prometheus.CounterValue,
		value: psiValue(psiIO, false)},
	{name: "container_spec_cpu_period", help: "CPU period of the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) { return float64(s.Spec.CPUPeriod), s.Spec.HasCPU }},
	{name: "container_spec_cpu_quota", help: "CPU quota of the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) {
			return float64(s.Spec.CPUQuota), s.Spec.HasCPU && s.Spec.CPUQuota != 0
		}},
	{name: "container_spec_cpu_shares", help: "CPU share of the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) { return float64(s.Spec.CPUShares), s.Spec.HasCPU }},
	{name: "container_spec_memory_limit_bytes", help: "Memory limit for the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) { return float64(s.Spec.MemoryLimit), s.Spec.HasMemory }},
	{name: "container_spec_memory_swap_limit_bytes", help: "Memory swap limit for the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) { return float64(s.Spec.MemorySwapLimit), s.Spec.HasMemory }},
	{name: "container_spec_memory_reservation_limit_bytes", help: "Memory reservation limit for the container.", kind: prometheus.GaugeValue,
		value: func(s *cgstats.Sample) (float64, bool) { return float64(s.Spec.MemoryReservation), s.Spec.HasMemory }},
}, memoryFailures()...)

const (
	// cAdvisor's container_start_time_seconds and
	// container_creation_time_seconds are in whole seconds: a container's
	// start and the runtime's creation time (its containerd and CRI-O
	// handlers'), a raw cgroup's (the root's, a pod's) both the time of
	// its directories (cgstats.Reader.Created).
	startTimeName    = "container_start_time_seconds"
	startTimeHelp    = "Start time of the container since unix epoch in seconds."
	creationTimeName = "container_creation_time_seconds"
	creationTimeHelp = "Container creation time since unix epoch in seconds."
	// cAdvisor's container_last_seen is the time of its scrape; here, of
	// the reading the scrape serves (in whole seconds, as cAdvisor's).
	lastSeenName = "container_last_seen"
	lastSeenHelp = "Last time a container was seen by the exporter"
)

// cAdvisor's container_scrape_error is 1 when it could not list its
// containers (and it then serves none); here, when the root cgroup, the
// node's stats, could not be read, as resource_scrape_error.
const (
	scrapeErrorName = "container_scrape_error"
	scrapeErrorHelp = "1 if there was an error while getting container metrics, 0 otherwise"
)

var (
	startTimeDesc    = prometheus.NewDesc(startTimeName, startTimeHelp, cadvisorLabels, nil)
	creationTimeDesc = prometheus.NewDesc(creationTimeName, creationTimeHelp, cadvisorLabels, nil)
	lastSeenDesc     = prometheus.NewDesc(lastSeenName, lastSeenHelp, cadvisorLabels, nil)
	scrapeErrorDesc  = prometheus.NewDesc(scrapeErrorName, scrapeErrorHelp, nil, nil)
)

func scrapeError(snap *Snapshot) float64 {
	if snap.Node == nil {
		return 1
	}
	return 0
}

// CAdvisor serves the snapshot under cAdvisor's names: the node's root
// cgroup (id "/"), every pod cgroup and every running container, and the
// network of the node and of every pod's sandbox.
type CAdvisor struct {
	c     *Collector
	descs []*prometheus.Desc
	// host are the machine families and cadvisor_version_info, fixed;
	// hostText the same in the text format.
	host     []prometheus.Metric
	hostText []byte
}

// NewCAdvisor returns the cAdvisor-named metrics of c's snapshots.
func NewCAdvisor(c *Collector) *CAdvisor {
	m := &CAdvisor{c: c}
	m.host, m.hostText = hostMetrics(c.opts.Machine, c.opts.Version)
	for i, s := range cadvisorSeries {
		if i > 0 && cadvisorSeries[i-1].name == s.name {
			m.descs = append(m.descs, m.descs[i-1]) // one family
			continue
		}
		labels := append(append([]string{}, cadvisorLabels...), s.labelPart(0)...)
		m.descs = append(m.descs, prometheus.NewDesc(s.name, s.help, labels, nil))
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *CAdvisor) Describe(ch chan<- *prometheus.Desc) {
	for i, d := range m.descs {
		if i == 0 || d != m.descs[i-1] {
			ch <- d
		}
	}
	ch <- startTimeDesc
	ch <- creationTimeDesc
	ch <- lastSeenDesc
	ch <- scrapeErrorDesc
	described := map[string]bool{}
	for _, h := range m.host {
		if d := h.Desc(); !described[d.String()] {
			described[d.String()] = true
			ch <- d
		}
	}
	for _, f := range deviceFamilies {
		ch <- f.desc
	}
	for _, f := range resctrlFamilies {
		ch <- f.desc
	}
	for _, f := range networkFamilies {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector: the series WriteText writes, by
// way of a registry, which the tests hold WriteText's output against.
func (m *CAdvisor) Collect(ch chan<- prometheus.Metric) {
	snap := m.c.Snapshot()
	// Label values in cadvisorLabels order: container, id, image, name, namespace, pod.
	root := []string{"", "/", "", "", "", ""}
	if n := snap.Node; n != nil {
		m.emit(ch, snap.Time, n, root)
		collectTimes(ch, n.Created, n.Created, root)
	}
	collectDevices(ch, snap.Time, nil, snap.Filesystems, root)
	for _, p := range snap.Pods {
		if p.Sample != nil {
			labels := []string{"", p.Cgroup, "", "", p.Namespace, p.Name}
			m.emit(ch, snap.Time, p.Sample, labels)
			collectTimes(ch, p.Sample.Created, p.Sample.Created, labels)
		}
		for _, c := range p.Containers {
			if c.Sample == nil {
				continue
			}
			labels := []string{c.Name, c.Cgroup, c.Image, c.ID, p.Namespace, p.Name}
			m.emit(ch, snap.Time, c.Sample, labels)
			collectTimes(ch, c.Started, c.Created, labels)
			collectResctrl(ch, snap.Time, c.Resctrl, labels)
		}
	}
	collectNetwork(ch, snap)
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, scrapeError(snap))
	for _, h := range m.host {
		ch <- h
	}
}

// collectTimes sends a cgroup's start and creation times, those known.
func collectTimes(ch chan<- prometheus.Metric, started, created time.Time, labels []string) {
	if v := wholeSeconds(started); v != 0 {
		ch <- prometheus.MustNewConstMetric(startTimeDesc, prometheus.GaugeValue, v, labels...)
	}
	if v := wholeSeconds(created); v != 0 {
		ch <- prometheus.MustNewConstMetric(creationTimeDesc, prometheus.GaugeValue, v, labels...)
	}
}

// wholeSeconds is t in cAdvisor's whole seconds since the epoch; 0 for
// the zero time (unknown).
func wholeSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}

func (m *CAdvisor) emit(ch chan<- prometheus.Metric, at time.Time, s *cgstats.Sample, labels []string) {
	if s == nil {
		return
	}
	for i, def := range cadvisorSeries {
		v, ok := def.value(s)
		if !ok {
			continue
		}
		values := labels
		if def.labels != nil {
			values = append(append(make([]string, 0, len(labels)+len(def.labels)/2), labels...), def.labelPart(1)...)
		}
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(m.descs[i], def.kind, v, values...))
	}
	ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(lastSeenDesc, prometheus.GaugeValue, float64(at.Unix()), labels...))
	collectDevices(ch, at, s.BlkIO, nil, labels)
}
