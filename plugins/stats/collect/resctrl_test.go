package collect

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/resctrl"
)

// TestResctrlMetrics: a container with a resctrl monitoring group (runc's,
// named after it, in its class's group) gets cAdvisor's LLC occupancy and
// memory bandwidth per cache; the same in the text the endpoint writes.
func TestResctrlMetrics(t *testing.T) {
	n := newNode(t)
	root := t.TempDir()
	for path, content := range map[string]string{
		"info/L3_MON/mon_features": "llc_occupancy\nmbm_total_bytes",
		"nri-suite.gold/mon_groups/ctr-app/mon_data/mon_L3_00/llc_occupancy":   "1048576",
		"nri-suite.gold/mon_groups/ctr-app/mon_data/mon_L3_00/mbm_total_bytes": "5000",
		"nri-suite.gold/mon_groups/ctr-app/mon_data/mon_L3_01/llc_occupancy":   "2048",
		"nri-suite.gold/mon_groups/ctr-app/mon_data/mon_L3_01/mbm_total_bytes": "7000",
		"mon_groups/someone-else/mon_data/mon_L3_00/llc_occupancy":             "1",
	} {
		writeFile(t, root, path, content)
	}
	n.c.opts.Resctrl = resctrl.NewReader(root)
	require.NotNil(t, n.c.opts.Resctrl)

	const labels = `container="app",id="/kubepods/burstable/poduid-web/ctr-app",image="registry.example/app:1",name="ctr-app",namespace="shop"`
	want := `
# HELP container_llc_occupancy_bytes Last level cache usage statistics for container counted with RDT Memory Bandwidth Monitoring (MBM).
# TYPE container_llc_occupancy_bytes gauge
container_llc_occupancy_bytes{` + labels + `,node_id="0",pod="web"} 1.048576e+06 1700000000000
container_llc_occupancy_bytes{` + labels + `,node_id="1",pod="web"} 2048 1700000000000
# HELP container_memory_bandwidth_bytes Total memory bandwidth usage statistics for container counted with RDT Memory Bandwidth Monitoring (MBM).
# TYPE container_memory_bandwidth_bytes gauge
container_memory_bandwidth_bytes{` + labels + `,node_id="0",pod="web"} 5000 1700000000000
container_memory_bandwidth_bytes{` + labels + `,node_id="1",pod="web"} 7000 1700000000000
`
	m := NewCAdvisor(n.c)
	require.NoError(t, testutil.CollectAndCompare(m, strings.NewReader(want), "container_llc_occupancy_bytes", "container_memory_bandwidth_bytes"))

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	require.NoError(t, err)
	var viaRegistry, direct bytes.Buffer
	enc := expfmt.NewEncoder(&viaRegistry, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "container_llc") || strings.HasPrefix(mf.GetName(), "container_memory_bandwidth") {
			require.NoError(t, enc.Encode(mf))
		}
	}
	require.NoError(t, m.WriteText(&direct))
	got := parsed(t, direct.String())
	assert.Equal(t, parsed(t, viaRegistry.String())["container_llc_occupancy_bytes"], got["container_llc_occupancy_bytes"])
	assert.Equal(t, parsed(t, viaRegistry.String())["container_memory_bandwidth_bytes"], got["container_memory_bandwidth_bytes"])

	// Without resctrl monitoring, neither family is written.
	n.c.opts.Resctrl = nil
	n.now = n.now.Add(2 * n.c.opts.CacheFor)
	direct.Reset()
	require.NoError(t, m.WriteText(&direct))
	assert.NotContains(t, direct.String(), "container_llc_occupancy_bytes")
}
