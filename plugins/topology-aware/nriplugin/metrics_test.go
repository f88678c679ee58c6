package nriplugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

func TestUsageCollector(t *testing.T) {
	usage := []policy.NodeUsage{
		{Node: 0, Pool: policy.PoolShared, Containers: 3, CapacityCPUs: 4, GrantedMilliCPU: 1500, FreeCPUs: 4},
		{Node: 0, Pool: policy.PoolExclusive, Containers: 1, CapacityCPUs: 6, GrantedMilliCPU: 2000, FreeCPUs: 4,
			MemoryCapacity: 1000, MemoryGranted: 300, MemoryFree: 700},
		{Node: 8, Pool: policy.PoolExclusive, MemoryCapacity: 50, MemoryFree: 50},
	}
	placements := []policy.Placement{
		{ContainerID: "a", Pool: policy.PoolShared}, {ContainerID: "b", Pool: policy.PoolShared},
		{ContainerID: "c", Pool: policy.PoolExclusive},
	}
	synced := false
	c := newUsageCollector("test", func() ([]policy.NodeUsage, []policy.Placement, bool) {
		return usage, placements, synced
	})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	assert.Empty(t, gather(t, reg), "nothing before the first Synchronize")

	synced = true
	got := gather(t, reg)
	for sample, value := range map[string]float64{
		`test_containers{pool="exclusive"}`:                 1,
		`test_containers{pool="isolated"}`:                  0,
		`test_containers{pool="reserved"}`:                  0,
		`test_containers{pool="shared"}`:                    2,
		`test_pool_capacity_cpus{node="0",pool="shared"}`:   4,
		`test_pool_granted_cpus{node="0",pool="exclusive"}`: 2,
		`test_pool_granted_cpus{node="0",pool="shared"}`:    1.5,
		`test_pool_free_cpus{node="0",pool="exclusive"}`:    4,
		`test_pool_node_containers{node="0",pool="shared"}`: 3,
		`test_memory_capacity_bytes{node="0"}`:              1000,
		`test_memory_granted_bytes{node="0"}`:               300,
		`test_memory_free_bytes{node="0"}`:                  700,
		`test_memory_free_bytes{node="8"}`:                  50,
	} {
		assert.Equal(t, value, got[sample], sample)
	}
	_, ok := got[`test_memory_free_bytes{node="1"}`]
	assert.False(t, ok, "no memory row for a node without memory accounting")
}

// gather returns every sample as name{label="value",...} -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestRejectionReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("container x: %w", policy.ErrInsufficientCPUs), "insufficient-cpus"},
		{fmt.Errorf("container x: %w", policy.ErrInsufficientMemory), "insufficient-memory"},
		{fmt.Errorf("container x: %w", policy.ErrTopologyAffinity), "topology-affinity"},
		{fmt.Errorf("container x: %w", policy.ErrInvalidRequest), "invalid-request"},
		{&requestError{reason: invalidAnnotationReason, err: fmt.Errorf("bad")}, invalidAnnotationReason},
		{fmt.Errorf("something else"), "other"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, rejectionReason(tc.err))
		})
	}
}
