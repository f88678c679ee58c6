package collect

import (
	"bytes"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/machine"
)

// machineLabels are cAdvisor's labels of every machine_* series.
var machineLabels = []string{"machine_id", "system_uuid", "boot_id"}

// machineGauge is a machine family of one series: cAdvisor's name, help
// and value.
type machineGauge struct {
	name, help string
	value      func(m *machine.Info) float64
}

// machineGauges are the machine families of cAdvisor's
// PrometheusMachineCollector the kubelet serves (not the per-node topology
// ones, behind CPUTopologyMetrics, which it does not enable).
var machineGauges = []machineGauge{
	{"machine_cpu_physical_cores", "Number of physical CPU cores.", func(m *machine.Info) float64 { return float64(m.PhysicalCores) }},
	{"machine_cpu_cores", "Number of logical CPU cores.", func(m *machine.Info) float64 { return float64(m.Cores) }},
	{"machine_cpu_sockets", "Number of CPU sockets.", func(m *machine.Info) float64 { return float64(m.Sockets) }},
	// cAdvisor counts books and drawers on s390x only, for which the suite
	// builds no image.
	{"machine_cpu_books", "Number of CPU books.", func(*machine.Info) float64 { return 0 }},
	{"machine_cpu_drawers", "Number of CPU drawers.", func(*machine.Info) float64 { return 0 }},
	{"machine_memory_bytes", "Amount of memory installed on the machine.", func(m *machine.Info) float64 { return float64(m.MemoryBytes) }},
	{"machine_swap_bytes", "Amount of swap memory available on the machine.", func(m *machine.Info) float64 { return float64(m.SwapBytes) }},
	// cAdvisor's machine info no longer reads NVM (its ipmctl reader is
	// gone): the kubelet serves 0.
	{"machine_nvm_avg_power_budget_watts", "NVM power budget.", func(*machine.Info) float64 { return 0 }},
}

const (
	machineScrapeErrorName = "machine_scrape_error"
	machineScrapeErrorHelp = "1 if there was an error while getting machine metrics, 0 otherwise."
)

// hostMetrics are the machine families, machine_scrape_error and
// cadvisor_version_info: read once at start, as the kubelet reads them, so
// made once, and rendered once for WriteText. They carry no timestamp, as
// the kubelet's (it clears its cached machine info's).
func hostMetrics(m *machine.Info, v *machine.Version) ([]prometheus.Metric, []byte) {
	var out []prometheus.Metric
	gauge := func(name, help string, labels []string, value float64, values ...string) {
		out = append(out, prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, value, values...))
	}
	scrapeError := 1.0
	if m != nil {
		scrapeError = 0
		ids := []string{m.MachineID, m.SystemUUID, m.BootID}
		for _, g := range machineGauges {
			gauge(g.name, g.help, machineLabels, g.value(m), ids...)
		}
		withType := append(append([]string{}, machineLabels...), "type")
		for kind, d := range m.DIMMs {
			gauge("machine_dimm_count", "Number of RAM DIMM (all types memory modules) value labeled by dimm type.", withType,
				float64(d.Count), append(ids, kind)...)
			gauge("machine_dimm_capacity_bytes", "Total RAM DIMM capacity (all types memory modules) value labeled by dimm type.", withType,
				float64(d.CapacityBytes), append(ids, kind)...)
		}
		withMode := append(append([]string{}, machineLabels...), "mode")
		for _, mode := range []string{"memory_mode", "app_direct_mode"} {
			gauge("machine_nvm_capacity", "NVM capacity value labeled by NVM mode (memory mode or app direct mode).", withMode, 0, append(ids, mode)...)
		}
	}
	gauge(machineScrapeErrorName, machineScrapeErrorHelp, nil, scrapeError)
	if v != nil {
		// nri-stats is no cAdvisor: it leaves cAdvisor's version and revision
		// empty, as the kubelet's does (a library has none), and Docker's.
		gauge("cadvisor_version_info",
			"A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.",
			[]string{"kernelVersion", "osVersion", "dockerVersion", "cadvisorVersion", "cadvisorRevision"}, 1, v.Kernel, v.OS, "", "", "")
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(constCollector(out)); err != nil {
		panic(fmt.Sprintf("collect: machine metrics: %v", err))
	}
	families, err := reg.Gather()
	if err != nil {
		panic(fmt.Sprintf("collect: machine metrics: %v", err))
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			panic(fmt.Sprintf("collect: machine metrics: %v", err))
		}
	}
	return out, text.Bytes()
}

// constCollector serves fixed metrics, unchecked (the registry checks the
// metrics themselves when it gathers them).
type constCollector []prometheus.Metric

func (constCollector) Describe(chan<- *prometheus.Desc) {}

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}
