// Package nrt publishes the node's NodeResourceTopology (the
// topology.node.k8s.io/v1alpha2 object of the NUMA-aware scheduler plugins,
// github.com/k8stopologyawareschedwg/noderesourcetopology-api) from the
// topology-aware plugin's own state: one zone per NUMA node with its CPUs,
// memory and hugepages, and the Topology Manager policy and scope the
// plugin applies. Object makes the object; Publisher keeps the API's copy
// in line with the state, behind the NRI handlers.
package nrt

import (
	"strconv"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// ZoneType is the type of every zone: a NUMA node, as the scheduler
// plugins expect it.
const ZoneType = "Node"

// The top-level attributes, named as node-feature-discovery's topology
// updater and the resource-topology-exporter name them, with the kubelet's
// spellings of the values.
const (
	AttributePolicy = "topologyManagerPolicy"
	AttributeScope  = "topologyManagerScope"
)

// State is the plugin's state the object is made of, taken at one moment.
type State struct {
	Topology *topology.Topology
	// Usage and Memory are the policy's (policy.Policy.Usage, MemoryAccounts).
	Usage  []policy.NodeUsage
	Memory []policy.MemoryAccount
	// Policy and Scope are those of the Topology Manager the plugin
	// applies; empty: none and container.
	Policy policy.TopologyPolicy
	Scope  policy.TopologyScope
}

// ZoneName is the zone of NUMA node id.
func ZoneName(id int) string { return "node-" + strconv.Itoa(id) }

// Object is the NodeResourceTopology of node nodeName in state st, without
// owner. Per zone:
//   - cpu: capacity the node's CPUs; allocatable those an exclusive grant
//     may take (not reserved, not kernel-isolated, within available-cpus);
//     available those of them not granted;
//   - memory: capacity the node's memory outside hugepages; allocatable
//     that minus reserved-memory; available what Guaranteed containers
//     were not granted (the Memory Manager's accounting);
//   - hugepages-<size>: capacity and allocatable the pool, available what
//     was not granted.
//
// Costs are the ACPI distances to every zone. A CPU-less node has no cpu.
func Object(nodeName string, st State) *v1alpha2.NodeResourceTopology {
	exclusive := map[int]policy.NodeUsage{}
	for _, u := range st.Usage {
		if u.Pool == policy.PoolExclusive {
			exclusive[u.Node] = u
		}
	}
	memory := map[int][]policy.MemoryAccount{}
	for _, m := range st.Memory {
		memory[m.Node] = append(memory[m.Node], m)
	}
	obj := &v1alpha2.NodeResourceTopology{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "NodeResourceTopology"},
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Attributes: v1alpha2.AttributeList{
			{Name: AttributePolicy, Value: string(policyOf(st.Policy))},
			{Name: AttributeScope, Value: string(scopeOf(st.Scope))},
		},
		TopologyPolicies: []string{string(deprecatedPolicy(policyOf(st.Policy), scopeOf(st.Scope)))},
		Zones:            v1alpha2.ZoneList{},
	}
	nodes := st.Topology.Nodes()
	for _, id := range nodes {
		zone := v1alpha2.Zone{Name: ZoneName(id), Type: ZoneType}
		for _, to := range nodes {
			if d, ok := st.Topology.Distance(id, to); ok {
				zone.Costs = append(zone.Costs, v1alpha2.CostInfo{Name: ZoneName(to), Value: int64(d)})
			}
		}
		if cpus := st.Topology.CPUsOfNode(id).Size(); cpus > 0 {
			u := exclusive[id]
			zone.Resources = append(zone.Resources, info(string(corev1.ResourceCPU), resource.DecimalSI,
				uint64(cpus), uint64(u.CapacityCPUs), uint64(u.FreeCPUs)))
		}
		node, _ := st.Topology.Node(id)
		regular := node.MemTotal
		for _, hp := range node.HugePages {
			regular -= min(regular, hp.Size*hp.Total)
		}
		for _, m := range memory[id] {
			if m.PageSize == 0 {
				zone.Resources = append(zone.Resources, info(string(corev1.ResourceMemory), resource.BinarySI, regular, m.Allocatable, m.Free))
				continue
			}
			zone.Resources = append(zone.Resources, info(HugePagesName(m.PageSize), resource.BinarySI, m.Allocatable, m.Allocatable, m.Free))
		}
		obj.Zones = append(obj.Zones, zone)
	}
	return obj
}

// HugePagesName is the resource name of hugepages of size bytes, as the
// kubelet spells it: hugepages-2Mi, hugepages-1Gi.
func HugePagesName(size uint64) string {
	return corev1.ResourceHugePagesPrefix + resource.NewQuantity(int64(size), resource.BinarySI).String()
}

func info(name string, format resource.Format, capacity, allocatable, available uint64) v1alpha2.ResourceInfo {
	q := func(v uint64) resource.Quantity { return *resource.NewQuantity(int64(v), format) }
	return v1alpha2.ResourceInfo{Name: name, Capacity: q(capacity), Allocatable: q(allocatable), Available: q(available)}
}

func policyOf(p policy.TopologyPolicy) policy.TopologyPolicy {
	if p == "" {
		return policy.TopologyNone
	}
	return p
}

func scopeOf(s policy.TopologyScope) policy.TopologyScope {
	if s == "" {
		return policy.ScopeContainer
	}
	return s
}

// deprecatedPolicy is the policy and scope in the object's older
// topologyPolicies field, which schedulers before the attributes read.
func deprecatedPolicy(p policy.TopologyPolicy, s policy.TopologyScope) v1alpha2.TopologyManagerPolicy {
	pod := s == policy.ScopePod
	pick := func(container, podLevel v1alpha2.TopologyManagerPolicy) v1alpha2.TopologyManagerPolicy {
		if pod {
			return podLevel
		}
		return container
	}
	switch p {
	case policy.TopologySingleNUMANode:
		return pick(v1alpha2.SingleNUMANodeContainerLevel, v1alpha2.SingleNUMANodePodLevel)
	case policy.TopologyRestricted:
		return pick(v1alpha2.RestrictedContainerLevel, v1alpha2.RestrictedPodLevel)
	case policy.TopologyBestEffort:
		return pick(v1alpha2.BestEffortContainerLevel, v1alpha2.BestEffortPodLevel)
	default: // none: the configuration allows no other
		return v1alpha2.None
	}
}
