package policy

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
)

// randomConfigs are the configurations the random sequences run under. The
// Topology Manager policies allow 12 NUMA nodes, so that they run on the
// 12-node fixture too.
func randomConfigs() map[string]Config {
	return map[string]Config{
		"default":               {ReservedCPUCount: 1, ReservedNamespaces: []string{"kube-system"}},
		"kubelet-packing":       {ReservedCPUCount: 1, ReservedNamespaces: []string{"kube-system"}, KubeletPacking: true},
		"full-pcpus-restricted": {ReservedCPUCount: 2, FullPCPUsOnly: true, TopologyPolicy: TopologyRestricted, MaxAllowableNUMANodes: 12},
		"distribute-best-effort-pod": {ReservedCPUCount: 1, DistributeAcrossNUMA: true, TopologyPolicy: TopologyBestEffort,
			TopologyScope: ScopePod, StrictReservation: true, MaxAllowableNUMANodes: 12},
		"uncore-single-numa-closest": {ReservedCPUCount: 1, AlignByUncoreCache: true, TopologyPolicy: TopologySingleNUMANode,
			PreferClosestNUMA: true, MaxAllowableNUMANodes: 12},
		"spread-restricted-closest": {SpreadAcrossCores: true, TopologyPolicy: TopologyRestricted, PreferClosestNUMA: true,
			MaxAllowableNUMANodes: 12},
		"socket-restricted-pod-reserved": {ReservedCPUCount: 2, AlignBySocket: true, TopologyPolicy: TopologyRestricted,
			TopologyScope: ScopePod, ReservedNamespaces: []string{"kube-system"}, ReservedGuaranteed: ReservedGuaranteedAllowFewer,
			MaxAllowableNUMANodes: 12},
	}
}

// randomRequest makes a container of any kind, sized for a machine of n CPUs.
// Its pod's sums (which its containers do not always respect) depend on
// the pod: the fifth pod's are unknown.
func randomRequest(rng *rand.Rand, id string, pods []string, n int) Request {
	i := rng.IntN(len(pods))
	pod := pods[i]
	req := Request{ContainerID: id, PodUID: pod, Namespace: "default", Pod: pod, Container: id}
	if i != 4 {
		req.PodCPURequest = int64(max(1, (i%2+1)*n/8)) * 1000
		req.PodMemory = int64(i%3) * gib
	}
	switch rng.IntN(9) {
	case 0, 1, 2:
		req.QOS = k8s.QOSGuaranteed
		req.CPURequest = int64(1+rng.IntN(max(1, n/4))) * 1000
		req.Memory = int64(rng.IntN(3)) * gib
		if rng.IntN(6) == 0 {
			req.Namespace = "kube-system"
		}
		if rng.IntN(3) == 0 { // large enough to fill the 16 GiB HBM nodes of nps4-2s-12n-256c-cpuless
			req.CPULessMemory = true
			req.Memory = int64(rng.IntN(9)) * gib
		}
	case 3:
		req.QOS = k8s.QOSGuaranteed
		req.CPURequest = int64(100 + rng.IntN(1900))
	case 4:
		req.QOS = k8s.QOSBestEffort
	case 5:
		req.QOS = k8s.QOSGuaranteed
		req.CPURequest = 2000
		req.CPU = []CPUPreference{CPUShared, CPUReserved, CPUIsolatedPrefer, CPUIsolatedRequire}[rng.IntN(4)]
	case 6:
		req.QOS = k8s.QOSBurstable
		req.CPURequest = int64(rng.IntN(4000))
		req.Namespace = "kube-system"
	case 7:
		// A container of a Guaranteed pod with pod-level resources and no
		// resources of its own: the pod's limits are its limits.
		req.QOS = k8s.QOSGuaranteed
		req.CPULimit = req.PodCPURequest
		req.Memory = req.PodMemory
	default:
		req.QOS = k8s.QOSBurstable
		req.CPURequest = int64(rng.IntN(4000))
		req.CPULessMemory = rng.IntN(2) == 0
	}
	if rng.IntN(5) == 0 {
		req.Devices = []Device{{ID: "pci dev", NUMANode: rng.IntN(4) - 1}}
	}
	return req
}

// TestRandomSequences drives every fixture under every configuration through
// long seeded sequences of creates, resizes, releases and restarts, checking
// the invariants after each step and that a restart moves nothing.
func TestRandomSequences(t *testing.T) {
	steps := 400
	if testing.Short() {
		steps = 100
	}
	configs := randomConfigs()
	for _, name := range allFixtures {
		topo := fixture(t, name)
		for _, cfgName := range slices.Sorted(maps.Keys(configs)) {
			cfg := configs[cfgName]
			t.Run(name+"/"+cfgName, func(t *testing.T) {
				h := fnv.New64a()
				h.Write([]byte(name + "/" + cfgName))
				seed := h.Sum64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 42))
				p, err := New(topo, cfg)
				if err != nil {
					t.Skipf("configuration does not fit the machine: %v", err)
				}
				n := topo.CPUs().Size()
				grantable := p.freeExclusive().Difference(p.broken).Size() > 0
				pods := ids("pod", 6)
				live := map[string]Request{}
				next, grants, restarts := 0, 0, 0
				pools := map[PoolKind]int{}
				for step := range steps {
					what := rng.IntN(11)
					switch {
					case what < 5 || len(live) == 0:
						id := fmt.Sprintf("c%04d", next)
						next++
						req := randomRequest(rng, id, pods, n)
						before := p.Placements()
						pl, changed, err := p.Allocate(req)
						if err != nil {
							assert.Equal(t, before, p.Placements(), "step %d: a failed allocation changed the state", step)
							continue
						}
						live[id] = req
						if pl.Pool == PoolExclusive || pl.Pool == PoolIsolated {
							grants++
						}
						pools[pl.Pool]++
						assert.Equal(t, id, pl.ContainerID)
						assertChangedAreCurrent(t, p, changed)
						assertMovedAreReported(t, before, p, changed, id)
					case what < 7:
						id := pick(rng, live)
						req := randomRequest(rng, id, pods, n)
						// The same pod: the same sandbox, with the pod's sums.
						req.PodUID, req.Pod = live[id].PodUID, live[id].Pod
						req.PodCPURequest, req.PodMemory = live[id].PodCPURequest, live[id].PodMemory
						all := p.Placements()
						before, _ := p.Placement(id)
						pl, changed, err := p.Resize(req)
						if err != nil {
							after, _ := p.Placement(id)
							assert.Equal(t, before, after, "step %d: a failed resize changed the placement", step)
							continue
						}
						live[id] = req
						if before.Pool == PoolExclusive && pl.Pool == PoolExclusive && req.CPU == CPUAuto {
							kept := before.CPUs.Intersection(pl.CPUs).Size()
							assert.Equal(t, min(before.CPUs.Size(), pl.CPUs.Size()), kept, "step %d: resize moved CPUs it could keep", step)
						}
						assertChangedAreCurrent(t, p, changed)
						assertMovedAreReported(t, all, p, changed, id)
					case what < 9:
						id := pick(rng, live)
						all := p.Placements()
						changed := p.Release(id)
						delete(live, id)
						_, found := p.Placement(id)
						assert.False(t, found)
						assertChangedAreCurrent(t, p, changed)
						assertMovedAreReported(t, all, p, changed, id)
					case what < 10:
						p = restart(t, p, topo, cfg)
						restarts++
					default:
						changed, _ := p.ReleasePod(pods[rng.IntN(len(pods))])
						assertChangedAreCurrent(t, p, changed)
					}
					require.NoError(t, p.Check(), "step %d", step)
				}
				// A 2-CPU machine with a CPU reserved has none to grant
				// beside a shared pool.
				if grantable && n >= 4 {
					assert.Positive(t, grants, "no exclusive grant was made")
				}
				if p.podScope() && n >= 4 {
					assert.Positive(t, pools[PoolPodShared], "no container ran on its pod's shared pool")
				}
				t.Logf("placed by pool: %v", pools)
				assert.Positive(t, restarts, "no restart happened")
				for id := range live {
					p.Release(id)
				}
				for _, pod := range pods {
					p.ReleasePod(pod)
				}
				require.NoError(t, p.Check())
				assert.Empty(t, p.Placements())
				assert.Empty(t, p.Snapshot().Pods)
				assert.True(t, p.exclusive.IsEmpty(), "CPUs %q are still granted", p.exclusive)
				assert.Equal(t, p.sharedPool(p.exclusive), p.SharedCPUs())
			})
		}
	}
}

func pick(rng *rand.Rand, live map[string]Request) string {
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[rng.IntN(len(keys))]
}

// assertChangedAreCurrent: the placements reported as changed are the live ones.
func assertChangedAreCurrent(t *testing.T, p *Policy, changed []Placement) {
	t.Helper()
	for _, c := range changed {
		cur, ok := p.Placement(c.ContainerID)
		if assert.True(t, ok) {
			assert.Equal(t, cur, c)
		}
	}
}

// assertMovedAreReported: every container other than the subject whose
// placement an operation changed is among the changes it reported, which
// the plugin sends the runtime as updates.
func assertMovedAreReported(t *testing.T, before []Placement, p *Policy, changed []Placement, subject string) {
	t.Helper()
	for _, old := range before {
		cur, ok := p.Placement(old.ContainerID)
		if !ok || old.ContainerID == subject || (cur.CPUs.Equal(old.CPUs) && cur.Mems.Equal(old.Mems)) {
			continue
		}
		assert.True(t, slices.ContainsFunc(changed, func(c Placement) bool { return c.ContainerID == old.ContainerID }),
			"container %s moved from %q/%q to %q/%q unreported", old.ContainerID, old.CPUs, old.Mems, cur.CPUs, cur.Mems)
	}
}

// restart snapshots p through JSON, restores it into a fresh Policy with
// every container running where it was placed, and checks nothing moved.
func restart(t *testing.T, p *Policy, _ any, cfg Config) *Policy {
	t.Helper()
	data, err := json.Marshal(p.Snapshot())
	require.NoError(t, err)
	var saved Snapshot
	require.NoError(t, json.Unmarshal(data, &saved))
	require.Equal(t, p.Snapshot(), saved, "snapshot does not round-trip through JSON")
	var running []Running
	for _, s := range saved.Containers {
		running = append(running, Running{Request: s.Request, CPUs: s.Placement.CPUs, Mems: s.Placement.Mems})
	}
	fresh := newPolicy(t, p.topo, cfg)
	report := fresh.Restore(saved, running)
	assert.Empty(t, report.Replaced, "restart replaced containers")
	assert.Empty(t, report.Updates, "restart moved containers")
	assert.Empty(t, report.Adopted)
	assert.Empty(t, report.Dropped)
	assert.Empty(t, report.DroppedPods)
	assert.Len(t, report.Kept, len(running))
	assert.Equal(t, p.Placements(), fresh.Placements(), "restart changed placements")
	assert.Equal(t, p.Snapshot(), fresh.Snapshot(), "restart changed the state")
	assert.Equal(t, p.Usage(), fresh.Usage())
	return fresh
}
