package policy

import (
	"fmt"
	"testing"
)

// populate fills p with n live containers: 1 in 5 exclusive (1-2 CPUs while
// they fit), the rest shared.
func populate(b *testing.B, p *Policy, n int) []Running {
	var running []Running
	for i := range n {
		id := fmt.Sprintf("live%04d", i)
		req := burstable(id, 250)
		if i%5 == 0 && p.freeExclusive().Size() >= 6 { // leave room for the measured grant
			req = guaranteed(id, int64(1+i%2)*1000, 0)
		}
		pl, _, err := p.Allocate(req)
		if err != nil {
			b.Fatal(err)
		}
		running = append(running, Running{Request: req, CPUs: pl.CPUs, Mems: pl.Mems})
	}
	return running
}

// BenchmarkAllocateRelease: one exclusive 2-CPU container created and
// removed among n live ones (every shared container's placement changes
// twice).
func BenchmarkAllocateRelease(b *testing.B) {
	for _, name := range []string{"smt-2s-12c-interleaved", "snc-2s-4n-80c", "nps4-2s-12n-256c-cpuless"} {
		topo := fixture(b, name)
		for _, live := range []int{0, 100, 500} {
			b.Run(fmt.Sprintf("%s/live=%d", name, live), func(b *testing.B) {
				// 12 NUMA nodes on nps4: more than max-allowable-numa-nodes' default.
				p := newPolicy(b, topo, Config{ReservedCPUCount: 1, TopologyPolicy: TopologyBestEffort, MaxAllowableNUMANodes: 12})
				populate(b, p, live)
				allocateRelease(b, p)
			})
		}
	}
}

// BenchmarkAllocateReleaseNone is BenchmarkAllocateRelease under topology
// policy none, where the default chooses the NUMA node (nodepref.go) and
// kubelet-packing does not.
func BenchmarkAllocateReleaseNone(b *testing.B) {
	topo := fixture(b, "nps4-2s-12n-256c-cpuless")
	for _, kubelet := range []bool{false, true} {
		b.Run(fmt.Sprintf("kubelet-packing=%v/live=500", kubelet), func(b *testing.B) {
			p := newPolicy(b, topo, Config{ReservedCPUCount: 1, KubeletPacking: kubelet})
			populate(b, p, 500)
			allocateRelease(b, p)
		})
	}
}

// allocateRelease times a 2-CPU grant with 1 GiB made and released.
func allocateRelease(b *testing.B, p *Policy) {
	req := guaranteed("bench", 2000, gib)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := p.Allocate(req); err != nil {
			b.Fatal(err)
		}
		p.Release("bench")
	}
}

// BenchmarkRestore: a restart with 500 live containers on the 256-CPU machine.
func BenchmarkRestore(b *testing.B) {
	topo := fixture(b, "nps4-2s-12n-256c-cpuless")
	cfg := Config{ReservedCPUCount: 1, TopologyPolicy: TopologyBestEffort, MaxAllowableNUMANodes: 12}
	p := newPolicy(b, topo, cfg)
	running := populate(b, p, 500)
	saved := p.Snapshot()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fresh, _ := New(topo, cfg)
		if r := fresh.Restore(saved, running); len(r.Kept) != len(running) {
			b.Fatalf("kept %d of %d", len(r.Kept), len(running))
		}
	}
}
