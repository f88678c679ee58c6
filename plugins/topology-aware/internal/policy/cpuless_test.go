package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hbm is a Guaranteed container that may use CPU-less memory.
func hbm(id string, milli, memory int64) Request {
	req := guaranteed(id, milli, memory)
	req.CPULessMemory = true
	return req
}

// memoryRow is the exclusive pool's usage row of node, with its memory.
func memoryRow(t *testing.T, p *Policy, node int) NodeUsage {
	t.Helper()
	return p.Usage()[nodeRow(t, p, node)]
}

// TestCPULessMemoryIsAccounted: on nps4-2s-12n-256c-cpuless, HBM nodes 8
// (socket 0) and 9 (socket 1) have 16 GiB each, 14 GiB outside hugepages;
// containers that may use them hold their memory there too, and what does
// not fit is refused.
func TestCPULessMemoryIsAccounted(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless")
	const hbmNode = 8
	tests := []struct {
		name     string
		cfg      Config
		reqs     []Request
		wantErr  string // of the last request; ErrInsufficientMemory
		wantHeld uint64 // on node 8 after the requests
	}{
		{"an annotated grant holds its memory on the nearest HBM node", Config{}, []Request{hbm("a", 2000, 8*gib)}, "", uint64(8 * gib)},
		{"grants fill the HBM node", Config{}, []Request{hbm("a", 2000, 7*gib), hbm("b", 2000, 7*gib)}, "", uint64(14 * gib)},
		{"a grant the HBM node cannot hold is refused", Config{}, []Request{hbm("a", 2000, 7*gib), hbm("b", 2000, 7*gib), hbm("c", 2000, gib)},
			"container default/pod-c/c: insufficient memory: 1073741824 bytes of memory, which may all land on the CPU-less NUMA nodes {8} of its cpuset.mems (it may use CPU-less memory), but they have 0 bytes free (node 8: 0 of 15032385536 bytes free)", uint64(14 * gib)},
		{"reserved memory on an HBM node is not granted", Config{ReservedMemory: map[int]uint64{hbmNode: uint64(12 * gib)}}, []Request{hbm("a", 2000, 8*gib)},
			"they have 2147483648 bytes free (node 8: 2147483648 of 2147483648 bytes free)", 0},
		{"a grant not annotated holds nothing there", Config{}, []Request{guaranteed("a", 2000, 8*gib)}, "", 0},
		{"a shared container holds nothing there", Config{}, []Request{hbm("a", 500, 8*gib)}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, nps, tt.cfg)
			for i, req := range tt.reqs {
				before := p.Snapshot()
				pl, _, err := p.Allocate(req)
				if i == len(tt.reqs)-1 && tt.wantErr != "" {
					require.ErrorIs(t, err, ErrInsufficientMemory)
					assert.Contains(t, err.Error(), tt.wantErr)
					assert.Equal(t, before, p.Snapshot(), "a refused grant changed the state")
					continue
				}
				require.NoError(t, err)
				if req.CPULessMemory && pl.Pool == PoolExclusive {
					assert.True(t, pl.Mems.Contains(hbmNode), "mems %q include the HBM node", pl.Mems)
				}
				require.NoError(t, p.Check())
			}
			row := memoryRow(t, p, hbmNode)
			assert.Equal(t, tt.wantHeld, row.MemoryGranted)
			assert.Equal(t, row.MemoryCapacity-tt.wantHeld, row.MemoryFree)
		})
	}
}

// TestCPULessMemoryLifecycle: released on release and on resize, kept
// across a restart, planned for an older checkpoint that lacks it.
func TestCPULessMemoryLifecycle(t *testing.T) {
	nps := fixture(t, "nps4-2s-12n-256c-cpuless")
	p := newPolicy(t, nps, Config{})
	for _, req := range []Request{hbm("a", 2000, 7*gib), hbm("b", 2000, 7*gib)} { // node 8 holds 14 GiB
		_, _, err := p.Allocate(req)
		require.NoError(t, err)
	}
	_, _, err := p.Allocate(hbm("c", 2000, 4*gib))
	require.ErrorIs(t, err, ErrInsufficientMemory)

	// A resize that does not fit leaves the old grant; one that does frees the rest.
	_, _, err = p.Resize(hbm("a", 2000, 12*gib))
	require.ErrorIs(t, err, ErrInsufficientMemory)
	assert.Equal(t, uint64(14*gib), memoryRow(t, p, 8).MemoryGranted)
	_, _, err = p.Resize(hbm("a", 2000, 3*gib))
	require.NoError(t, err)
	assert.Equal(t, uint64(10*gib), memoryRow(t, p, 8).MemoryGranted)
	_, _, err = p.Allocate(hbm("c", 2000, 4*gib))
	require.NoError(t, err)
	require.NoError(t, p.Check())

	data, err := json.Marshal(p.Snapshot())
	require.NoError(t, err)
	var saved Snapshot
	require.NoError(t, json.Unmarshal(data, &saved))
	var running []Running
	for _, c := range saved.Containers {
		require.NotEmpty(t, c.CPULessMemory, "container %s: checkpointed CPU-less memory", c.Request.ContainerID)
		running = append(running, Running{Request: c.Request, CPUs: c.Placement.CPUs, Mems: c.Placement.Mems})
	}
	old := Snapshot{}
	require.NoError(t, json.Unmarshal(data, &old))
	for i := range old.Containers {
		old.Containers[i].CPULessMemory = nil
	}
	tooSmall := Config{ReservedMemory: map[int]uint64{8: uint64(4 * gib)}} // 10 GiB: a and b fit, c does not
	tests := []struct {
		name     string
		cfg      Config
		saved    Snapshot
		replaced []string // refused anew: not restored
	}{
		{"the checkpoint restores it", Config{}, saved, nil},
		{"an older checkpoint gets it planned", Config{}, old, nil},
		{"an HBM node now too small refuses the last in id order", tooSmall, saved, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := newPolicy(t, nps, tt.cfg)
			report := fresh.Restore(tt.saved, running)
			require.NoError(t, fresh.Check())
			var got []string
			for _, pl := range report.Replaced {
				got = append(got, pl.ContainerID)
				assert.Contains(t, pl.Reason, "CPU-less")
			}
			assert.Equal(t, tt.replaced, got)
			if tt.replaced == nil {
				assert.Equal(t, p.Snapshot(), fresh.Snapshot())
				assert.Equal(t, p.Usage(), fresh.Usage())
			}
		})
	}

	for _, id := range []string{"a", "b", "c"} {
		p.Release(id)
	}
	require.NoError(t, p.Check())
	assert.Zero(t, memoryRow(t, p, 8).MemoryGranted)
}
