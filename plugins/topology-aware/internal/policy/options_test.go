package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReservedNamespaces: a Guaranteed container with an integer CPU
// request in a reserved namespace gets exclusive CPUs, as the kubelet gives
// them, unless the configuration keeps it on the reserved CPUs: then it is
// refused when they are fewer than its request, or allowed with a warning.
// It is never squeezed silently.
func TestReservedNamespaces(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c")
	system := func(id string, milli int64) Request {
		req := guaranteed(id, milli, gib)
		req.Namespace = "kube-system"
		return req
	}
	burstableSystem := burstable("dns", 100)
	burstableSystem.Namespace = "kube-system"
	tests := []struct {
		name        string
		mode        ReservedGuaranteed
		reserved    int
		req         Request
		wantPool    PoolKind
		wantWarning string
		wantErr     []string
	}{
		{name: "default: exclusive, as the kubelet", reserved: 2, req: system("etcd", 4000), wantPool: PoolExclusive},
		{name: "a Burstable container stays on the reserved CPUs", reserved: 2, req: burstableSystem, wantPool: PoolReserved},
		{name: "a fractional Guaranteed container stays on the reserved CPUs", reserved: 2, req: system("proxy", 500), wantPool: PoolReserved},
		{name: "reserved: refused when the reserved CPUs are fewer", mode: ReservedGuaranteedReserved, reserved: 2, req: system("etcd", 4000),
			wantErr: []string{"container kube-system/pod-etcd/c: a Guaranteed request of 4 CPUs in namespace kube-system, which reserved-namespaces-guaranteed: reserved keeps on the 2 reserved CPUs",
				"fewer than it requests: reserve more CPUs, or set reserved-namespaces-guaranteed: exclusive"}},
		{name: "reserved: as many as requested fit", mode: ReservedGuaranteedReserved, reserved: 4, req: system("etcd", 4000), wantPool: PoolReserved},
		{name: "reserved-allow-fewer: allowed with a warning", mode: ReservedGuaranteedAllowFewer, reserved: 2, req: system("etcd", 4000),
			wantPool: PoolReserved, wantWarning: "a Guaranteed request of 4 CPUs in namespace kube-system, which reserved-namespaces-guaranteed: reserved-allow-fewer keeps on the 2 reserved CPUs"},
		{name: "reserved with nothing reserved: the shared pool, as large as it is", mode: ReservedGuaranteedReserved, req: system("etcd", 4000), wantPool: PoolShared},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t, snc, Config{ReservedCPUCount: tc.reserved, ReservedNamespaces: []string{"kube-system"}, ReservedGuaranteed: tc.mode})
			pl, _, err := p.Allocate(tc.req)
			require.NoError(t, p.Check())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, ErrInsufficientCPUs)
				for _, want := range tc.wantErr {
					assert.ErrorContains(t, err, want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantPool, pl.Pool, pl.Reason)
			if tc.wantWarning == "" {
				assert.Empty(t, pl.Warning)
			} else {
				assert.Contains(t, pl.Warning, tc.wantWarning)
			}
			if pl.Pool == PoolExclusive {
				assert.Equal(t, int(tc.req.CPURequest/1000), pl.CPUs.Size())
				assert.True(t, pl.CPUs.Intersection(p.reserved).IsEmpty(), "exclusive CPUs %q overlap the reserved %q", pl.CPUs, p.reserved)
			}
		})
	}
}

// TestAlignBySocket: the kubelet's align-by-socket prefers CPU hints that
// span as few sockets as the request needs, so that restricted admits CPUs
// aligned with devices on two nodes of one socket, which it refuses without
// the option; the grant takes CPUs of that socket.
func TestAlignBySocket(t *testing.T) {
	snc := fixture(t, "snc-2s-4n-80c") // nodes 0,1 on socket 0
	req := withDevices(guaranteed("a", 2000, 0), 0, 1)
	p := newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted})
	_, _, err := p.Allocate(req)
	require.ErrorIs(t, err, ErrTopologyAffinity)
	p = newPolicy(t, snc, Config{TopologyPolicy: TopologyRestricted, AlignBySocket: true})
	pl, _, err := p.Allocate(req)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, pl.NUMANodes)
	assert.True(t, pl.CPUs.IsSubsetOf(snc.CPUsOfSocket(0)), "%q", pl.CPUs)
	assert.Len(t, nodesOf(snc, pl.CPUs), 1, "and within one node of it: %q", pl.CPUs)
	require.NoError(t, p.Check())

	_, err = New(snc, Config{TopologyPolicy: TopologySingleNUMANode, AlignBySocket: true})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "option align-by-socket cannot be used with topology policy single-numa-node")
	_, err = New(kubeletTopology(t, "topoUncoreDualSocketNoSMT"), Config{AlignBySocket: true})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "needs at least as many NUMA nodes as sockets, as the kubelet: this machine has 2 sockets and 1 NUMA nodes")
}

// TestMaxAllowableNUMANodes: as the kubelet, a topology policy other than
// none is refused on a machine with more NUMA nodes (CPU-less ones counted)
// than max-allowable-numa-nodes, 8 unless raised, never below 8.
func TestMaxAllowableNUMANodes(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless") // 12 nodes, 8 with CPUs
	_, err := New(nps, Config{TopologyPolicy: TopologyRestricted})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, `topology policy "restricted" on a machine with 12 NUMA nodes (8 with CPUs): more than max-allowable-numa-nodes 8`)
	_, err = New(nps, Config{TopologyPolicy: TopologyRestricted, MaxAllowableNUMANodes: 12})
	require.NoError(t, err)
	_, err = New(nps, Config{})
	require.NoError(t, err, "policy none does not count nodes")
	_, err = New(nps, Config{MaxAllowableNUMANodes: 4})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorContains(t, err, "max-allowable-numa-nodes 4: expected at least 8")
}
