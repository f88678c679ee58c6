package collect

import (
	"bufio"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/resctrl"
)

// resctrlFamily is one of cAdvisor's resctrl metrics: a gauge per container
// and cache (node_id label), where the container has a monitoring group.
type resctrlFamily struct {
	name, help string
	desc       *prometheus.Desc
	value      func(resctrl.Domain) (uint64, bool)
}

// resctrlFamilies are cAdvisor's names, help strings and types
// (google/cadvisor metrics/prometheus.go), in name order.
var resctrlFamilies = func() []resctrlFamily {
	labels := append(append([]string{}, cadvisorLabels...), "node_id")
	fams := []resctrlFamily{
		{name: "container_llc_occupancy_bytes", help: "Last level cache usage statistics for container counted with RDT Memory Bandwidth Monitoring (MBM).",
			value: func(d resctrl.Domain) (uint64, bool) { return d.LLCOccupancy, d.HasLLCOccupancy }},
		{name: "container_memory_bandwidth_bytes", help: "Total memory bandwidth usage statistics for container counted with RDT Memory Bandwidth Monitoring (MBM).",
			value: func(d resctrl.Domain) (uint64, bool) { return d.MemoryBandwidth, d.HasMemoryBandwidth }},
	}
	for i := range fams {
		fams[i].desc = prometheus.NewDesc(fams[i].name, fams[i].help, labels, nil)
	}
	return fams
}()

// readResctrl reads the monitoring group of every container that has one.
func (c *Collector) readResctrl(s *Snapshot) {
	groups, err := c.opts.Resctrl.Groups()
	if err != nil {
		c.errors.WithLabelValues(ReasonResctrl).Inc()
		c.log.WithError(err).Debug("listing the resctrl monitoring groups failed")
		return
	}
	for i := range s.Pods {
		for j := range s.Pods[i].Containers {
			cs := &s.Pods[i].Containers[j]
			dir, ok := groups[cs.ID]
			if !ok {
				continue
			}
			if cs.Resctrl, err = c.opts.Resctrl.Read(dir); err != nil {
				c.errors.WithLabelValues(ReasonResctrl).Inc()
				c.log.WithError(err).Debug("reading part of a resctrl monitoring group failed")
			}
		}
	}
}

// collectResctrl sends a container's resctrl series; labels are its
// cAdvisor labels.
func collectResctrl(ch chan<- prometheus.Metric, at time.Time, domains []resctrl.Domain, labels []string) {
	for _, f := range resctrlFamilies {
		for _, d := range domains {
			if v, ok := f.value(d); ok {
				values := append(append(make([]string, 0, len(labels)+1), labels...), strconv.Itoa(d.ID))
				ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(v), values...))
			}
		}
	}
}

// writeResctrlText writes the resctrl families as WriteText writes the
// others: labels in name order, the reading's timestamp. A family without
// a series is left out, as a registry leaves it out: on a node without
// resctrl monitoring, all of them.
func writeResctrlText(bw *bufio.Writer, snap *Snapshot, stamp string) {
	for _, f := range resctrlFamilies {
		header := "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " gauge\n"
		for _, p := range snap.Pods {
			for _, c := range p.Containers {
				for _, d := range c.Resctrl {
					v, ok := f.value(d)
					if !ok {
						continue
					}
					bw.WriteString(header)
					header = ""
					bw.WriteString(f.name + `{container="` + escape(c.Name) + `",id="` + escape(c.Cgroup) + `",image="` + escape(c.Image) +
						`",name="` + escape(c.ID) + `",namespace="` + escape(p.Namespace) + `",node_id="` + strconv.Itoa(d.ID) +
						`",pod="` + escape(p.Name) + `"} ` + strconv.FormatUint(v, 10) + stamp)
				}
			}
		}
	}
}
