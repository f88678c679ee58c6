package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

func TestNewRejectsBadConfig(t *testing.T) {
	smt := fixture(t, "smt-1s-8c")
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"reserved outside available", Config{AvailableCPUs: cpuset.New(0, 1, 2, 3), ReservedCPUs: cpuset.New(4)},
			`reserved CPUs "4" include "4", outside the available CPUs "0-3"`},
		{"reserved set and count", Config{ReservedCPUs: cpuset.New(0), ReservedCPUCount: 2},
			`both reserved CPUs "0" and a reserved CPU count 2 are set`},
		{"available not on the machine", Config{AvailableCPUs: cpuset.New(0, 64)}, `include "64", which are not CPUs of the machine`},
		{"reserving more than available", Config{ReservedCPUCount: 9}, "reserving 9 CPUs out of the available"},
		{"negative reserved count", Config{ReservedCPUCount: -1}, "reserved CPU count -1 is negative"},
		{"strict reservation of everything", Config{ReservedCPUCount: 8, StrictReservation: true}, "no CPU is left for the shared pool"},
		{"unknown topology policy", Config{TopologyPolicy: "strict"}, `topology policy "strict": expected none, best-effort, restricted or single-numa-node`},
		{"unknown scope", Config{TopologyScope: "node"}, `topology scope "node": expected container or pod`},
		{"full-pcpus-only with spread", Config{FullPCPUsOnly: true, SpreadAcrossCores: true}, "full-pcpus-only and spread-across-cores cannot be used together"},
		{"distribute with spread", Config{DistributeAcrossNUMA: true, SpreadAcrossCores: true}, "distribute-across-numa and spread-across-cores"},
		{"uncore with spread", Config{AlignByUncoreCache: true, SpreadAcrossCores: true}, "align-by-uncore-cache and spread-across-cores"},
		{"uncore with distribute", Config{AlignByUncoreCache: true, DistributeAcrossNUMA: true}, "align-by-uncore-cache and distribute-across-numa"},
		{"reserved memory on an unknown node", Config{ReservedMemory: map[int]uint64{7: 1}}, "reserved memory for NUMA node 7"},
		{"reserved memory beyond the node", Config{ReservedMemory: map[int]uint64{0: 1 << 50}}, "reserved memory on NUMA node 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(smt, tt.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
			assert.Nil(t, p)
		})
	}
	_, err := New(nil, Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestBadRequests(t *testing.T) {
	smt := fixture(t, "smt-1s-8c")
	tests := []struct {
		name    string
		req     Request
		wantErr error
		want    string
	}{
		{"larger than the machine", guaranteed("big", 64000, 0), ErrInsufficientCPUs, "64 exclusive CPUs requested, 7 free"},
		{"absurdly large", guaranteed("absurd", 1<<40, 0), ErrInvalidRequest, "larger than any machine"},
		{"negative request", Request{ContainerID: "n", QOS: k8s.QOSBurstable, CPURequest: -5}, ErrInvalidRequest, "negative CPU request -5"},
		{"no container id", guaranteed("", 1000, 0), ErrInvalidRequest, "no container id"},
		{"unknown CPU preference", func() Request { r := guaranteed("p", 1000, 0); r.CPU = "fast"; return r }(),
			ErrInvalidRequest, `CPU preference "fast": expected`},
		{"bad hugepages", func() Request { r := guaranteed("h", 1000, 0); r.HugePages = map[uint64]int64{0: 5}; return r }(),
			ErrInvalidRequest, "hugepages of 0 bytes per page"},
		{"hugepages the node lacks", func() Request { r := guaranteed("h", 1000, 0); r.HugePages = map[uint64]int64{4096: 1 << 20}; return r }(),
			ErrInsufficientMemory, "hugepages-4kB 1048576 bytes requested"},
		{"memory larger than the machine", guaranteed("m", 1000, 1<<50), ErrInsufficientMemory, "memory 1125899906842624 bytes requested"},
		{"require-isolated without isolated CPUs", func() Request { r := guaranteed("i", 1000, 0); r.CPU = CPUIsolatedRequire; return r }(),
			ErrInsufficientCPUs, `1 CPU requested from the isolated CPUs by CPU preference require-isolated, but the node isolates no CPUs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, smt, Config{ReservedCPUCount: 1})
			_, _, err := p.Allocate(tt.req)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, p.Placements())
			require.NoError(t, p.Check())
		})
	}
}
