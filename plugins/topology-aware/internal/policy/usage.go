package policy

import (
	"maps"
	"slices"
)

// Usage reports, per NUMA node and pool, the CPUs and memory the pools have,
// grant and leave free, for metrics. Rows come by node, then pool.
func (p *Policy) Usage() []NodeUsage {
	var rows []NodeUsage
	requests := map[PoolKind]int64{}
	for _, e := range p.containers {
		if e.pl.Pool == PoolShared || e.pl.Pool == PoolReserved {
			requests[e.pl.Pool] += e.req.CPURequest
		}
	}
	pools := []struct {
		kind     PoolKind
		capacity func(node int) int
	}{
		{PoolShared, func(n int) int { return p.shared.Intersection(p.topo.CPUsOfNode(n)).Size() }},
		{PoolReserved, func(n int) int { return p.reserved.Intersection(p.topo.CPUsOfNode(n)).Size() }},
		{PoolExclusive, func(n int) int {
			return p.available.Difference(p.reserved).Difference(p.isolated).Intersection(p.topo.CPUsOfNode(n)).Size()
		}},
		{PoolIsolated, func(n int) int { return p.isolated.Intersection(p.topo.CPUsOfNode(n)).Size() }},
	}
	for _, node := range p.topo.Nodes() {
		nodeCPUs := p.topo.CPUsOfNode(node)
		for _, pool := range pools {
			row := NodeUsage{Node: node, Pool: pool.kind, CapacityCPUs: pool.capacity(node)}
			for _, e := range p.containers {
				if e.pl.Pool == pool.kind && (!e.pl.CPUs.Intersection(nodeCPUs).IsEmpty() || e.group.has(node) ||
					slices.ContainsFunc(e.cpuLess, func(h NodeMemory) bool { return h.Node == node })) {
					row.Containers++
				}
			}
			switch pool.kind {
			case PoolExclusive, PoolIsolated:
				used := p.exclusive
				if pool.kind == PoolIsolated {
					used = p.isolatedUsed
				}
				granted := used.Intersection(nodeCPUs).Size()
				row.GrantedMilliCPU = int64(granted) * 1000
				row.FreeCPUs = row.CapacityCPUs - granted
			default:
				if total := p.poolSize(pool.kind); total > 0 {
					row.GrantedMilliCPU = requests[pool.kind] * int64(row.CapacityCPUs) / int64(total)
				}
				row.FreeCPUs = row.CapacityCPUs
			}
			if pool.kind == PoolExclusive {
				if n := p.mm.nodes[node]; n != nil {
					row.MemoryCapacity = n.allocatable[0]
					row.MemoryFree = n.free[0]
					row.MemoryGranted = n.allocatable[0] - n.free[0]
				}
			}
			if nodeCPUs.IsEmpty() && pool.kind != PoolExclusive {
				continue
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func (p *Policy) poolSize(kind PoolKind) int {
	if kind == PoolReserved {
		return p.reserved.Size()
	}
	return p.shared.Size()
}

// MemoryAccount is the Memory Manager's accounting of one resource, memory
// or the hugepages of one size, on one NUMA node.
type MemoryAccount struct {
	Node     int    `json:"node"`
	PageSize uint64 `json:"pageSize,omitempty"` // 0: regular memory
	// Allocatable is what Guaranteed containers may be granted there: the
	// node's memory outside hugepages minus the reserved memory, or the
	// pages of the size times the size.
	Allocatable uint64 `json:"allocatable"`
	Free        uint64 `json:"free"`
}

// MemoryAccounts reports every resource the Memory Manager accounts, by
// node (those with CPUs and the CPU-less ones), then page size, regular
// memory first.
func (p *Policy) MemoryAccounts() []MemoryAccount {
	var out []MemoryAccount
	for _, node := range slices.Sorted(maps.Keys(p.mm.nodes)) {
		n := p.mm.nodes[node]
		for _, r := range slices.Sorted(maps.Keys(n.allocatable)) {
			out = append(out, MemoryAccount{Node: node, PageSize: uint64(r), Allocatable: n.allocatable[r], Free: n.free[r]})
		}
	}
	return out
}
