package collect

import (
	"bufio"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// deviceFamily is one of cAdvisor's block I/O counters: a series per
// cgroup and block device (device label, /dev/<name> or empty).
type deviceFamily struct {
	name, help string
	desc       *prometheus.Desc
	// ios: counts operations, else bytes.
	ios bool
	// op is the one operation counted; "": every operation, with the
	// major, minor and operation labels (container_blkio_device_usage_total).
	op string
}

// deviceFamilies are cAdvisor's names, help strings and types (google/cadvisor
// metrics/prometheus.go, DiskIOMetrics) of the counters the cgroup's
// block I/O files give, in name order.
var deviceFamilies = func() []deviceFamily {
	fams := []deviceFamily{
		{name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage"},
		{name: "container_fs_reads_bytes_total", help: "Cumulative count of bytes read", op: "Read"},
		{name: "container_fs_reads_total", help: "Cumulative count of reads completed", ios: true, op: "Read"},
		{name: "container_fs_writes_bytes_total", help: "Cumulative count of bytes written", op: "Write"},
		{name: "container_fs_writes_total", help: "Cumulative count of writes completed", ios: true, op: "Write"},
	}
	for i := range fams {
		labels := append(append([]string{}, cadvisorLabels...), "device")
		if fams[i].op == "" {
			labels = append(labels, "major", "minor", "operation")
		}
		fams[i].desc = prometheus.NewDesc(fams[i].name, fams[i].help, labels, nil)
	}
	return fams
}()

func (f *deviceFamily) counts(d *cgstats.DeviceIO) []cgstats.OpCount {
	if f.ios {
		return d.IOs
	}
	return d.Bytes
}

// collectDevices sends a cgroup's block I/O series; labels are its
// cAdvisor labels.
func collectDevices(ch chan<- prometheus.Metric, at time.Time, devs []cgstats.DeviceIO, labels []string) {
	for i := range deviceFamilies {
		f := &deviceFamilies[i]
		for j := range devs {
			d := &devs[j]
			values := append(append(make([]string, 0, len(labels)+4), labels...), d.Device)
			if f.op != "" {
				// As cAdvisor: an operation the kernel did not list counts 0.
				v, _ := cgstats.Op(f.counts(d), f.op)
				ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, float64(v), values...))
				continue
			}
			major, minor := strconv.FormatUint(d.Major, 10), strconv.FormatUint(d.Minor, 10)
			for _, c := range f.counts(d) {
				ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, float64(c.Value),
					append(values, major, minor, c.Op)...))
			}
		}
	}
}

// writeDeviceText writes the block I/O families as WriteText writes the
// others: labels in name order, the reading's timestamp. A family without
// a series is left out, as a registry leaves it out.
func writeDeviceText(bw *bufio.Writer, cgroups []cgroupLabels, stamp string) {
	for i := range deviceFamilies {
		f := &deviceFamilies[i]
		header := "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " counter\n"
		for k := range cgroups {
			cg := &cgroups[k]
			for j := range cg.sample.BlkIO {
				d := &cg.sample.BlkIO[j]
				bw.WriteString(header)
				header = ""
				head := f.name + "{" + cg.container + `,device="` + escape(d.Device) + `",` + cg.idImage + ","
				if f.op != "" {
					v, _ := cgstats.Op(f.counts(d), f.op)
					bw.WriteString(head + cg.nameNamespace + "," + cg.pod + "} " + strconv.FormatUint(v, 10) + stamp)
					continue
				}
				devLabels := `major="` + strconv.FormatUint(d.Major, 10) + `",minor="` + strconv.FormatUint(d.Minor, 10) + `",`
				for _, c := range f.counts(d) {
					bw.WriteString(head + devLabels + cg.nameNamespace + `,operation="` + escape(c.Op) + `",` + cg.pod + "} " +
						strconv.FormatUint(c.Value, 10) + stamp)
				}
			}
		}
	}
}
