package state

import "fmt"

// The records topology-aware publishes, for other plugins (stats first) to
// tell where a container runs and why:
//
//	<shared dir>/placements/<container id>.json  PlacementRecord, one per placed container
//	<shared dir>/pools/shared.json               PoolRecord of the shared pool
//
// The shared pool changes with every exclusive grant, and every shared
// container runs on exactly the shared pool. So a shared container's record
// does not copy the pool's cpusets, it names the pool record
// (PlacementRecord.PoolRecord): a grant then rewrites two records (the new
// container's and the pool's), not one per shared container.
const (
	// PlacementKind is the kind (subdirectory) of PlacementRecords.
	PlacementKind = "placements"
	// PlacementVersion is the schema version of PlacementRecord. Version 1
	// had the cpusets of every container inline; version 2 has those of a
	// shared container in its pool record.
	PlacementVersion = 2
	// PoolRecordKind is the kind (subdirectory) of PoolRecords.
	PoolRecordKind = "pools"
	// PoolRecordVersion is the schema version of PoolRecord.
	PoolRecordVersion = 1
	// SharedPoolRecord is the key of the shared pool's record.
	SharedPoolRecord = "shared"
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
	// CPUs and Mems are the container's own cpuset.cpus and cpuset.mems;
	// empty when PoolRecord is set.
	CPUs string `json:"cpus,omitempty"`
	Mems string `json:"mems,omitempty"`
	// PoolRecord is the key of the PoolRecord whose cpusets the container
	// has ("shared" for the shared pool); empty when CPUs and Mems are its
	// own. See Resolve.
	PoolRecord string `json:"poolRecord,omitempty"`
	// CPULessMemory is set when the container may use CPU-less memory nodes:
	// with a PoolRecord its cpuset.mems are the pool's MemsWithCPULess.
	CPULessMemory bool `json:"cpuLessMemory,omitempty"`
	// NUMANodes is the NUMA affinity the Topology Manager admitted.
	NUMANodes []int `json:"numaNodes,omitempty"`
	// MemoryBytes is the memory accounted on Mems (exclusive Guaranteed only).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Reason says why this pool and these CPUs.
	Reason string `json:"reason"`
	// Unplaced is set when the container could not be placed as its request
	// asks (after a restart: too few CPUs or memory left) and is confined to
	// the shared pool instead; Reason says why. Added within version 2: a
	// reader older than the field refuses only such records.
	Unplaced bool `json:"unplaced,omitempty"`
}

// PoolRecord is a pool whose cpusets its containers share, keyed by
// SharedPoolRecord.
type PoolRecord struct {
	// Pool is the pool's kind (shared).
	Pool string `json:"pool"`
	// CPUs is the pool's cpuset.cpus.
	CPUs string `json:"cpus"`
	// Mems is the cpuset.mems of its containers: the NUMA nodes of CPUs.
	Mems string `json:"mems"`
	// MemsWithCPULess is the cpuset.mems of its containers that may use
	// CPU-less memory: Mems and the closest CPU-less nodes.
	MemsWithCPULess string `json:"memsWithCPULess"`
}

// PlacementRecords binds the PlacementRecords under root (usually
// DefaultDir).
func PlacementRecords(root string) (*Records[PlacementRecord], error) {
	return NewRecords[PlacementRecord](root, PlacementKind, PlacementVersion)
}

// PoolRecords binds the PoolRecords under root (usually DefaultDir).
func PoolRecords(root string) (*Records[PoolRecord], error) {
	return NewRecords[PoolRecord](root, PoolRecordKind, PoolRecordVersion)
}

// Resolve returns the container's cpuset.cpus and cpuset.mems: its own, or
// those of its pool record, looked up in pools (as PoolRecords' List returns
// them). Records read at different moments may disagree for the time of
// one write; read the pools after the placements to see the newer pool.
func (r PlacementRecord) Resolve(pools map[string]PoolRecord) (cpus, mems string, err error) {
	if r.PoolRecord == "" {
		return r.CPUs, r.Mems, nil
	}
	pool, ok := pools[r.PoolRecord]
	if !ok {
		return "", "", fmt.Errorf("resolve the cpusets of container %s: pool record %q is not published", r.ContainerID, r.PoolRecord)
	}
	if r.CPULessMemory {
		return pool.CPUs, pool.MemsWithCPULess, nil
	}
	return pool.CPUs, pool.Mems, nil
}
