package policy

// CPU-less memory nodes (HBM, PMEM, CXL) serve only the containers annotated
// for them (Request.CPULessMemory), whose cpuset.mems then include the
// CPU-less nodes closest to their CPUs. The kernel may put all of such a
// container's memory there, so, as the Memory Manager does on the nodes with
// CPUs, a Guaranteed exclusive container annotated for them also holds its
// memory request on them, filling them in node order, and a request they
// cannot hold is refused rather than over-committed. They never join a
// Memory Manager group: one CPU-less node serves several nodes with CPUs at
// once. Hugepages on them are not accounted (the containers' hugepages are
// held on their group, where the kubelet accounts them).

import (
	"fmt"
	"slices"
	"strings"
)

// cpuLessOf are the CPU-less nodes that cpuset.mems adds to nodes.
func (p *Policy) cpuLessOf(nodes []int) []int {
	var out []int
	for _, n := range nodes {
		for _, c := range p.cpuLessNearby[n] {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// cpuLessRequest is what a grant with the memory group holds of the
// CPU-less nodes in its cpuset.mems: nothing unless it may use them and the
// Memory Manager accounts its memory.
func (p *Policy) cpuLessRequest(req Request, group numaMask) uint64 {
	if !req.CPULessMemory || req.Memory <= 0 || group == 0 || len(p.cpuLessOf(group.nodes())) == 0 {
		return 0
	}
	return uint64(req.Memory)
}

// placeCPULess plans what a grant with the memory group holds of the
// CPU-less nodes, or says why they cannot hold it.
func (p *Policy) placeCPULess(req Request, group numaMask) ([]NodeMemory, error) {
	size := p.cpuLessRequest(req, group)
	if size == 0 {
		return nil, nil
	}
	nodes := p.cpuLessOf(group.nodes())
	want := map[memoryResource]uint64{0: size}
	var free uint64
	var where []string
	for _, id := range nodes {
		n := p.mm.nodes[id]
		free += n.free[0]
		where = append(where, fmt.Sprintf("node %d: %d of %d bytes free", id, n.free[0], n.allocatable[0]))
	}
	if free < want[0] {
		return nil, fmt.Errorf("%w: %d bytes of memory, which may all land on the CPU-less NUMA nodes {%s} of its cpuset.mems (it may use CPU-less memory), but they have %d bytes free (%s): request less memory, or run it without CPU-less memory",
			ErrInsufficientMemory, want[0], joinNodes(nodes), free, strings.Join(where, "; "))
	}
	return p.mm.planOn(nodes, want), nil
}

// restoreCPULess checks what a container held of the CPU-less nodes before
// a restart against its request and what is free now; a checkpoint without
// it (an older one) gets it planned anew.
func (p *Policy) restoreCPULess(req Request, group numaMask, saved []NodeMemory) ([]NodeMemory, error) {
	if saved == nil {
		return p.placeCPULess(req, group)
	}
	nodes := p.cpuLessOf(group.nodes())
	var sum uint64
	for _, h := range saved {
		switch n := p.mm.nodes[h.Node]; {
		case !slices.Contains(nodes, h.Node) || h.PageSize != 0:
			return nil, fmt.Errorf("CPU-less memory held on NUMA node %d (page size %d), not a CPU-less node of its memory nodes {%s}", h.Node, h.PageSize, group)
		case n.free[0] < h.Bytes:
			return nil, fmt.Errorf("CPU-less memory: %d bytes held on NUMA node %d, %d free", h.Bytes, h.Node, n.free[0])
		}
		sum += h.Bytes
	}
	if want := p.cpuLessRequest(req, group); sum != want {
		return nil, fmt.Errorf("holds %d bytes of CPU-less memory, expected %d (memory %d, may use CPU-less memory: %v)", sum, want, req.Memory, req.CPULessMemory)
	}
	return saved, nil
}
