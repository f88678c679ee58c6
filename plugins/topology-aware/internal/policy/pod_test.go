package policy

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// inPodOf is a Guaranteed container of pod whose sandbox carries the pod's
// sums (podMilli CPUs, podMemory bytes), as the kubelet sets them.
func inPodOf(pod, id string, milli, memory, podMilli, podMemory int64) Request {
	req := guaranteed(id, milli, memory)
	req.PodUID, req.Pod, req.Container = pod, pod, id
	req.PodCPURequest, req.PodMemory = podMilli, podMemory
	return req
}

// TestPodScopeAdmitsThePod: on snc-2s-4n-80c (4 nodes of 20 CPUs, 52 GiB
// of memory outside hugepages each), the pod scope admits a pod as a unit at
// its first exclusive container, from the pod's sums.
func TestPodScopeAdmitsThePod(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	type step struct {
		req       Request
		wantNodes []int  // the container's affinity
		wantErr   string // substring; the error wraps ErrTopologyAffinity
	}
	tests := []struct {
		name   string
		policy TopologyPolicy
		steps  []step
	}{
		{"a later container finds its pod's CPUs although another pod came between", TopologyRestricted, []step{
			{req: inPodOf("A", "a1", 8000, gib, 16000, 2*gib), wantNodes: []int{0}},
			{req: inPodOf("B", "b1", 8000, gib, 8000, gib), wantNodes: []int{1}}, // node 0 keeps 4 CPUs free, not 8
			{req: inPodOf("A", "a2", 8000, gib, 16000, 2*gib), wantNodes: []int{0}},
		}},
		{"without the pod's sums a later container only follows its first (no reservation)", TopologyRestricted, []step{
			{req: inPodOf("A", "a1", 8000, gib, 0, 0), wantNodes: []int{0}},
			{req: inPodOf("B", "b1", 8000, gib, 0, 0), wantNodes: []int{0}},
			{req: inPodOf("A", "a2", 8000, gib, 0, 0), wantErr: "pod prefers NUMA nodes {0}"},
		}},
		{"single-numa-node refuses a pod larger than a node at its first container", TopologySingleNUMANode, []step{
			{req: inPodOf("A", "a1", 2000, gib, 24000, 2*gib),
				wantErr: "pod default/A (topology manager scope pod: 24 CPUs and 2147483648 bytes of memory for the whole pod): topology manager policy single-numa-node cannot align the resources: cpu fits on no single NUMA node"},
		}},
		{"restricted spreads a pod wider than a node over the narrowest pair", TopologyRestricted, []step{
			{req: inPodOf("A", "a1", 10000, gib, 30000, 60*gib), wantNodes: []int{0, 1}},
			{req: inPodOf("A", "a2", 20000, gib, 30000, 60*gib), wantNodes: []int{0, 1}},
		}},
		{"restricted refuses a pod whose CPUs prefer two nodes and memory one, as the kubelet", TopologyRestricted, []step{
			{req: inPodOf("A", "a1", 10000, gib, 30000, 2*gib),
				wantErr: "cpu prefers NUMA nodes {0,1} or {0,2} or {1,2} or {0,3}; memory prefers NUMA nodes {0} or {1} or {2} or {3}"},
		}},
		{"best-effort admits it on the narrowest pair", TopologyBestEffort, []step{
			{req: inPodOf("A", "a1", 10000, gib, 30000, 2*gib), wantNodes: []int{0, 1}},
		}},
		{"the whole pod's memory widens the affinity", TopologyBestEffort, []step{
			{req: inPodOf("A", "a1", 2000, gib, 4000, 60*gib), wantNodes: []int{0, 1}},
		}},
		{"the pod's memory keeps another pod off its node", TopologySingleNUMANode, []step{
			{req: inPodOf("A", "a1", 2000, gib, 2000, 50*gib), wantNodes: []int{0}},
			{req: inPodOf("B", "b1", 2000, 4*gib, 2000, 4*gib), wantNodes: []int{1}},
		}},
		{"a container beyond its pod's reservation takes the rest on the pod's affinity", TopologyRestricted, []step{
			{req: inPodOf("A", "a1", 4000, gib, 4000, gib), wantNodes: []int{0}},
			{req: inPodOf("A", "a2", 2000, 2*gib, 4000, gib), wantNodes: []int{0}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, snc, Config{TopologyPolicy: tt.policy, TopologyScope: ScopePod})
			for i, s := range tt.steps {
				before := p.Snapshot()
				pl, _, err := p.Allocate(s.req)
				if s.wantErr != "" {
					require.ErrorIs(t, err, ErrTopologyAffinity, "step %d", i)
					assert.Contains(t, err.Error(), s.wantErr, "step %d", i)
					assert.Equal(t, before, p.Snapshot(), "step %d: a refused container changed the state", i)
					continue
				}
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, s.wantNodes, pl.NUMANodes, "step %d", i)
				assert.Subset(t, s.wantNodes, nodesOf(snc, pl.CPUs), "step %d: CPUs %q outside the affinity", i, pl.CPUs)
				assert.Subset(t, s.wantNodes, pl.Mems.List(), "step %d: mems %q outside the affinity", i, pl.Mems)
				require.NoError(t, p.Check(), "step %d", i)
			}
		})
	}
}

// TestPodScopeReservation: what a pod holds, and until when.
func TestPodScopeReservation(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	all := snc.CPUs().Size()
	tests := []struct {
		name     string
		cfg      Config
		reserves bool
	}{
		{"restricted reserves", Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod}, true},
		{"best-effort reserves", Config{TopologyPolicy: TopologyBestEffort, TopologyScope: ScopePod}, true},
		{"policy none has no pod scope, as the kubelet", Config{TopologyPolicy: TopologyNone, TopologyScope: ScopePod}, false},
		{"container scope does not reserve", Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopeContainer}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, snc, tt.cfg)
			_, _, err := p.Allocate(burstable("shared", 500))
			require.NoError(t, err)
			a1, _, err := p.Allocate(inPodOf("A", "a1", 4000, gib, 8000, 4*gib))
			require.NoError(t, err)
			require.NoError(t, p.Check())
			if !tt.reserves {
				assert.Empty(t, p.Snapshot().Pods)
				assert.Equal(t, all-4, p.freeExclusive().Size())
				return
			}
			pods := p.Snapshot().Pods
			require.Len(t, pods, 1)
			assert.Equal(t, "A", pods[0].PodUID)
			assert.Equal(t, 8, pods[0].CPUs.Size())
			assert.True(t, a1.CPUs.IsSubsetOf(pods[0].CPUs), "grant %q outside the pod's CPUs %q", a1.CPUs, pods[0].CPUs)
			assert.Equal(t, all-8, p.freeExclusive().Size(), "the whole pod's CPUs are held")
			assert.True(t, p.SharedCPUs().Intersection(pods[0].CPUs).IsEmpty(), "the shared pool keeps reserved CPUs")
			assert.Equal(t, uint64(4*gib), p.Usage()[nodeRow(t, p, pods[0].MemoryNodes[0])].MemoryGranted, "the pod's memory is held")

			// A container that stops gives its CPUs back to its pod, and its
			// replacement gets them again.
			p.Release("a1")
			assert.Equal(t, all-8, p.freeExclusive().Size())
			again, _, err := p.Allocate(inPodOf("A", "a1-restarted", 4000, gib, 8000, 4*gib))
			require.NoError(t, err)
			assert.Equal(t, a1.CPUs, again.CPUs)

			// Released while a container runs: it goes with that container.
			changed, held := p.ReleasePod("A")
			assert.True(t, held)
			assert.Empty(t, changed)
			assert.Equal(t, all-8, p.freeExclusive().Size())
			require.NoError(t, p.Check())
			changed = p.Release("a1-restarted")
			require.NoError(t, p.Check())
			assert.Equal(t, all, p.freeExclusive().Size())
			assert.Empty(t, p.Snapshot().Pods)
			assert.Empty(t, p.pods["A"])
			require.Len(t, changed, 1)
			assert.Equal(t, "shared", changed[0].ContainerID)
			assert.True(t, pods[0].CPUs.IsSubsetOf(changed[0].CPUs), "the shared container gets the pod's CPUs back")
			for _, row := range p.Usage() {
				assert.Zero(t, row.MemoryGranted, "node %d", row.Node)
			}
			_, held = p.ReleasePod("A")
			assert.False(t, held, "a released pod holds nothing")
		})
	}
}

// nodeRow is the index of the exclusive pool's usage row of node.
func nodeRow(t *testing.T, p *Policy, node int) int {
	t.Helper()
	for i, row := range p.Usage() {
		if row.Node == node && row.Pool == PoolExclusive {
			return i
		}
	}
	t.Fatalf("no exclusive row for node %d", node)
	return -1
}

// TestPodScopeRestart: a reservation survives a restart as it was, and one
// whose CPUs are no longer free is dropped with the reason.
func TestPodScopeRestart(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	cfg := Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod}
	p := newPolicy(t, snc, cfg)
	_, _, err := p.Allocate(inPodOf("A", "a1", 4000, 2*gib, 8000, 4*gib))
	require.NoError(t, err)
	_, _, err = p.Allocate(inPodOf("B", "b1", 2000, gib, 2000, gib))
	require.NoError(t, err)
	_, held := p.ReleasePod("B") // closing: goes with b1
	require.True(t, held)
	data, err := json.Marshal(p.Snapshot())
	require.NoError(t, err)
	var saved Snapshot
	require.NoError(t, json.Unmarshal(data, &saved))
	require.Equal(t, p.Snapshot(), saved)
	var running []Running
	for _, c := range saved.Containers {
		running = append(running, Running{Request: c.Request, CPUs: c.Placement.CPUs, Mems: c.Placement.Mems})
	}

	tests := []struct {
		name        string
		cfg         Config
		running     []Running
		wantPods    []string
		wantDropped map[string]string
	}{
		{"everything kept", cfg, running, []string{"A", "B"}, nil},
		{"a closing pod without containers goes", cfg, running[:1], []string{"A"}, nil},
		{"reserved CPUs taken by the configuration", Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod,
			ReservedCPUs: saved.Pods[0].CPUs}, nil, nil,
			map[string]string{"A": "CPUs \"" + saved.Pods[0].CPUs.String() + "\" are not free in the exclusive pool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := newPolicy(t, snc, tt.cfg)
			report := fresh.Restore(saved, tt.running)
			require.NoError(t, fresh.Check())
			var got []string
			for _, pod := range fresh.Snapshot().Pods {
				got = append(got, pod.PodUID)
			}
			assert.Equal(t, tt.wantPods, got)
			require.Len(t, report.DroppedPods, len(tt.wantDropped))
			for uid, why := range tt.wantDropped {
				assert.Contains(t, report.DroppedPods[uid], why)
			}
			if len(tt.running) == len(running) {
				assert.Equal(t, p.Snapshot(), fresh.Snapshot(), "a restart changed the state")
				assert.Equal(t, p.Usage(), fresh.Usage())
			}
		})
	}
}

// TestPodScopeGrantRestoredOnReservation: a kept container whose grant lies
// in its pod's reservation is accounted on it, not taken twice.
func TestPodScopeGrantRestoredOnReservation(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	cfg := Config{TopologyPolicy: TopologySingleNUMANode, TopologyScope: ScopePod}
	p := newPolicy(t, snc, cfg)
	pl, _, err := p.Allocate(inPodOf("A", "a1", 20000, 40*gib, 20000, 40*gib)) // the whole of node 0
	require.NoError(t, err)
	require.Equal(t, snc.CPUsOfNode(0), pl.CPUs)
	fresh := newPolicy(t, snc, cfg)
	report := fresh.Restore(p.Snapshot(), []Running{{Request: pl2req(t, p, "a1"), CPUs: pl.CPUs, Mems: pl.Mems}})
	assert.Equal(t, []string{"a1"}, report.Kept)
	assert.Empty(t, report.DroppedPods)
	require.NoError(t, fresh.Check())
	assert.Equal(t, p.Usage(), fresh.Usage())
	assert.Equal(t, cpuset.CPUSet{}, fresh.exclusive.Difference(snc.CPUsOfNode(0)))
}

func pl2req(t *testing.T, p *Policy, id string) Request {
	t.Helper()
	for _, c := range p.Snapshot().Containers {
		if c.Request.ContainerID == id {
			return c.Request
		}
	}
	t.Fatalf("no container %s", id)
	return Request{}
}

// podLevel is a container of a Guaranteed pod with pod-level resources
// (podMilli CPUs, podMemory bytes) and none of its own: the runtime shows
// it the minimum cpu shares and the pod's limits, as the kubelet sets them.
func podLevel(pod, id string, podMilli, podMemory int64) Request {
	req := inPodOf(pod, id, 0, podMemory, podMilli, podMemory)
	req.CPULimit = podMilli
	return req
}

// TestPodSharedPool: under the pod scope, the containers of a Guaranteed
// pod with pod-level resources that have no exclusive CPUs of their own run
// on the CPUs of the pod's reservation that its exclusive containers do not
// hold (the kubelet's pod shared pool, KEP-5526), and follow them; a
// container whose grant would leave them none is refused, as the kubelet
// refuses such a pod. Under the container scope they run on the node's
// shared pool.
func TestPodSharedPool(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	p := newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod})
	// The sidecar comes first: it reserves the pod and has all of it.
	side, changed, err := p.Allocate(podLevel("P", "side", 4000, 4*gib))
	require.NoError(t, err)
	assert.Empty(t, changed)
	assert.Equal(t, PoolPodShared, side.Pool, side.Reason)
	assert.Equal(t, 4, side.CPUs.Size())
	assert.Equal(t, []int{0}, nodesOf(snc, side.CPUs))
	assert.Equal(t, "0", side.Mems.String(), "the pod's memory nodes")
	assert.Zero(t, side.Memory, "its memory is the pod's")
	pod := p.Snapshot().Pods
	require.Len(t, pod, 1)
	assert.Equal(t, side.CPUs, pod[0].CPUs, "the pod's reservation")

	// An exclusive container takes its CPUs from the reservation, and the
	// sidecar is moved off them in the same call.
	appReq := inPodOf("P", "app", 2000, gib, 4000, 4*gib)
	appReq.CPULimit = 2000
	app, changed, err := p.Allocate(appReq)
	require.NoError(t, err)
	assert.Equal(t, PoolExclusive, app.Pool)
	assert.True(t, app.CPUs.IsSubsetOf(side.CPUs), "%q from the pod's %q", app.CPUs, side.CPUs)
	require.Len(t, changed, 1)
	assert.Equal(t, "side", changed[0].ContainerID)
	assert.Equal(t, side.CPUs.Difference(app.CPUs), changed[0].CPUs)
	require.NoError(t, p.Check())

	// A second sidecar shares what is left.
	side2, _, err := p.Allocate(podLevel("P", "side2", 4000, 4*gib))
	require.NoError(t, err)
	assert.Equal(t, changed[0].CPUs, side2.CPUs)

	// A grant that would take the rest is refused.
	moreReq := inPodOf("P", "more", 2000, gib, 4000, 4*gib)
	moreReq.CPULimit = 2000
	_, _, err = p.Allocate(moreReq)
	require.ErrorIs(t, err, ErrInsufficientCPUs)
	assert.ErrorContains(t, err, "which would leave none of its pod's 4 CPUs for the pod's 2 containers without exclusive CPUs")

	// A restart moves nothing.
	p = restart(t, p, snc, Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod})

	// The exclusive container goes: the sidecars get its CPUs back.
	changed = p.Release("app")
	require.Len(t, changed, 2)
	for _, c := range changed {
		assert.Equal(t, side.CPUs, c.CPUs, "%s", c.ContainerID)
	}
	require.NoError(t, p.Check())

	// A container of its own resources but not Guaranteed on its own (its
	// limit is the pod's) is no exclusive container.
	half := inPodOf("P", "half", 1000, gib, 4000, 4*gib)
	half.CPULimit = 4000
	pl, _, err := p.Allocate(half)
	require.NoError(t, err)
	assert.Equal(t, PoolPodShared, pl.Pool)

	// The container scope: the node's shared pool.
	c := newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted})
	pl, _, err = c.Allocate(podLevel("P", "side", 4000, 4*gib))
	require.NoError(t, err)
	assert.Equal(t, PoolShared, pl.Pool)
	assert.Equal(t, c.SharedCPUs(), pl.CPUs)
}

// TestPodSharedPoolRefusedWhenGrantsTakeThePod: exclusive containers that
// hold the whole pod leave nothing for a later container without exclusive
// CPUs, which is refused.
func TestPodSharedPoolRefusedWhenGrantsTakeThePod(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	p := newPolicy(t, snc, Config{TopologyPolicy: TopologyBestEffort, TopologyScope: ScopePod})
	appReq := inPodOf("P", "app", 4000, gib, 4000, 4*gib)
	_, _, err := p.Allocate(appReq)
	require.NoError(t, err)
	_, _, err = p.Allocate(podLevel("P", "side", 4000, 4*gib))
	require.ErrorIs(t, err, ErrInsufficientCPUs)
	assert.ErrorContains(t, err, "no CPU of its pod's 4 CPUs on NUMA nodes {0} is left for its containers without exclusive CPUs")
	require.NoError(t, p.Check())
}

// TestWholePodContainers: a container without resources of its own in a
// Guaranteed pod with pod-level limits reads as requesting the whole pod
// (the kubelet gives it the pod's limits, and cpu shares from the pod's CPU
// limit), as the only container of a pod without them does. It gets the
// pod's exclusive CPUs until the pod shows that it has pod-level resources
// (another container beside it); then it is placed again, in the same call,
// where the kubelet 1.37 puts it: the shared pool, or the pod's under the
// pod scope.
func TestWholePodContainers(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	whole := func(id string) Request { return inPodOf("P", id, 4000, 4*gib, 4000, 4*gib) }
	t.Run("container scope", func(t *testing.T) {
		p := newPolicy(t, snc, Config{})
		only, _, err := p.Allocate(whole("sidecar"))
		require.NoError(t, err)
		assert.Equal(t, PoolExclusive, only.Pool, "alone, it is taken for a pod's only container")
		// A second container of the pod: the pod has pod-level resources.
		second, changed, err := p.Allocate(whole("tool"))
		require.NoError(t, err)
		assert.Equal(t, PoolShared, second.Pool)
		moved := slices.IndexFunc(changed, func(c Placement) bool { return c.ContainerID == "sidecar" })
		require.GreaterOrEqual(t, moved, 0, "the first one is placed again in the same call: %v", changed)
		assert.Equal(t, PoolShared, changed[moved].Pool)
		assert.Equal(t, p.SharedCPUs(), changed[moved].CPUs)
		assert.Contains(t, changed[moved].Reason, "its pod showed that it has pod-level resources")
		// A container Guaranteed on its own keeps its exclusive CPUs.
		app, _, err := p.Allocate(inPodOf("P", "app", 2000, gib, 4000, 4*gib))
		require.NoError(t, err)
		assert.Equal(t, PoolExclusive, app.Pool)
		require.NoError(t, p.Check())
		restart(t, p, snc, Config{})
	})
	t.Run("pod scope", func(t *testing.T) {
		cfg := Config{TopologyPolicy: TopologyRestricted, TopologyScope: ScopePod}
		p := newPolicy(t, snc, cfg)
		first, _, err := p.Allocate(whole("sidecar"))
		require.NoError(t, err)
		assert.Equal(t, PoolExclusive, first.Pool)
		app, changed, err := p.Allocate(inPodOf("P", "app", 2000, gib, 4000, 4*gib))
		require.NoError(t, err)
		assert.Equal(t, PoolExclusive, app.Pool)
		assert.True(t, app.CPUs.IsSubsetOf(first.CPUs), "the app's CPUs %q come from the pod's %q", app.CPUs, first.CPUs)
		require.Len(t, changed, 1, "%v", changed)
		assert.Equal(t, PoolPodShared, changed[0].Pool)
		assert.Equal(t, 2, changed[0].CPUs.Size())
		assert.Equal(t, first.CPUs.Difference(app.CPUs), changed[0].CPUs, "the pod's CPUs the app does not hold")
		require.NoError(t, p.Check())
		restart(t, p, snc, cfg)
	})
}
