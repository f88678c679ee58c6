package policy

import (
	"errors"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// PoolKind names the pool a container's CPUs come from.
type PoolKind string

// The pools.
const (
	PoolShared    PoolKind = "shared"    // everything not granted, not reserved (unless non-strict), not isolated
	PoolReserved  PoolKind = "reserved"  // the reserved CPUs: kube-system and containers annotated for it
	PoolExclusive PoolKind = "exclusive" // an exclusive grant of whole CPUs
	PoolIsolated  PoolKind = "isolated"  // an exclusive grant taken from the kernel-isolated CPUs
	// PoolPodShared: under the pod scope, a container of a pod with
	// pod-level resources that has no exclusive CPUs of its own runs on
	// what its pod's reservation holds beyond its exclusive containers'
	// grants (the kubelet's pod shared pool, KEP-5526).
	PoolPodShared PoolKind = "pod-shared"
)

// CPUPreference is what a container's annotation asks for; Auto follows the kubelet's static policy.
type CPUPreference string

// The CPU preferences.
const (
	CPUAuto            CPUPreference = ""                 // Guaranteed + integer CPU request => exclusive, else shared
	CPUShared          CPUPreference = "shared"           // shared even if it would qualify for exclusive
	CPUReserved        CPUPreference = "reserved"         // run on the reserved CPUs
	CPUIsolatedPrefer  CPUPreference = "prefer-isolated"  // exclusive from isolated CPUs if enough, else normal exclusive
	CPUIsolatedRequire CPUPreference = "require-isolated" // exclusive from isolated CPUs or fail
)

// TopologyPolicy is the Topology Manager policy: "none", "best-effort",
// "restricted" or "single-numa-node". Empty means none.
type TopologyPolicy string

// The Topology Manager policies, spelled as the kubelet's flag values.
const (
	TopologyNone           TopologyPolicy = "none"
	TopologyBestEffort     TopologyPolicy = "best-effort"
	TopologyRestricted     TopologyPolicy = "restricted"
	TopologySingleNUMANode TopologyPolicy = "single-numa-node"
)

// TopologyScope is the Topology Manager scope: "container" or "pod". Empty
// means container.
type TopologyScope string

// The Topology Manager scopes.
const (
	ScopeContainer TopologyScope = "container"
	ScopePod       TopologyScope = "pod"
)

// ReservedGuaranteed says where a Guaranteed container with an integer CPU
// request goes when its pod is in a reserved namespace.
type ReservedGuaranteed string

// The choices for such a container.
const (
	// ReservedGuaranteedExclusive: exclusive CPUs, as the kubelet gives them (the default).
	ReservedGuaranteedExclusive ReservedGuaranteed = "exclusive"
	// ReservedGuaranteedReserved: the reserved CPUs; refused when they are
	// fewer than its request.
	ReservedGuaranteedReserved ReservedGuaranteed = "reserved"
	// ReservedGuaranteedAllowFewer: the reserved CPUs, even when they are
	// fewer than its request, with a warning.
	ReservedGuaranteedAllowFewer ReservedGuaranteed = "reserved-allow-fewer"
)

// DefaultMaxAllowableNUMANodes is the kubelet's default for the Topology
// Manager's max-allowable-numa-nodes, and its minimum.
const DefaultMaxAllowableNUMANodes = 8

// Config is the validated policy configuration (the config package builds it from YAML).
type Config struct {
	AvailableCPUs      cpuset.CPUSet // empty: all online CPUs of the topology
	ReservedCPUs       cpuset.CPUSet // explicit reserved CPUs; exclusive with ReservedCPUCount
	ReservedCPUCount   int           // or: this many CPUs, chosen topology-first from the lowest ids (like the kubelet)
	ReservedNamespaces []string      // pods in these namespaces run on the reserved CPUs (default kube-system)
	// ReservedGuaranteed: where their Guaranteed containers with integer
	// CPU requests go; empty means ReservedGuaranteedExclusive.
	ReservedGuaranteed   ReservedGuaranteed
	FullPCPUsOnly        bool
	DistributeAcrossNUMA bool
	SpreadAcrossCores    bool
	AlignByUncoreCache   bool
	AlignBySocket        bool // the kubelet's align-by-socket: hints and aligned CPUs by socket
	StrictReservation    bool // reserved CPUs also leave the shared pool
	// KubeletPacking chooses exclusive CPUs exactly as the kubelet does,
	// packed over every free CPU, instead of within the fewest, closest NUMA
	// nodes that have room (nodepref.go).
	KubeletPacking    bool
	TopologyPolicy    TopologyPolicy
	TopologyScope     TopologyScope
	PreferClosestNUMA bool
	// MaxAllowableNUMANodes: under a topology policy other than none, a
	// machine with more NUMA nodes is refused, as the kubelet refuses it;
	// 0 means DefaultMaxAllowableNUMANodes.
	MaxAllowableNUMANodes int
	ReservedMemory        map[int]uint64 // per NUMA node, bytes kept back from Memory Manager accounting
}

// Device is a device the container got, located on the machine (from common/topology/locality).
type Device struct {
	ID       string        `json:"id"`             // e.g. "char 226:0", "pci 0000:3b:00.0", "cdi vendor.com/gpu=0"
	NUMANode int           `json:"numaNode"`       // -1: unknown (gives no hint)
	CPUs     cpuset.CPUSet `json:"cpus,omitempty"` // local CPUs, may be empty
}

// Request is one container as the policy sees it.
type Request struct {
	ContainerID   string           `json:"containerID"`
	PodUID        string           `json:"podUID"`
	Namespace     string           `json:"namespace"`
	Pod           string           `json:"pod"`
	Container     string           `json:"container"`
	QOS           k8s.QOSClass     `json:"qos"`
	CPURequest    int64            `json:"cpuRequest"`              // millicores
	CPULimit      int64            `json:"cpuLimit"`                // millicores, 0 = none
	Memory        int64            `json:"memory"`                  // bytes the Memory Manager accounts for (the limit of a Guaranteed container), 0 = none
	HugePages     map[uint64]int64 `json:"hugePages,omitempty"`     // page size in bytes -> bytes
	CPU           CPUPreference    `json:"cpu,omitempty"`           // the annotation's preference
	CPUAnnotation string           `json:"-"`                       // the annotation that set CPU, key="value", for errors
	CPULessMemory bool             `json:"cpuLessMemory,omitempty"` // may use CPU-less memory nodes (HBM, PMEM, CXL) in cpuset.mems
	Devices       []Device         `json:"devices,omitempty"`
	// PodCPURequest and PodMemory are the whole pod's CPU request
	// (millicores) and, for a Guaranteed pod, memory (bytes), as the kubelet
	// sums them for the pod sandbox (NRI's PodSandbox.Linux.PodResources);
	// 0 = unknown. The pod scope reserves them at the pod's first grant.
	PodCPURequest int64 `json:"podCPURequest,omitempty"`
	PodMemory     int64 `json:"podMemory,omitempty"`
}

// Placement is where a container runs and why.
type Placement struct {
	ContainerID string           `json:"containerID"`
	PodUID      string           `json:"podUID"`
	Pool        PoolKind         `json:"pool"`
	CPUs        cpuset.CPUSet    `json:"cpus"`                // cpuset.cpus to apply
	Mems        cpuset.CPUSet    `json:"mems"`                // cpuset.mems to apply (NUMA node ids, kernel list syntax)
	NUMANodes   []int            `json:"numaNodes,omitempty"` // the NUMA affinity the Topology Manager admitted (sorted)
	Memory      int64            `json:"memory,omitempty"`    // bytes accounted on Mems (exclusive Guaranteed only)
	HugePages   map[uint64]int64 `json:"hugePages,omitempty"` // page size in bytes -> bytes accounted on Mems
	Reason      string           `json:"reason"`              // one human-readable line: why this pool and these CPUs
	// Warning says what an operator should know about a placement the
	// configuration allows but the request did not ask for (a Guaranteed
	// container kept on fewer reserved CPUs than it requests).
	Warning string `json:"warning,omitempty"`
	// Unplaced: at a restore the container could be neither kept, adopted
	// nor placed as its request asks; it is confined to the shared pool
	// (Pool shared) until a resize or a later restore places it.
	Unplaced bool `json:"unplaced,omitempty"`
}

// Running is a container observed at Synchronize: its request and what it actually has.
type Running struct {
	Request Request
	CPUs    cpuset.CPUSet // actual cpuset.cpus (empty if unknown)
	Mems    cpuset.CPUSet
}

// RestoreReport says what Restore did with every container.
type RestoreReport struct {
	Kept     []string    // container ids restored from the checkpoint where they run
	Adopted  []string    // unknown to the checkpoint, adopted where they run
	Replaced []Placement // could not be kept or adopted consistently: placed anew (deterministically), with Reason; Unplaced if even that failed
	Dropped  []string    // in the checkpoint but not running any more
	Updates  []Placement // placements to apply to running containers (Replaced + shared ones whose pool changed)
	// DroppedPods are pod-scope reservations that could not be restored
	// (their CPUs or memory are taken), pod UID: why.
	DroppedPods map[string]string
}

// Snapshot is the durable state of a Policy: every container's request and
// placement. It round-trips through encoding/json exactly; the caller's
// checkpoint versions it.
type Snapshot struct {
	Containers []SavedContainer `json:"containers"`     // sorted by container id
	Pods       []SavedPod       `json:"pods,omitempty"` // pod-scope reservations, sorted by pod UID
	// PodLevel are the pods that showed they have pod-level resources
	// (podlevel.go), sorted.
	PodLevel []string `json:"podLevel,omitempty"`
}

// SavedPod is what a pod under the Topology Manager's pod scope holds for
// its containers not created yet (or stopped): CPUs and memory on the pod's
// NUMA affinity.
type SavedPod struct {
	PodUID      string        `json:"podUID"`
	NUMANodes   []int         `json:"numaNodes,omitempty"`
	CPUs        cpuset.CPUSet `json:"cpus"`
	MemoryNodes []int         `json:"memoryNodes,omitempty"`
	Memory      []NodeMemory  `json:"memoryByNode,omitempty"`
	Closing     bool          `json:"closing,omitempty"` // released by its pod: goes with its last container
}

// SavedContainer is one container in a Snapshot.
type SavedContainer struct {
	Request   Request   `json:"request"`
	Placement Placement `json:"placement"`
	// MemoryNodes is the Memory Manager group, Memory what the container
	// holds of each of its nodes (Guaranteed exclusive containers only).
	MemoryNodes []int        `json:"memoryNodes,omitempty"`
	Memory      []NodeMemory `json:"memoryByNode,omitempty"`
	// CPULessMemory is what it holds of the CPU-less nodes in its Mems.
	CPULessMemory []NodeMemory `json:"cpuLessMemoryByNode,omitempty"`
}

// NodeUsage is the use of one pool on one NUMA node, for metrics. CPU-less
// nodes appear with the exclusive pool only, for their memory.
type NodeUsage struct {
	Node       int      `json:"node"`
	Pool       PoolKind `json:"pool"`
	Containers int      `json:"containers"` // containers of the pool with CPUs (or, CPU-less nodes, memory) on the node
	// CapacityCPUs are the pool's CPUs on the node (exclusive: the CPUs that
	// can be granted, i.e. free + granted).
	CapacityCPUs int `json:"capacityCPUs"`
	// GrantedMilliCPU is, for exclusive and isolated, the granted CPUs x 1000;
	// for shared and reserved, the containers' requests, shared out over the
	// nodes in proportion to the pool's CPUs on each.
	GrantedMilliCPU int64 `json:"grantedMilliCPU"`
	FreeCPUs        int   `json:"freeCPUs"` // exclusive/isolated: ungranted; shared/reserved: CapacityCPUs
	// Memory is the Memory Manager's accounting of the node (exclusive pool
	// rows only): allocatable (total minus reserved), granted and free bytes.
	MemoryCapacity uint64 `json:"memoryCapacity,omitempty"`
	MemoryGranted  uint64 `json:"memoryGranted,omitempty"`
	MemoryFree     uint64 `json:"memoryFree,omitempty"`
}

// Errors the policy wraps, so that callers can count rejections by reason
// with errors.Is.
var (
	// ErrInvalidConfig: the configuration contradicts itself or the machine.
	ErrInvalidConfig = errors.New("invalid policy configuration")
	// ErrInvalidRequest: the request itself is malformed (negative sizes, no container id, ...).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInsufficientCPUs: not enough free CPUs in the pool the request needs.
	ErrInsufficientCPUs = errors.New("insufficient CPUs")
	// ErrInsufficientMemory: not enough free memory or hugepages on the nodes.
	ErrInsufficientMemory = errors.New("insufficient memory")
	// ErrTopologyAffinity: the Topology Manager policy cannot admit the request.
	ErrTopologyAffinity = errors.New("topology affinity error")
	// ErrUnknownContainer: Resize of a container the policy does not know.
	ErrUnknownContainer = errors.New("unknown container")
)
