package nriplugin

import (
	"reflect"
	"slices"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// Placement records in the shared state: one per placed container, so that
// other plugins (stats first) can tell where a container runs and why.
const (
	// PlacementKind is the kind (subdirectory) of PlacementRecords.
	PlacementKind = "placements"
	// PlacementVersion is the schema version of PlacementRecord.
	PlacementVersion = 1
)

// PlacementRecord is a container's placement as published for other
// plugins, keyed by container id. It holds no timestamp, so that an
// unchanged placement is never rewritten.
type PlacementRecord struct {
	ContainerID string `json:"containerID"`
	PodUID      string `json:"podUID"`
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	// Pool is shared, reserved, exclusive or isolated.
	Pool string `json:"pool"`
	// CPUs and Mems are the container's cpuset.cpus and cpuset.mems.
	CPUs string `json:"cpus"`
	Mems string `json:"mems"`
	// NUMANodes is the NUMA affinity the Topology Manager admitted.
	NUMANodes []int `json:"numaNodes,omitempty"`
	// MemoryBytes is the memory accounted on Mems (exclusive Guaranteed only).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Reason says why this pool and these CPUs.
	Reason string `json:"reason"`
}

// PlacementRecords binds the PlacementRecords under root (usually
// state.DefaultDir).
func PlacementRecords(root string) (*state.Records[PlacementRecord], error) {
	return state.NewRecords[PlacementRecord](root, PlacementKind, PlacementVersion)
}

// newPlacementRecord joins a placement with the request it answers.
func newPlacementRecord(req policy.Request, pl policy.Placement) PlacementRecord {
	return PlacementRecord{
		ContainerID: pl.ContainerID,
		PodUID:      pl.PodUID,
		Namespace:   req.Namespace,
		Pod:         req.Pod,
		Container:   req.Container,
		Pool:        string(pl.Pool),
		CPUs:        pl.CPUs.String(),
		Mems:        pl.Mems.String(),
		NUMANodes:   slices.Clone(pl.NUMANodes),
		MemoryBytes: pl.Memory,
		Reason:      pl.Reason,
	}
}

// equal reports whether two records say the same; an empty NUMANodes
// equals an absent one, as JSON's omitempty makes them.
func (r PlacementRecord) equal(o PlacementRecord) bool {
	if !slices.Equal(r.NUMANodes, o.NUMANodes) {
		return false
	}
	r.NUMANodes, o.NUMANodes = nil, nil
	return reflect.DeepEqual(r, o)
}
