package policy

import (
	"fmt"
	"testing"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology"
)

// FuzzPolicy decodes bytes into a configuration and a sequence of
// operations (allocate, resize, release, restart) on the 80-CPU fixture and
// checks the invariants after each: nothing panics, nothing breaks.
func FuzzPolicy(f *testing.F) {
	topo := fixture(f, "snc-2s-4n-80c")
	f.Add([]byte{0, 0, 0, 1, 4, 0, 2, 0, 8, 1, 0, 3, 0})
	f.Add([]byte{5, 1, 0, 10, 3, 2, 1, 0, 2, 9, 9, 2, 0, 3, 1, 4, 0, 0, 7})
	f.Add([]byte{255, 30, 7, 40, 40, 40, 1, 1, 1, 2, 2, 2, 3, 3, 3})
	f.Add([]byte{160, 16, 1, 0, 0, 3, 0, 1, 6, 0, 2, 9, 0, 3, 0, 0, 1, 3, 1, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		runOps(t, topo, data)
	})
}

func runOps(t *testing.T, topo *topology.Topology, data []byte) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	flags, more := next(), next()
	cfg := Config{
		ReservedCPUCount:     next() % 4,
		FullPCPUsOnly:        flags&1 != 0,
		DistributeAcrossNUMA: flags&2 != 0 && flags&8 == 0,
		SpreadAcrossCores:    flags&4 != 0 && flags&3 == 0,
		AlignByUncoreCache:   flags&8 != 0 && flags&4 == 0,
		StrictReservation:    flags&16 != 0,
		TopologyPolicy:       []TopologyPolicy{TopologyNone, TopologyBestEffort, TopologyRestricted, TopologySingleNUMANode}[(flags>>5)&3],
		TopologyScope:        []TopologyScope{ScopeContainer, ScopePod}[(flags>>7)&1],
		PreferClosestNUMA:    flags&64 != 0,
		KubeletPacking:       more&1 != 0,
		AlignBySocket:        more&2 != 0,
		ReservedNamespaces:   []string{"kube-system"},
		ReservedGuaranteed:   []ReservedGuaranteed{"", ReservedGuaranteedExclusive, ReservedGuaranteedReserved, ReservedGuaranteedAllowFewer}[(more>>2)&3],
	}
	p, err := New(topo, cfg)
	if err != nil {
		return
	}
	for len(data) > 0 {
		op, id, size := next()%4, fmt.Sprintf("c%d", next()%16), next()
		req := Request{ContainerID: id, PodUID: fmt.Sprintf("pod%d", size%3), QOS: k8s.QOSGuaranteed,
			CPURequest: int64(size%48) * 500, Memory: int64(size%5) << 30, CPU: []CPUPreference{CPUAuto, CPUShared, CPUReserved, CPUIsolatedPrefer}[size%4]}
		if size%7 == 0 {
			req.QOS = k8s.QOSBurstable
		}
		if size%11 == 0 {
			req.Devices = []Device{{ID: "dev", NUMANode: size % 5}}
		}
		if size%13 == 0 {
			req.Namespace = "kube-system"
		}
		if more&16 != 0 { // the pods' sums, and containers Guaranteed only through them
			req.PodCPURequest, req.PodMemory = int64(size%3+1)*2000, int64(size%3)<<30
			if size%3 == 0 {
				req.CPULimit = req.PodCPURequest
			}
		}
		switch op {
		case 0:
			_, _, _ = p.Allocate(req)
		case 1:
			_, _, _ = p.Resize(req)
		case 2:
			p.Release(id)
		default:
			var running []Running
			for _, pl := range p.Placements() {
				e := p.containers[pl.ContainerID]
				running = append(running, Running{Request: e.req, CPUs: pl.CPUs, Mems: pl.Mems})
			}
			saved := p.Snapshot()
			p, _ = New(topo, cfg)
			p.Restore(saved, running)
		}
		if err := p.Check(); err != nil {
			t.Fatalf("after op %d on %s: %v", op, id, err)
		}
	}
}
