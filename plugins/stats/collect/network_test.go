package collect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const netDevHeader = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

// withNetwork gives n a /proc with the node's interfaces (pid 1) and those
// of pod sb1's sandbox (pid 4242), whose cgroup is podCgroup/sb1.
func withNetwork(t *testing.T, n *node) string {
	t.Helper()
	proc := t.TempDir()
	writeFile(t, proc, "1/net/dev", netDevHeader+
		"    lo: 999 9 0 0 0 0 0 0 999 9 0 0 0 0 0 0\n"+
		"  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0\n")
	writeFile(t, proc, "4242/net/dev", netDevHeader+
		"    lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n"+
		"  eth0: 300 3 0 0 0 0 0 0 400 4 0 1 0 0 0 0\n")
	n.c.opts.Proc = proc
	n.inv.SetPod(&api.PodSandbox{Id: "sb1", Name: "web", Namespace: "shop", Uid: "uid-web", Pid: 4242,
		Linux: &api.LinuxPodSandbox{CgroupParent: podCgroup, CgroupsPath: podCgroup + "/sb1"}})
	return proc
}

// The node's interfaces on the root's series and the pod's on its
// sandbox's, without lo, as cAdvisor serves them.
func TestNetworkMetrics(t *testing.T) {
	n := newNode(t)
	withNetwork(t, n)
	want := `
# HELP container_network_receive_bytes_total Cumulative count of bytes received
# TYPE container_network_receive_bytes_total counter
container_network_receive_bytes_total{container="",id="/",image="",interface="eth0",name="",namespace="",pod=""} 1000 1700000000000
container_network_receive_bytes_total{container="",id="/kubepods/burstable/poduid-web/sb1",image="",interface="eth0",name="sb1",namespace="shop",pod="web"} 300 1700000000000
# HELP container_network_transmit_packets_dropped_total Cumulative count of packets dropped while transmitting
# TYPE container_network_transmit_packets_dropped_total counter
container_network_transmit_packets_dropped_total{container="",id="/",image="",interface="eth0",name="",namespace="",pod=""} 4 1700000000000
container_network_transmit_packets_dropped_total{container="",id="/kubepods/burstable/poduid-web/sb1",image="",interface="eth0",name="sb1",namespace="shop",pod="web"} 1 1700000000000
`
	require.NoError(t, testutil.CollectAndCompare(NewCAdvisor(n.c), strings.NewReader(want),
		"container_network_receive_bytes_total", "container_network_transmit_packets_dropped_total"))
	for _, f := range networkFamilies {
		assert.Equal(t, 2, testutil.CollectAndCount(NewCAdvisor(n.c), f.name), f.name)
	}

	// CRI-O's infra container is "POD" to cAdvisor.
	n.c.SetRuntime("cri-o")
	n.now = n.now.Add(n.c.opts.CacheFor)
	want = strings.ReplaceAll(want, `container="",id="/kubepods`, `container="POD",id="/kubepods`)
	want = strings.ReplaceAll(want, " 1700000000000\n", " 1700000001000\n")
	require.NoError(t, testutil.CollectAndCompare(NewCAdvisor(n.c), strings.NewReader(want),
		"container_network_receive_bytes_total", "container_network_transmit_packets_dropped_total"))
}

// A sandbox process that is gone or a file that does not parse is counted
// and left out; the rest is served. A stopped sandbox is not read.
func TestNetworkFailures(t *testing.T) {
	n := newNode(t)
	proc := withNetwork(t, n)
	require.NoError(t, os.WriteFile(filepath.Join(proc, "1", "net", "dev"), []byte(netDevHeader+"eth0: 1 2\n"), 0o644))
	n.inv.SetPod(&api.PodSandbox{Id: "sb2", Name: "gone", Namespace: "shop", Pid: 4343,
		Linux: &api.LinuxPodSandbox{CgroupsPath: "/kubepods/podgone/sb2"}})

	assert.Equal(t, 1, testutil.CollectAndCount(NewCAdvisor(n.c), "container_network_receive_bytes_total"), "only sb1's eth0")
	assert.Equal(t, 2.0, testutil.ToFloat64(n.c.errors.WithLabelValues(ReasonNetwork)), "the node's malformed file and sb2's missing one")
	assert.Equal(t, 3, testutil.CollectAndCount(NewCAdvisor(n.c), "container_cpu_usage_seconds_total"),
		"the node's, the pod's and the container's cgroups are still served")

	// A pod stops its containers before its sandbox.
	n.inv.SetRunning("ctr-app", false)
	n.inv.StopPod("sb1")
	n.inv.RemovePod("sb2")
	n.now = n.now.Add(n.c.opts.CacheFor)
	assert.Zero(t, testutil.CollectAndCount(NewCAdvisor(n.c), "container_network_receive_bytes_total"))
	assert.Equal(t, 3.0, testutil.ToFloat64(n.c.errors.WithLabelValues(ReasonNetwork)), "the stopped sandbox is not read")
}

// A pod without a sandbox process (CRI-O's drop_infra_ctr) is read through
// a process of a running container's cgroup, on a series with its pod's
// cgroup as id; once its containers stop, it is not read.
func TestNetworkWithoutSandboxProcess(t *testing.T) {
	n := newNode(t)
	proc := withNetwork(t, n)
	n.inv.SetPod(&api.PodSandbox{Id: "sb1", Name: "web", Namespace: "shop", Uid: "uid-web",
		Linux: &api.LinuxPodSandbox{CgroupParent: podCgroup}})
	writeFile(t, n.root, "memory"+ctrCgroup+"/cgroup.procs", "4242\n4250\n")
	n.c.SetRuntime("cri-o")
	require.FileExists(t, filepath.Join(proc, "4242", "net", "dev"))
	want := `
# HELP container_network_receive_bytes_total Cumulative count of bytes received
# TYPE container_network_receive_bytes_total counter
container_network_receive_bytes_total{container="",id="/",image="",interface="eth0",name="",namespace="",pod=""} 1000 1700000000000
container_network_receive_bytes_total{container="POD",id="/kubepods/burstable/poduid-web",image="",interface="eth0",name="sb1",namespace="shop",pod="web"} 300 1700000000000
`
	require.NoError(t, testutil.CollectAndCompare(NewCAdvisor(n.c), strings.NewReader(want), "container_network_receive_bytes_total"))

	n.inv.SetRunning("ctr-app", false)
	n.now = n.now.Add(n.c.opts.CacheFor)
	assert.Equal(t, 1, testutil.CollectAndCount(NewCAdvisor(n.c), "container_network_receive_bytes_total"), "the node's only")
	assert.Zero(t, testutil.ToFloat64(n.c.errors.WithLabelValues(ReasonNetwork)))
}
