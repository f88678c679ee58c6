package collect

import (
	"bufio"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/nodefs"
)

// deviceFamily is one of cAdvisor's families with a device label: the
// block I/O of a cgroup (a series per cgroup and block device, the device
// /dev/<name> or empty), and for the root cgroup the node's filesystems
// (a series per filesystem, the device as nodefs names it).
type deviceFamily struct {
	name, help string
	kind       prometheus.ValueType
	desc       *prometheus.Desc
	// blkio: the family has the cgroups' block I/O. ios: it counts
	// operations, else bytes. op is the one operation counted; "" (and no
	// cost): every operation, with the major, minor and operation labels
	// (container_blkio_device_usage_total).
	blkio, ios bool
	op         string
	// cost is a blk-iocost counter of the device, in microseconds, served
	// in seconds where the device has iocost; nil: the family counts op.
	cost func(c *cgstats.IOCost) uint64
	// fs is a filesystem's value, and whether it has one; nil: the family
	// has no filesystem series.
	fs func(f *nodefs.Filesystem) (float64, bool)
}

// cadvisorSeconds is cAdvisor's value of a /proc/diskstats time: it
// divides the kernel's milliseconds by a second's nanoseconds, and the
// kubelet serves that; so does the plugin, to be read alike.
func cadvisorSeconds(ms uint64) float64 { return float64(ms) / float64(time.Second) }

func diskValue(f func(d *nodefs.Filesystem) uint64) func(*nodefs.Filesystem) (float64, bool) {
	return func(fs *nodefs.Filesystem) (float64, bool) { return float64(f(fs)), true }
}

func diskSeconds(f func(d *nodefs.Filesystem) uint64) func(*nodefs.Filesystem) (float64, bool) {
	return func(fs *nodefs.Filesystem) (float64, bool) { return cadvisorSeconds(f(fs)), true }
}

func usageValue(f func(u *nodefs.Usage) uint64) func(*nodefs.Filesystem) (float64, bool) {
	return func(fs *nodefs.Filesystem) (float64, bool) {
		if fs.Usage == nil {
			return 0, false
		}
		return float64(f(fs.Usage)), true
	}
}

// deviceFamilies are cAdvisor's names, help strings and types (google/cadvisor
// metrics/prometheus.go, DiskIOMetrics and DiskUsageMetrics), in name order.
var deviceFamilies = func() []deviceFamily {
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	fams := []deviceFamily{
		{name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage", kind: counter, blkio: true},
		{name: "container_fs_inodes_free", help: "Number of available Inodes", kind: gauge,
			fs: usageValue(func(u *nodefs.Usage) uint64 { return u.InodesFree })},
		{name: "container_fs_inodes_total", help: "Number of Inodes", kind: gauge,
			fs: usageValue(func(u *nodefs.Usage) uint64 { return u.Inodes })},
		{name: "container_fs_io_cost_indebt_seconds_total", help: "Cumulative IOCost debt in seconds", kind: counter, blkio: true,
			cost: func(c *cgstats.IOCost) uint64 { return c.IndebtUsec }},
		{name: "container_fs_io_cost_indelay_seconds_total", help: "Cumulative IOCost delay in seconds", kind: counter, blkio: true,
			cost: func(c *cgstats.IOCost) uint64 { return c.IndelayUsec }},
		{name: "container_fs_io_cost_usage_seconds_total", help: "Cumulative IOCost usage in seconds", kind: counter, blkio: true,
			cost: func(c *cgstats.IOCost) uint64 { return c.UsageUsec }},
		{name: "container_fs_io_cost_wait_seconds_total", help: "Cumulative IOCost wait in seconds", kind: counter, blkio: true,
			cost: func(c *cgstats.IOCost) uint64 { return c.WaitUsec }},
		{name: "container_fs_io_current", help: "Number of I/Os currently in progress", kind: gauge,
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.IOsInProgress })},
		{name: "container_fs_io_time_seconds_total", help: "Cumulative count of seconds spent doing I/Os", kind: counter,
			fs: diskSeconds(func(f *nodefs.Filesystem) uint64 { return f.Disk.IOsTotalTicks })},
		{name: "container_fs_io_time_weighted_seconds_total", help: "Cumulative weighted I/O time in seconds", kind: counter,
			fs: diskSeconds(func(f *nodefs.Filesystem) uint64 { return f.Disk.WeightedIOTicks })},
		{name: "container_fs_limit_bytes", help: "Number of bytes that can be consumed by the container on this filesystem.", kind: gauge,
			fs: usageValue(func(u *nodefs.Usage) uint64 { return u.Capacity })},
		{name: "container_fs_read_seconds_total", help: "Cumulative count of seconds spent reading", kind: counter,
			fs: diskSeconds(func(f *nodefs.Filesystem) uint64 { return f.Disk.ReadTicks })},
		{name: "container_fs_reads_bytes_total", help: "Cumulative count of bytes read", kind: counter, blkio: true, op: "Read"},
		{name: "container_fs_reads_merged_total", help: "Cumulative count of reads merged", kind: counter,
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.ReadMerges })},
		{name: "container_fs_reads_total", help: "Cumulative count of reads completed", kind: counter, blkio: true, ios: true, op: "Read",
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.ReadIOs })},
		{name: "container_fs_sector_reads_total", help: "Cumulative count of sector reads completed", kind: counter,
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.ReadSectors })},
		{name: "container_fs_sector_writes_total", help: "Cumulative count of sector writes completed", kind: counter,
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.WriteSectors })},
		{name: "container_fs_usage_bytes", help: "Number of bytes that are consumed by the container on this filesystem.", kind: gauge,
			fs: usageValue((*nodefs.Usage).Used)},
		{name: "container_fs_write_seconds_total", help: "Cumulative count of seconds spent writing", kind: counter,
			fs: diskSeconds(func(f *nodefs.Filesystem) uint64 { return f.Disk.WriteTicks })},
		{name: "container_fs_writes_bytes_total", help: "Cumulative count of bytes written", kind: counter, blkio: true, op: "Write"},
		{name: "container_fs_writes_merged_total", help: "Cumulative count of writes merged", kind: counter,
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.WriteMerges })},
		{name: "container_fs_writes_total", help: "Cumulative count of writes completed", kind: counter, blkio: true, ios: true, op: "Write",
			fs: diskValue(func(f *nodefs.Filesystem) uint64 { return f.Disk.WriteIOs })},
	}
	for i := range fams {
		labels := append(append([]string{}, cadvisorLabels...), "device")
		if fams[i].blkio && fams[i].op == "" && fams[i].cost == nil {
			labels = append(labels, "major", "minor", "operation")
		}
		fams[i].desc = prometheus.NewDesc(fams[i].name, fams[i].help, labels, nil)
	}
	return fams
}()

// one is the family's single value of a device's block I/O, and whether
// it has one: its operation's count (0 where the kernel did not list the
// operation, as in cAdvisor) or its iocost counter; false for
// container_blkio_device_usage_total, which has a series per operation.
func (f *deviceFamily) one(d *cgstats.DeviceIO) (v float64, single, ok bool) {
	switch {
	case f.cost != nil:
		if d.Cost == nil {
			return 0, true, false
		}
		return usecSeconds(f.cost(d.Cost)), true, true
	case f.op != "":
		n, _ := cgstats.Op(f.counts(d), f.op)
		return float64(n), true, true
	}
	return 0, false, false
}

func (f *deviceFamily) counts(d *cgstats.DeviceIO) []cgstats.OpCount {
	if f.ios {
		return d.IOs
	}
	return d.Bytes
}

func (f *deviceFamily) typeName() string {
	if f.kind == prometheus.CounterValue {
		return "counter"
	}
	return "gauge"
}

// collectDevices sends a cgroup's block I/O series and, for the root, the
// node's filesystems (fss, nil for any other cgroup); labels are the
// cgroup's cAdvisor labels.
func collectDevices(ch chan<- prometheus.Metric, at time.Time, devs []cgstats.DeviceIO, fss []nodefs.Filesystem, labels []string) {
	send := func(f *deviceFamily, v float64, values ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(f.desc, f.kind, v, values...))
	}
	for i := range deviceFamilies {
		f := &deviceFamilies[i]
		for j := range devs {
			if !f.blkio {
				break
			}
			d := &devs[j]
			values := append(append(make([]string, 0, len(labels)+4), labels...), d.Device)
			if v, single, ok := f.one(d); single {
				if ok {
					send(f, v, values...)
				}
				continue
			}
			major, minor := strconv.FormatUint(d.Major, 10), strconv.FormatUint(d.Minor, 10)
			for _, c := range f.counts(d) {
				send(f, float64(c.Value), append(values, major, minor, c.Op)...)
			}
		}
		for j := range fss {
			if f.fs == nil {
				break
			}
			if v, ok := f.fs(&fss[j]); ok {
				send(f, v, append(append(make([]string, 0, len(labels)+1), labels...), fss[j].Device)...)
			}
		}
	}
}

// writeDeviceText writes the device families as WriteText writes the
// others: labels in name order, the reading's timestamp; root are the root
// cgroup's labels, which the node's filesystems fss carry. A family
// without a series is left out, as a registry leaves it out.
func writeDeviceText(bw *bufio.Writer, cgroups []cgroupLabels, root *cgroupLabels, fss []nodefs.Filesystem, stamp string) {
	num := make([]byte, 0, 32)
	for i := range deviceFamilies {
		f := &deviceFamilies[i]
		header := "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.typeName() + "\n"
		line := func(cg *cgroupLabels, device, devLabels, opLabel, value string) {
			bw.WriteString(header)
			header = ""
			bw.WriteString(f.name + "{" + cg.container + `,device="` + escape(device) + `",` + cg.idImage + "," + devLabels +
				cg.nameNamespace + "," + opLabel + cg.pod + "} " + value + stamp)
		}
		for k := range cgroups {
			if !f.blkio {
				break
			}
			cg := &cgroups[k]
			for j := range cg.sample.BlkIO {
				d := &cg.sample.BlkIO[j]
				if v, single, ok := f.one(d); single {
					if ok {
						num = strconv.AppendFloat(num[:0], v, 'g', -1, 64)
						line(cg, d.Device, "", "", string(num))
					}
					continue
				}
				devLabels := `major="` + strconv.FormatUint(d.Major, 10) + `",minor="` + strconv.FormatUint(d.Minor, 10) + `",`
				for _, c := range f.counts(d) {
					line(cg, d.Device, devLabels, `operation="`+escape(c.Op)+`",`, strconv.FormatUint(c.Value, 10))
				}
			}
		}
		for j := range fss {
			if f.fs == nil {
				break
			}
			if v, ok := f.fs(&fss[j]); ok {
				num = strconv.AppendFloat(num[:0], v, 'g', -1, 64)
				line(root, fss[j].Device, "", "", string(num))
			}
		}
	}
}
