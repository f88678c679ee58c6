package simulate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// Record is one line of the report stream: exactly one field is set. A
// run writes the machine, then one record per step as it is done, then the
// final state; a run that stops at a failing step writes what failed and
// then the state it stopped in, so the steps done are kept.
type Record struct {
	Machine *MachineInfo `json:"machine,omitempty"`
	Step    *StepReport  `json:"step,omitempty"`
	Error   *Failure     `json:"error,omitempty"`
	Final   *State       `json:"final,omitempty"`
}

// MachineInfo summarizes the machine the workload runs on.
type MachineInfo struct {
	Source   string `json:"source"`
	CPUs     string `json:"cpus"`
	Nodes    []int  `json:"nodes"`
	Isolated string `json:"isolated"`
	// Reserved are the reserved CPUs the configuration sets aside.
	Reserved string `json:"reserved"`
}

// StepReport is what one step changed. Shared containers that only follow
// the shared pool when it changes are counted in Followed, not listed:
// they run on SharedCPUs with SharedMems.
type StepReport struct {
	Step int `json:"step"` // from 1
	Position
	Kind StepKind `json:"kind"`
	// Objects are what a create or delete step names ("Deployment
	// shop/web"); Pod and Container a resize's subject.
	Objects   []string `json:"objects,omitempty"`
	Pod       string   `json:"pod,omitempty"`
	Container string   `json:"container,omitempty"`
	// Changed are the containers the step placed (created), resized, or
	// moved (updated, or replaced by a restart), with their placement
	// after it, in creation order.
	Changed []ContainerPlacement `json:"changed,omitempty"`
	// Followed counts the shared containers updated to the new shared
	// pool.
	Followed int `json:"followed,omitempty"`
	// Exited are init containers that ran to completion during the step,
	// Released the containers a delete stopped, with the placement they had.
	Exited   []ContainerPlacement `json:"exited,omitempty"`
	Released []ContainerPlacement `json:"released,omitempty"`
	// Rejected are the containers the step could not place or resize.
	Rejected []Rejection `json:"rejected,omitempty"`
	// Restart is what a restart step did.
	Restart *RestartReport `json:"restart,omitempty"`
	// SharedCPUs and SharedMems are the shared pool after the step, and
	// the cpuset.mems of its containers.
	SharedCPUs string `json:"sharedCPUs"`
	SharedMems string `json:"sharedMems"`
	// Running counts the containers running after the step.
	Running int `json:"running"`
	// Warnings are the problems of capacity that began with this step.
	Warnings []Warning `json:"warnings,omitempty"`
}

// ContainerPlacement is where a container runs and why.
type ContainerPlacement struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Pool      string `json:"pool"`
	CPUs      string `json:"cpus"`
	Mems      string `json:"mems"`
	// NUMANodes are the nodes of the container's CPUs; Affinity is the
	// NUMA affinity the Topology Manager admitted it with (none under the
	// none policy, and for shared containers).
	NUMANodes []int `json:"numaNodes"`
	Affinity  []int `json:"affinity,omitempty"`
	// CPURequest is the container's CPU request in millicores, as its pod
	// spec says.
	CPURequest int64 `json:"cpuRequestMilli"`
	// MemoryBytes is the memory the Memory Manager accounts on Mems
	// (Guaranteed containers with exclusive CPUs).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// HugePages are the hugepage bytes accounted on Mems, by page size as
	// the kubelet names it ("2MB").
	HugePages map[string]int64 `json:"hugePages,omitempty"`
	Reason    string           `json:"reason"`
	// Unplaced: a restart could not place it as it asks; it is confined to
	// the shared pool.
	Unplaced bool `json:"unplaced,omitempty"`
	// Change is what the step did to the container: created, resized,
	// updated (moved because of another container) or replaced (by a
	// restart); empty in lists of containers as they were.
	Change string `json:"change,omitempty"`
}

// Rejection is a container that could not be placed or resized.
type Rejection struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Error     string `json:"error"`
}

// RestartReport is what a plugin restart did: how many running
// containers kept their placement, and which moved ("namespace/pod/
// container"), which should be none.
type RestartReport struct {
	Kept  int      `json:"kept"`
	Moved []string `json:"moved"`
}

// Failure is why a run stopped before its last step.
type Failure struct {
	Step int `json:"step"`
	Position
	Message string `json:"message"`
}

// Warning is a problem of capacity: a pool whose containers request more
// CPUs than it has.
type Warning struct {
	Step int `json:"step"` // after which it held
	Position
	Pool       string `json:"pool"`
	Containers int    `json:"containers"`
	// RequestedMilliCPU is what the pool's containers request together;
	// CPUs what the pool has.
	RequestedMilliCPU int64  `json:"requestedMilliCPU"`
	CPUs              int    `json:"cpus"`
	Message           string `json:"message"`
}

// State is the state after the last step run.
type State struct {
	// StepsRun counts the steps done; fewer than the workload's when a step
	// failed.
	StepsRun   int                  `json:"stepsRun"`
	SharedCPUs string               `json:"sharedCPUs"`
	SharedMems string               `json:"sharedMems"`
	Containers []ContainerPlacement `json:"containers"`
	// Pools counts the running containers per pool.
	Pools map[string]int `json:"pools"`
	// PodReservations are the CPUs the Topology Manager's pod scope holds
	// for pods, by pod ("namespace/name").
	PodReservations map[string]string `json:"podReservations,omitempty"`
	// Usage is policy.Usage: per NUMA node and pool, capacity, granted and
	// free CPUs, and the Memory Manager's memory.
	Usage []policy.NodeUsage `json:"usage"`
	// Peak is the state after the step that left the fewest CPUs free.
	Peak Peak `json:"peak"`
	// Warnings are the pools overcommitted at the end, and the worst
	// overcommitment of each pool during the run.
	Warnings []Warning `json:"warnings,omitempty"`
	// Refusals counts the containers refused during the run.
	Refusals int `json:"refusals"`
}

// Peak is the use of the machine after the step that left the smallest
// shared pool (the most CPUs granted), and of those the most memory
// granted; the first such step.
type Peak struct {
	Step int `json:"step"`
	Position
	SharedCPUs string             `json:"sharedCPUs"`
	Usage      []policy.NodeUsage `json:"usage"`
}

// Sink takes the records of a run as they come.
type Sink interface {
	Write(Record) error
}

// jsonSink writes every record as one line of JSON.
type jsonSink struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func newJSONSink(w io.Writer) *jsonSink {
	b := bufio.NewWriter(w)
	return &jsonSink{w: b, enc: json.NewEncoder(b)}
}

func (s *jsonSink) Write(r Record) error {
	if err := s.enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	// A step is on its way to the reader once it is done; the buffer only
	// saves the system calls of one record's pieces.
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
