package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// staticCase is a case of the kubelet's policy_static_test.go
// (TestStaticPolicyAdd, TestStaticPolicyAddWithResvList): a state of
// exclusive assignments and a default (shared) cpuset, one more Guaranteed
// container, and the kubelet's answer.
type staticCase struct {
	name        string
	topo        string
	numReserved int
	reserved    cpuset.CPUSet // explicit, else numReserved chosen as the kubelet does
	fullPCPUs   bool
	assigned    map[string]cpuset.CPUSet
	def         cpuset.CPUSet
	id          string // the container; one of assigned for a repeated Add
	milli       int64
	want        cpuset.CPUSet
	wantErr     string // a substring of the error; the error wraps ErrInsufficientCPUs
}

func cpus(ids ...int) cpuset.CPUSet { return cpuset.New(ids...) }

// policy builds the policy in the case's state, with the kubelet's own
// packing (option kubelet-packing): the CPUs the kubelet knows (default
// cpuset, assignments, reserved) are the available ones, and the
// assignments are running containers adopted where they run.
func (c staticCase) policy(t *testing.T) *Policy {
	t.Helper()
	topo := kubeletTopology(t, c.topo)
	reserved := c.reserved
	if reserved.IsEmpty() && c.numReserved > 0 {
		var err error
		reserved, err = newMachine(topo).takeByTopology(topo.CPUs(), c.numReserved, assignOptions{})
		require.NoError(t, err)
	}
	available := c.def.Union(reserved)
	var running []Running
	for id, set := range c.assigned {
		available = available.Union(set)
		if !set.IsEmpty() {
			running = append(running, Running{Request: guaranteed(id, int64(set.Size())*1000, 0), CPUs: set})
		}
	}
	p := newPolicy(t, topo, Config{AvailableCPUs: available, ReservedCPUs: reserved, FullPCPUsOnly: c.fullPCPUs, KubeletPacking: true})
	report := p.Restore(Snapshot{}, running)
	require.Len(t, report.Adopted, len(running), "the kubelet's state must be adopted as it is: %+v", report)
	return p
}

func TestKubeletStaticPolicyAdd(t *testing.T) {
	quad := kubeletTopology(t, "topoQuadSocketFourWayHT")
	all, sock0, sock1 := quad.CPUs(), quad.CPUsOfSocket(0), quad.CPUsOfSocket(1)
	insensitive := []staticCase{
		{name: "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", topo: "topoSingleSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(2, 3, 6, 7)}, def: cpus(0, 1, 4, 5),
			milli: 2000, want: cpus(1, 5)},
		{name: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", topo: "topoDualSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(2)}, def: cpus(0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11),
			milli: 6000, want: cpus(1, 3, 5, 7, 9, 11)},
		{name: "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", topo: "topoDualSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(1, 5)}, def: cpus(0, 2, 3, 4, 6, 7, 8, 9, 10, 11),
			milli: 6000, want: cpus(2, 3, 4, 8, 9, 10)},
		{name: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket", topo: "topoDualSocketNoHT", numReserved: 1,
			def: cpus(0, 1, 3, 4, 5, 6, 7), milli: 4000, want: cpus(4, 5, 6, 7)},
		{name: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores", topo: "topoDualSocketNoHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(4, 5)}, def: cpus(0, 1, 3, 6, 7),
			milli: 4000, want: cpus(1, 3, 6, 7)},
		{name: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore", topo: "topoDualSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(2)}, def: cpus(0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11),
			milli: 8000, want: cpus(1, 3, 4, 5, 7, 9, 10, 11)},
		{name: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0", topo: "topoQuadSocketFourWayHT",
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(3, 11, 4, 5, 6, 7)},
			def:      all.Difference(cpus(3, 11, 4, 5, 6, 7)), milli: 72000, want: sock0},
		{name: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets", topo: "topoQuadSocketFourWayHT",
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": all.Difference(cpus(1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61))},
			def:      cpus(1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61),
			milli:    12000, want: cpus(1, 25, 13, 38, 11, 35, 23, 48, 53, 173, 113, 233)},
		{name: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore", topo: "topoQuadSocketFourWayHT",
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": all.Difference(sock1.Union(cpus(10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235)))},
			def:      sock1.Union(cpus(10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235)),
			milli:    76000, want: sock1.Union(cpus(10, 34, 22, 47))},
	}
	var cases []staticCase
	for _, c := range insensitive {
		for _, full := range []bool{false, true} {
			c.fullPCPUs = full
			c.name = fmt.Sprintf("full-pcpus-only=%v %s", full, c.name)
			cases = append(cases, c)
		}
	}
	cases = append(cases,
		staticCase{name: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", topo: "topoSingleSocketHT", numReserved: 1,
			def: cpus(0, 1, 2, 3, 4, 5, 6, 7), milli: 1000, want: cpus(4)},
		staticCase{name: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs", topo: "topoQuadSocketFourWayHT",
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": all.Difference(cpus(10, 11, 53, 37, 55, 67, 52))},
			def:      cpus(10, 11, 53, 67, 52), milli: 5000, want: cpus(10, 11, 53, 67, 52)},
		staticCase{name: "GuPodSingleCore, SingleSocketHT, ExpectError", topo: "topoSingleSocketHT", numReserved: 1,
			def: cpus(0, 1, 2, 3, 4, 5, 6, 7), milli: 8000, wantErr: "8 exclusive CPUs requested, 7 free"},
		staticCase{name: "GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation", topo: "topoSingleSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer3": cpus(2, 3, 6, 7)}, def: cpus(0, 1, 4, 5),
			id: "fakeContainer3", milli: 4000, want: cpus(2, 3, 6, 7)},
		staticCase{name: "GuPodMultipleCores, DualSocketHT, NoAllocExpectError", topo: "topoDualSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(1, 2, 3)}, def: cpus(0, 4, 5, 6, 7, 8, 9, 10, 11),
			milli: 10000, wantErr: "10 exclusive CPUs requested, 8 free"},
		staticCase{name: "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", topo: "topoSingleSocketHT", numReserved: 1,
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(1, 2, 3, 4, 5, 6)}, def: cpus(0, 7),
			milli: 2000, wantErr: "2 exclusive CPUs requested, 1 free"},
		staticCase{name: "GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc", topo: "topoQuadSocketFourWayHT",
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": all.Difference(cpus(10, 11, 53, 37, 55, 67, 52))},
			def:      cpus(10, 11, 53, 37, 55, 67, 52), milli: 76000, wantErr: "76 exclusive CPUs requested, 7 free"},
		// FullPCPUsOnly.
		staticCase{name: "full-pcpus-only GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", topo: "topoSingleSocketHT", numReserved: 1,
			fullPCPUs: true, def: cpus(0, 1, 2, 3, 4, 5, 6, 7), milli: 1000, wantErr: "request a multiple of 2"},
		staticCase{name: "full-pcpus-only GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs", topo: "topoQuadSocketFourWayHT",
			numReserved: 8, fullPCPUs: true, def: all, milli: 15000, wantErr: "request a multiple of 4"},
		staticCase{name: "full-pcpus-only GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU", topo: "topoDualSocketHT",
			reserved: cpus(1, 6), fullPCPUs: true, def: cpus(0, 2, 3, 4, 5, 7, 8, 9, 10, 11), milli: 10000,
			wantErr: "10 exclusive CPUs requested, 8 free"},
		staticCase{name: "full-pcpus-only GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs", topo: "topoDualSocketHT",
			numReserved: 2, fullPCPUs: true, def: cpus(1, 2, 3, 4, 5, 7, 8, 9, 10, 11), milli: 10000,
			want: cpus(1, 2, 3, 4, 5, 7, 8, 9, 10, 11)},
		staticCase{name: "full-pcpus-only GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs", topo: "topoDualSocketHT",
			reserved: cpus(0, 6), fullPCPUs: true, def: cpus(1, 2, 3, 4, 5, 7, 8, 9, 10, 11), milli: 10000,
			want: cpus(1, 2, 3, 4, 5, 7, 8, 9, 10, 11)},
		staticCase{name: "full-pcpus-only GuPodManyCores, DualSocketHT, ExpectReAllocCPUs", topo: "topoDualSocketHT",
			reserved: cpus(0, 1, 6, 7), fullPCPUs: true, assigned: map[string]cpuset.CPUSet{"fakeContainer": cpus(2, 3, 4, 8, 9, 10)},
			def: cpus(0, 1, 5, 6, 7, 11), id: "fakeContainer", milli: 6000, want: cpus(2, 3, 4, 8, 9, 10)},
		staticCase{name: "full-pcpus-only GuPodManyCores, DualSocketHT, NotEnoughAvailable, NoAlloc", topo: "topoDualSocketHT",
			reserved: cpus(0, 1, 6, 7), fullPCPUs: true, def: cpus(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), milli: 10000,
			wantErr: "10 exclusive CPUs requested, 8 free"},
		// TestStaticPolicyAddWithResvList.
		staticCase{name: "ResvList GuPodSingleCore, SingleSocketHT, ExpectError", topo: "topoSingleSocketHT", reserved: cpus(0),
			def: cpus(0, 1, 2, 3, 4, 5, 6, 7), milli: 8000, wantErr: "8 exclusive CPUs requested, 7 free"},
		staticCase{name: "ResvList GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", topo: "topoSingleSocketHT", reserved: cpus(0, 1),
			def: cpus(0, 1, 2, 3, 4, 5, 6, 7), milli: 1000, want: cpus(4)},
		staticCase{name: "ResvList GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", topo: "topoSingleSocketHT", reserved: cpus(0, 1),
			assigned: map[string]cpuset.CPUSet{"fakeContainer100": cpus(2, 3, 6, 7)}, def: cpus(0, 1, 4, 5), milli: 2000, want: cpus(4, 5)},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.policy(t)
			id := c.id
			if id == "" {
				id = "new"
			}
			before := p.Placements()
			pl, _, err := p.Allocate(guaranteed(id, c.milli, 0))
			if c.wantErr != "" {
				require.ErrorIs(t, err, ErrInsufficientCPUs)
				assert.Contains(t, err.Error(), c.wantErr)
				assert.Equal(t, before, p.Placements())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want.String(), pl.CPUs.String())
			assert.True(t, pl.CPUs.Intersection(p.SharedCPUs()).IsEmpty(), "grant %q overlaps the shared pool %q", pl.CPUs, p.SharedCPUs())
			require.NoError(t, p.Check())
		})
	}
}

// TestKubeletTopologyAwareAllocateCPUs: the kubelet's
// TestTopologyAwareAllocateCPUs, CPUs of the admitted NUMA node first.
func TestKubeletTopologyAwareAllocateCPUs(t *testing.T) {
	p := newPolicy(t, kubeletTopology(t, "topoDualSocketHT"), Config{KubeletPacking: true})
	for _, c := range []struct {
		name     string
		n        int
		affinity numaMask
		want     cpuset.CPUSet
	}{
		{"Request 2 CPUs, No BitMask", 2, 0, cpus(0, 6)},
		{"Request 2 CPUs, BitMask on Socket 0", 2, maskOf(0), cpus(0, 6)},
		{"Request 2 CPUs, BitMask on Socket 1", 2, maskOf(1), cpus(1, 7)},
		{"Request 8 CPUs, BitMask on Socket 0", 8, maskOf(0), cpus(0, 6, 2, 8, 4, 10, 1, 7)},
		{"Request 8 CPUs, BitMask on Socket 1", 8, maskOf(1), cpus(1, 7, 3, 9, 5, 11, 0, 6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.chooseCPUs(c.n, c.affinity, p.freeExclusive(), cpuset.CPUSet{}, cpuset.CPUSet{})
			require.NoError(t, err)
			assert.Equal(t, c.want.String(), got.String())
		})
	}
}
