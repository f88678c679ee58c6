package collect

import (
	"bytes"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/machine"
)

// parsed is a text exposition as family -> help, type and sorted series.
func parsed(t *testing.T, text string) map[string][]string {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, text)
	out := map[string][]string{}
	for name, mf := range families {
		lines := []string{mf.GetHelp(), mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			lines = append(lines, m.String())
		}
		sort.Strings(lines[2:])
		out[name] = lines
	}
	return out
}

func TestWriteTextMatchesCollect(t *testing.T) {
	n := newNode(t)
	// A label value that needs escaping, and a quota for the CFS series.
	pod := &api.PodSandbox{Id: "sb2", Name: `we"ird`, Namespace: "shop", Pid: 4242,
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/pod2", CgroupsPath: "/kubepods/pod2/sb2"}}
	ctr := &api.Container{Id: "c2", PodSandboxId: "sb2", Name: "a\\b", State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/pod2/c2"}}
	n.inv.SetContainer(pod, ctr)
	writeV1(t, n.root, "/kubepods/pod2", 7e9, 5<<20)
	writeV1(t, n.root, "/kubepods/pod2/c2", 7e9, 5<<20)
	writeFile(t, n.root, "cpu/kubepods/pod2/c2/cpu.cfs_quota_us", "50000")
	writeBlkioV1(t, n.root, "/kubepods/pod2")
	writeBlkioV1(t, n.root, "/kubepods/pod2/c2")
	withNetwork(t, n) // the node's network and sb1's; sb2 shares sb1's pid
	withFilesystems(t, n, "/")

	n.c.opts.Machine = &machine.Info{Cores: 2, DIMMs: map[string]machine.DIMMs{"DDR4": {Count: 1}, "DDR5": {Count: 2}}, MachineID: `m"id`}
	n.c.opts.Version = &machine.Version{Kernel: "6.8", OS: "Linux"}
	m := NewCAdvisor(n.c)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	require.NoError(t, err)
	var viaRegistry bytes.Buffer
	enc := expfmt.NewEncoder(&viaRegistry, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		require.NoError(t, enc.Encode(mf))
	}
	var direct bytes.Buffer
	require.NoError(t, m.WriteText(&direct))

	want, got := parsed(t, viaRegistry.String()), parsed(t, direct.String())
	for name := range got {
		if len(got[name]) == 2 {
			delete(got, name) // HELP and TYPE of a family without series: the registry drops those
		}
	}
	assert.Equal(t, want, got)
	assert.Contains(t, direct.String(), `container_cpu_cfs_periods_total{container="a\\b",id="/kubepods/pod2/c2",image="",name="c2",namespace="shop",pod="we\"ird"} 0 `)
	assert.Contains(t, direct.String(), `container_network_receive_bytes_total{container="",id="/kubepods/pod2/sb2",image="",interface="eth0",name="sb2",namespace="shop",pod="we\"ird"} 300 `)
}

func TestBackgroundInterval(t *testing.T) {
	n := newNode(t)
	n.c.now = time.Now
	n.c.Configure(0, 10*time.Millisecond, 1)
	defer n.c.Close()
	first := n.c.Snapshot()
	writeV1(t, n.root, ctrCgroup, 9e9, 33<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := n.c.Snapshot()
		// CPU is nil in a reading that met cpuacct.usage half written.
		if c := s.Pods[0].Containers[0].Sample; c != nil && c.CPU != nil && c.CPU.UsageNs == 9e9 {
			assert.True(t, s.Time.After(first.Time), "a later reading")
			break
		}
		require.True(t, time.Now().Before(deadline), "the background loop did not read the new value")
		time.Sleep(5 * time.Millisecond)
	}
	n.c.Close()
	stopped := n.c.Snapshot() // without the loop: read on demand (cache 0)
	assert.Equal(t, uint64(9e9), stopped.Pods[0].Containers[0].Sample.CPU.UsageNs)
}
