package main_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

// TestPlacementQuality is issue 16's acceptance, side by side with the
// peer's measurement: on the peer's recorded server (112 CPUs, 2 sockets, 4
// DRAM and 2 PMEM nodes, CPUs 4-7,60-63 isolated) and on the 80- and
// 256-CPU fixtures, with the default configuration, 100 live pods of every
// QoS class churned (a random pod removed, a new one created), checking at
// every step, through the real plugin and the runtime's own view of each
// container:
//
//   - every exclusive grant lies within one NUMA node whenever a node had
//     room for it (and is never refused then; room that leaves the shared
//     pool a CPU);
//   - every container's cpuset.mems are the nodes of its CPUs;
//   - no two grants overlap, nor a grant the shared pool or an isolated CPU;
//   - an even grant is whole cores whenever a node had that many whole
//     free cores.
//
// It asserts properties, never timings. PLACEMENT_CHURN lengthens the churn
// (200 operations by default; the peer's figures are of 1,000).
func TestPlacementQuality(t *testing.T) {
	const livePods = 100
	churn := 200
	if v := os.Getenv("PLACEMENT_CHURN"); v != "" {
		var err error
		churn, err = strconv.Atoi(v)
		require.NoError(t, err, "PLACEMENT_CHURN=%q: expected a number of operations", v)
	}
	for _, fixture := range []string{"nri-plugins-server", "snc-2s-4n-80c", "nps4-2s-12n-256c-cpuless"} {
		t.Run(fixture, func(t *testing.T) {
			// The state on a tmpfs, as on a node (/run).
			n := startNode(t, fixture, nodeOptions{logLevel: "info", tmpfs: true})
			q := &quality{n: n, grants: map[*harness.Container]cpuset.CPUSet{}}
			rng := rand.New(rand.NewPCG(16, uint64(len(fixture))))
			var pods []*harness.Pod
			for i := 0; i < livePods+churn; i++ {
				if i >= livePods {
					k := rng.IntN(len(pods))
					q.remove(t, pods[k])
					pods = slices.Delete(pods, k, k+1)
				}
				if p := q.create(t, mixedPod(rng, fmt.Sprintf("q-%d", i))); p != nil {
					pods = append(pods, p)
				}
				q.check(t, q.live)
				if t.Failed() {
					return
				}
			}
			t.Logf("%d exclusive grants: %d with a node that had room, all %d of them on one node; %d even, %d whole cores "+
				"(%d with a node that had the whole cores); %d refused, none with a node that had room",
				q.placed, q.roomy, q.single, q.even, q.whole, q.wholeRoomy, q.refused)
			assert.Equal(t, q.roomy, q.single)
			assert.Positive(t, q.roomy, "no grant had room: the workload does not test anything")
			assert.Positive(t, q.wholeRoomy)
		})
	}
}

// mixedPod is a pod of the peer's mix of classes, about a fifth of them with
// exclusive CPUs of 1 to 6, odd sizes among them so that cores split.
func mixedPod(rng *rand.Rand, name string) *v1.Pod {
	res := v1.ResourceRequirements{}
	switch w := rng.IntN(100); {
	case w < 20: // BestEffort
	case w < 55: // Burstable
		res.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("128Mi")}
		res.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}
	case w < 80: // Guaranteed, fractional: shared
		res.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")}
	default: // Guaranteed, whole CPUs: exclusive
		sizes := []string{"1", "2", "2", "3", "4", "6"}
		res.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(sizes[rng.IntN(len(sizes))]), v1.ResourceMemory: resource.MustParse("1Gi")}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "app", Image: "busybox", Resources: res}}}}
	pod.Name, pod.Namespace = name, "default"
	return pod
}

// quality follows a node's containers and checks the placement properties.
type quality struct {
	n      *node
	live   []*harness.Container
	grants map[*harness.Container]cpuset.CPUSet // the exclusive ones, as granted

	placed, roomy, single, even, whole, wholeRoomy, refused int
}

// exclusiveCPUs is what a container's Guaranteed integer request asks for, 0
// when it is not such a container.
func exclusiveCPUs(p *harness.Pod) int {
	lim := p.Def.Manifest.Spec.Containers[0].Resources.Limits.Cpu()
	if p.QOS() != v1.PodQOSGuaranteed || lim.MilliValue()%1000 != 0 {
		return 0
	}
	return int(lim.Value())
}

// freePerNode counts the CPUs of each node that no grant holds and that are
// not isolated, and those of them forming whole free cores.
func (q *quality) freePerNode() (free, whole map[int]int) {
	taken := q.n.topo.Isolated()
	for _, g := range q.grants {
		taken = taken.Union(g)
	}
	free, whole = map[int]int{}, map[int]int{}
	for _, node := range q.n.topo.Nodes() {
		left := q.n.topo.CPUsOfNode(node).Difference(taken)
		free[node] = left.Size()
		for _, id := range left.List() {
			if q.n.topo.Siblings(id).IsSubsetOf(left) {
				whole[node]++
			}
		}
	}
	return free, whole
}

func (q *quality) create(t *testing.T, manifest *v1.Pod) *harness.Pod {
	t.Helper()
	p := q.n.rt.NewPod(t, manifest)
	want := exclusiveCPUs(p)
	free, whole := q.freePerNode()
	total := 0
	for _, f := range free {
		total += f
	}
	// A grant must leave the shared pool, which serves live shared
	// containers, a CPU.
	fits := func(node int, have map[int]int) bool { return have[node] >= want && total > want }
	room := slices.ContainsFunc(q.n.topo.Nodes(), func(node int) bool { return fits(node, free) })
	wholeRoom := slices.ContainsFunc(q.n.topo.Nodes(), func(node int) bool { return fits(node, whole) })
	if err := q.n.rt.StartPod(p); err != nil {
		require.Positive(t, want, "a shared container was refused: %v", err)
		require.False(t, room, "%s: refused although a NUMA node had %d free CPUs: %v", manifest.Name, want, err)
		q.refused++
		q.n.rt.RemovePod(t, p)
		return nil
	}
	c := p.Container("app")
	q.live = append(q.live, c)
	if want == 0 {
		return p
	}
	grant := cpus(t, c)
	q.grants[c] = grant
	q.placed++
	require.Equal(t, want, grant.Size())
	nodes := q.n.nodesOf(grant)
	if room {
		q.roomy++
		assert.Equal(t, 1, nodes.Size(), "%s: %d CPUs over NUMA nodes %s although one had room: %s (free per node %v)", manifest.Name, want, nodes, grant, free)
		if nodes.Size() == 1 {
			q.single++
		}
	}
	if want%2 == 0 {
		q.even++
		wholeCores := true
		for _, id := range grant.List() {
			wholeCores = wholeCores && q.n.topo.Siblings(id).IsSubsetOf(grant)
		}
		if wholeCores {
			q.whole++
		}
		if wholeRoom {
			q.wholeRoomy++
			assert.True(t, wholeCores, "%s: %s splits cores although a node had %d whole free cores' CPUs (%v)", manifest.Name, grant, want, whole)
		}
	}
	return p
}

func (q *quality) remove(t *testing.T, p *harness.Pod) {
	t.Helper()
	c := p.Container("app")
	q.n.rt.RemovePod(t, p)
	delete(q.grants, c)
	q.live = slices.DeleteFunc(q.live, func(l *harness.Container) bool { return l == c })
}

// check checks the containers as the runtime runs them, against every grant.
func (q *quality) check(t *testing.T, containers []*harness.Container) {
	t.Helper()
	var granted cpuset.CPUSet
	for _, g := range q.grants {
		granted = granted.Union(g)
	}
	seen := cpuset.CPUSet{}
	shared := map[*harness.Container]cpuset.CPUSet{}
	for _, c := range containers {
		cpus, mems := c.Cpuset()
		set, err := cpuset.Parse(cpus)
		require.NoError(t, err)
		require.False(t, set.IsEmpty(), "%s runs on no cpuset", c.Name())
		assert.Equal(t, q.n.nodesOf(set).String(), mems, "%s/%s: memory on the nodes of its CPUs %s", c.Pod.Name(), c.Name(), set)
		g, ok := q.grants[c]
		if !ok {
			shared[c] = set
			continue
		}
		assert.Equal(t, g.String(), set.String(), "%s: a grant never moves", c.Pod.Name())
		assert.True(t, set.Intersection(seen).IsEmpty(), "%s: grant %s overlaps another on %s", c.Pod.Name(), set, set.Intersection(seen))
		assert.True(t, set.Intersection(q.n.topo.Isolated()).IsEmpty(), "%s: grant %s takes isolated CPUs", c.Pod.Name(), set)
		seen = seen.Union(set)
	}
	for c, set := range shared {
		assert.True(t, set.Intersection(granted).IsEmpty(), "%s: shared on %s, over grants %s", c.Pod.Name(), set, set.Intersection(granted))
	}
}
