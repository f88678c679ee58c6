package nrt

import (
	"path/filepath"
	"testing"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

const gib = int64(1) << 30

func fixture(t *testing.T, name string) *topology.Topology {
	t.Helper()
	d, err := description.Load(filepath.Join("..", "..", "..", "..", "common", "topology", "testdata", name, "description.yaml"))
	require.NoError(t, err)
	topo, err := d.Topology()
	require.NoError(t, err)
	return topo
}

// object is the NodeResourceTopology of pol's state now.
func object(t *testing.T, topo *topology.Topology, pol *policy.Policy) *v1alpha2.NodeResourceTopology {
	t.Helper()
	cfg := pol.Config()
	return Object("worker", State{Topology: topo, Usage: pol.Usage(), Memory: pol.MemoryAccounts(), Policy: cfg.TopologyPolicy, Scope: cfg.TopologyScope})
}

// figures are a resource's capacity, allocatable and available, as numbers.
type figures struct{ capacity, allocatable, available int64 }

// resources are a zone's resources by name.
func resources(t *testing.T, obj *v1alpha2.NodeResourceTopology, zone string) map[string]figures {
	t.Helper()
	for _, z := range obj.Zones {
		if z.Name == zone {
			out := map[string]figures{}
			for _, r := range z.Resources {
				require.NotContains(t, out, r.Name, "zone %s lists %s twice", zone, r.Name)
				out[r.Name] = figures{r.Capacity.Value(), r.Allocatable.Value(), r.Available.Value()}
			}
			return out
		}
	}
	require.Failf(t, "no zone", "zone %s is not in %v", zone, obj.Zones)
	return nil
}

func guaranteed(id string, cpus int64, memory int64, hugePages map[uint64]int64) policy.Request {
	return policy.Request{ContainerID: id, PodUID: "pod-" + id, Namespace: "default", Pod: "pod-" + id, Container: "c",
		QOS: k8s.QOSGuaranteed, CPURequest: cpus * 1000, CPULimit: cpus * 1000, Memory: memory, HugePages: hugePages}
}

// TestObjectOfCPULessMachine: 8 NUMA nodes with CPUs and hugepages of two
// sizes, 4 CPU-less memory nodes; reserved CPUs and memory on node 0. Each
// figure is worked out from the fixture's description, not from the policy.
func TestObjectOfCPULessMachine(t *testing.T) {
	topo := fixture(t, "nps4-2s-12n-256c-cpuless")
	pol, err := policy.New(topo, policy.Config{
		ReservedCPUs:   cpuset.New(0, 128),
		ReservedMemory: map[int]uint64{0: uint64(gib)},
		TopologyPolicy: policy.TopologySingleNUMANode, TopologyScope: policy.ScopePod,
		MaxAllowableNUMANodes: 16,
	})
	require.NoError(t, err)
	empty := object(t, topo, pol)

	assert.Equal(t, "worker", empty.Name)
	require.Len(t, empty.Zones, 12, "one zone per NUMA node, CPU-less ones included")
	for i, z := range empty.Zones {
		assert.Equal(t, ZoneName(i), z.Name)
		assert.Equal(t, "Node", z.Type)
		require.Len(t, z.Costs, 12, "zone %s: a cost to every zone", z.Name)
	}
	assert.Equal(t, v1alpha2.CostInfo{Name: "node-8", Value: 14}, empty.Zones[0].Costs[8], "HBM next to node 0")
	assert.Equal(t, v1alpha2.CostInfo{Name: "node-0", Value: 10}, empty.Zones[0].Costs[0])
	assert.Equal(t, v1alpha2.AttributeList{{Name: "topologyManagerPolicy", Value: "single-numa-node"}, {Name: "topologyManagerScope", Value: "pod"}},
		empty.Attributes)
	assert.Equal(t, []string{"SingleNUMANodePodLevel"}, empty.TopologyPolicies)

	// Node 0: 32 CPUs, 2 reserved; 64 GiB of which 8 GiB in 2 MiB pages and
	// 16 GiB in 1 GiB pages, 1 GiB reserved.
	assert.Equal(t, map[string]figures{
		"cpu":           {32, 30, 30},
		"memory":        {40 * gib, 39 * gib, 39 * gib},
		"hugepages-2Mi": {8 * gib, 8 * gib, 8 * gib},
		"hugepages-1Gi": {16 * gib, 16 * gib, 16 * gib},
	}, resources(t, empty, "node-0"))
	assert.Equal(t, figures{32, 32, 32}, resources(t, empty, "node-5")["cpu"])
	assert.Equal(t, map[string]figures{
		"memory":        {14 * gib, 14 * gib, 14 * gib},
		"hugepages-2Mi": {2 * gib, 2 * gib, 2 * gib},
	}, resources(t, empty, "node-8"), "HBM: memory only")
	assert.Equal(t, map[string]figures{"memory": {256 * gib, 256 * gib, 256 * gib}}, resources(t, empty, "node-11"), "CXL")

	// A grant of 4 CPUs, 2 GiB and two 1 GiB pages lands on one node (single-numa-node).
	pl, _, err := pol.Allocate(guaranteed("a", 4, 2*gib, map[uint64]int64{uint64(gib): 2 * gib}))
	require.NoError(t, err)
	require.Len(t, pl.NUMANodes, 1)
	zone := ZoneName(pl.NUMANodes[0])
	before, after := resources(t, empty, zone), resources(t, object(t, topo, pol), zone)
	for name, delta := range map[string]int64{"cpu": 4, "memory": 2 * gib, "hugepages-1Gi": 2 * gib, "hugepages-2Mi": 0} {
		want := before[name]
		want.available -= delta
		assert.Equal(t, want, after[name], "%s of %s after the grant", name, zone)
	}
	granted := object(t, topo, pol)
	for _, z := range granted.Zones {
		if z.Name != zone {
			assert.Equal(t, resources(t, empty, z.Name), resources(t, granted, z.Name), "zone %s is untouched", z.Name)
		}
	}

	pol.Release("a")
	assert.True(t, apiequality.Semantic.DeepEqual(empty, object(t, topo, pol)), "the release gives everything back")
}

// TestObjectOfAGrantOverTwoNodes: on 4 nodes of 20 CPUs, a grant of 24
// CPUs (restricted) takes from two zones, 24 in all; a shared container
// changes nothing, as the scheduler counts only exclusive CPUs.
func TestObjectOfAGrantOverTwoNodes(t *testing.T) {
	topo := fixture(t, "snc-2s-4n-80c")
	pol, err := policy.New(topo, policy.Config{TopologyPolicy: policy.TopologyRestricted})
	require.NoError(t, err)
	empty := object(t, topo, pol)
	require.Len(t, empty.Zones, 4)
	for _, z := range empty.Zones {
		assert.Equal(t, figures{20, 20, 20}, resources(t, empty, z.Name)["cpu"], z.Name)
	}
	assert.Equal(t, []string{"RestrictedContainerLevel"}, empty.TopologyPolicies)

	_, _, err = pol.Allocate(policy.Request{ContainerID: "shared", PodUID: "pod-shared", Namespace: "default", Pod: "p", Container: "c",
		QOS: k8s.QOSBurstable, CPURequest: 1500})
	require.NoError(t, err)
	assert.True(t, apiequality.Semantic.DeepEqual(empty, object(t, topo, pol)), "a shared container holds nothing the scheduler counts")

	pl, _, err := pol.Allocate(guaranteed("wide", 24, 0, nil))
	require.NoError(t, err)
	require.Len(t, pl.NUMANodes, 2)
	obj := object(t, topo, pol)
	taken := int64(0)
	for _, z := range obj.Zones {
		cpu := resources(t, obj, z.Name)["cpu"]
		taken += cpu.allocatable - cpu.available
		if cpu.available < cpu.allocatable {
			assert.Contains(t, []string{ZoneName(pl.NUMANodes[0]), ZoneName(pl.NUMANodes[1])}, z.Name, "CPUs taken outside the affinity")
		}
	}
	assert.Equal(t, int64(24), taken)
}

func TestAttributes(t *testing.T) {
	topo := fixture(t, "smt-1s-8c")
	for _, tc := range []struct {
		policy     policy.TopologyPolicy
		scope      policy.TopologyScope
		attributes [2]string
		deprecated string
	}{
		{"", "", [2]string{"none", "container"}, "None"},
		{policy.TopologyNone, policy.ScopePod, [2]string{"none", "pod"}, "None"},
		{policy.TopologyBestEffort, "", [2]string{"best-effort", "container"}, "BestEffortContainerLevel"},
		{policy.TopologyBestEffort, policy.ScopePod, [2]string{"best-effort", "pod"}, "BestEffortPodLevel"},
		{policy.TopologyRestricted, policy.ScopeContainer, [2]string{"restricted", "container"}, "RestrictedContainerLevel"},
		{policy.TopologyRestricted, policy.ScopePod, [2]string{"restricted", "pod"}, "RestrictedPodLevel"},
		{policy.TopologySingleNUMANode, "", [2]string{"single-numa-node", "container"}, "SingleNUMANodeContainerLevel"},
		{policy.TopologySingleNUMANode, policy.ScopePod, [2]string{"single-numa-node", "pod"}, "SingleNUMANodePodLevel"},
	} {
		obj := Object("n", State{Topology: topo, Policy: tc.policy, Scope: tc.scope})
		assert.Equal(t, v1alpha2.AttributeList{{Name: AttributePolicy, Value: tc.attributes[0]}, {Name: AttributeScope, Value: tc.attributes[1]}},
			obj.Attributes, "%q %q", tc.policy, tc.scope)
		assert.Equal(t, []string{tc.deprecated}, obj.TopologyPolicies, "%q %q", tc.policy, tc.scope)
	}
}

func TestHugePagesName(t *testing.T) {
	for size, want := range map[uint64]string{2 << 20: "hugepages-2Mi", 1 << 30: "hugepages-1Gi", 64 << 10: "hugepages-64Ki", 32 << 20: "hugepages-32Mi"} {
		assert.Equal(t, want, HugePagesName(size))
		// The name parses back to the size, as the kubelet reads it.
		q, err := resource.ParseQuantity(want[len("hugepages-"):])
		require.NoError(t, err)
		assert.Equal(t, int64(size), q.Value())
	}
}

func TestNextBackoff(t *testing.T) {
	var waits []string
	var d = nextBackoff(0)
	for range 9 {
		waits = append(waits, d.String())
		d = nextBackoff(d)
	}
	assert.Equal(t, []string{"500ms", "1s", "2s", "4s", "8s", "16s", "30s", "30s", "30s"}, waits, "doubles, bounded")
}
