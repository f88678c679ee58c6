package collect

import (
	"bufio"
	"errors"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/netdev"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

// netJob is a network namespace to read, by a process in it: the node's
// (pid 1), a pod sandbox's, or one in the cgroup of a container of the pod;
// the interfaces land in out.
type netJob struct {
	pid    uint32
	cgroup string // when pid is 0
	what   string // for the log: node, pod ns/name
	out    *[]netdev.Interface
}

// sandboxNetJob is the network namespace of v's pod, whose series get the
// sandbox's cgroup as id label, as cAdvisor's. A pod without a sandbox
// process (CRI-O's drop_infra_ctr, of which cAdvisor serves no network;
// CRI-O's NRI tells no container's pid) is read through a process of one
// of its running containers, which share its network namespace, and gets
// its pod's cgroup as id; ok is false when it has neither.
func (c *Collector) sandboxNetJob(p *PodStats, v inventory.PodView) (job netJob, ok bool) {
	job = netJob{pid: v.Pid, what: "pod " + p.Namespace + "/" + p.Name, out: &p.Network}
	id := v.SandboxCgroupsPath
	if job.pid == 0 {
		i := slices.IndexFunc(v.Containers, func(ctr inventory.Container) bool { return ctr.Running })
		if i < 0 {
			return netJob{}, false
		}
		id = v.CgroupParent
		job.cgroup = c.cgroupName(v.Containers[i].CgroupsPath, job.what)
	}
	p.SandboxCgroup = c.cgroupName(id, "the sandbox of the "+job.what)
	return job, job.pid != 0 || job.cgroup != ""
}

// cgroupName is the cgroup name of a runtime's cgroups path, "" (counted
// and logged) when it has none.
func (c *Collector) cgroupName(cgroupsPath, what string) string {
	name, err := cgstats.Name(cgroupsPath)
	if err != nil {
		c.errors.WithLabelValues(ReasonPath).Inc()
		c.log.WithError(err).WithField("cgroup", cgroupsPath).Debugf("no cgroup name for %s", what)
	}
	return name
}

func (c *Collector) readNetwork(j *netJob) {
	pid, err := j.pid, error(nil)
	if pid == 0 {
		if pid, err = c.reader.Pid(j.cgroup); errors.Is(err, cgstats.ErrNotFound) {
			return // the container stopped since the inventory's snapshot
		}
	}
	var ifaces []netdev.Interface
	if err == nil {
		ifaces, err = netdev.Read(c.opts.Proc, pid)
	}
	if err != nil {
		c.errors.WithLabelValues(ReasonNetwork).Inc()
		c.log.WithError(err).Debugf("reading the network counters of the %s failed", j.what)
		return
	}
	*j.out = ifaces
}

// networkFamily is one of cAdvisor's network counters: a series per network
// namespace and interface (interface label).
type networkFamily struct {
	name, help string
	desc       *prometheus.Desc
	value      func(*netdev.Interface) uint64
}

// networkFamilies are cAdvisor's names and help strings (google/cadvisor
// metrics/prometheus.go, NetworkUsageMetrics, the network kind the kubelet
// enables), in name order.
var networkFamilies = func() []networkFamily {
	fams := []networkFamily{
		{name: "container_network_receive_bytes_total", help: "Cumulative count of bytes received",
			value: func(i *netdev.Interface) uint64 { return i.RxBytes }},
		{name: "container_network_receive_errors_total", help: "Cumulative count of errors encountered while receiving",
			value: func(i *netdev.Interface) uint64 { return i.RxErrors }},
		{name: "container_network_receive_packets_dropped_total", help: "Cumulative count of packets dropped while receiving",
			value: func(i *netdev.Interface) uint64 { return i.RxDropped }},
		{name: "container_network_receive_packets_total", help: "Cumulative count of packets received",
			value: func(i *netdev.Interface) uint64 { return i.RxPackets }},
		{name: "container_network_transmit_bytes_total", help: "Cumulative count of bytes transmitted",
			value: func(i *netdev.Interface) uint64 { return i.TxBytes }},
		{name: "container_network_transmit_errors_total", help: "Cumulative count of errors encountered while transmitting",
			value: func(i *netdev.Interface) uint64 { return i.TxErrors }},
		{name: "container_network_transmit_packets_dropped_total", help: "Cumulative count of packets dropped while transmitting",
			value: func(i *netdev.Interface) uint64 { return i.TxDropped }},
		{name: "container_network_transmit_packets_total", help: "Cumulative count of packets transmitted",
			value: func(i *netdev.Interface) uint64 { return i.TxPackets }},
	}
	labels := append(append([]string{}, cadvisorLabels...), "interface")
	for i := range fams {
		fams[i].desc = prometheus.NewDesc(fams[i].name, fams[i].help, labels, nil)
	}
	return fams
}()

// networkSeries is a network namespace's interfaces with the labels of the
// series cAdvisor serves them on.
type networkSeries struct {
	labels []string // cadvisorLabels order
	ifaces []netdev.Interface
}

// networkOf lists the node's interfaces on the root's series and each
// pod's on its sandbox's: cAdvisor reads the network of the root cgroup
// (pid 1) and of sandbox containers only, as every other container of a
// pod shares the sandbox's.
func networkOf(snap *Snapshot) []networkSeries {
	out := make([]networkSeries, 0, 1+len(snap.Pods))
	if snap.Network != nil {
		out = append(out, networkSeries{labels: []string{"", "/", "", "", "", ""}, ifaces: snap.Network})
	}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if p.Network != nil {
			out = append(out, networkSeries{labels: []string{snap.SandboxContainer, p.SandboxCgroup, "", p.ID, p.Namespace, p.Name},
				ifaces: p.Network})
		}
	}
	return out
}

func collectNetwork(ch chan<- prometheus.Metric, snap *Snapshot) {
	for _, ns := range networkOf(snap) {
		for i := range networkFamilies {
			f := &networkFamilies[i]
			for j := range ns.ifaces {
				iface := &ns.ifaces[j]
				ch <- prometheus.NewMetricWithTimestamp(snap.Time, prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue,
					float64(f.value(iface)), append(append(make([]string, 0, len(ns.labels)+1), ns.labels...), iface.Name)...))
			}
		}
	}
}

// writeNetworkText writes the network families as WriteText writes the
// others: labels in name order, the reading's timestamp; a family without
// a series is left out, as a registry leaves it out.
func writeNetworkText(bw *bufio.Writer, snap *Snapshot, stamp string) {
	series := networkOf(snap)
	for i := range networkFamilies {
		f := &networkFamilies[i]
		header := "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " counter\n"
		for _, ns := range series {
			l := ns.labels
			head := f.name + `{container="` + escape(l[0]) + `",id="` + escape(l[1]) + `",image="` + escape(l[2]) +
				`",interface="`
			tail := `",name="` + escape(l[3]) + `",namespace="` + escape(l[4]) + `",pod="` + escape(l[5]) + `"} `
			for j := range ns.ifaces {
				iface := &ns.ifaces[j]
				bw.WriteString(header)
				header = ""
				bw.WriteString(head + escape(iface.Name) + tail + strconv.FormatUint(f.value(iface), 10) + stamp)
			}
		}
	}
}
