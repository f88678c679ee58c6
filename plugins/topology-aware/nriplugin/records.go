package nriplugin

import (
	"reflect"
	"slices"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// newPlacementRecord joins a placement with the request it answers. A
// shared container refers to the shared pool's record.
func newPlacementRecord(req policy.Request, pl policy.Placement) state.PlacementRecord {
	rec := state.PlacementRecord{
		ContainerID:   pl.ContainerID,
		PodUID:        pl.PodUID,
		Namespace:     req.Namespace,
		Pod:           req.Pod,
		Container:     req.Container,
		Pool:          string(pl.Pool),
		CPULessMemory: req.CPULessMemory,
		NUMANodes:     slices.Clone(pl.NUMANodes),
		MemoryBytes:   pl.Memory,
		Reason:        pl.Reason,
		Unplaced:      pl.Unplaced,
	}
	if pl.Pool == policy.PoolShared {
		rec.PoolRecord = state.SharedPoolRecord
	} else {
		rec.CPUs, rec.Mems = pl.CPUs.String(), pl.Mems.String()
	}
	return rec
}

// newSharedPoolRecord describes the policy's shared pool.
func newSharedPoolRecord(pol *policy.Policy) state.PoolRecord {
	return state.PoolRecord{
		Pool:            string(policy.PoolShared),
		CPUs:            pol.SharedCPUs().String(),
		Mems:            pol.SharedMems(false).String(),
		MemsWithCPULess: pol.SharedMems(true).String(),
	}
}

// samePlacement reports whether two records say the same; an empty
// NUMANodes equals an absent one, as JSON's omitempty makes them.
func samePlacement(r, o state.PlacementRecord) bool {
	if !slices.Equal(r.NUMANodes, o.NUMANodes) {
		return false
	}
	r.NUMANodes, o.NUMANodes = nil, nil
	return reflect.DeepEqual(r, o)
}
