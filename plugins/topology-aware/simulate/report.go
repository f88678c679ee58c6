package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// Report is the simulator's output. Every list has a fixed order (steps in
// workload order, containers in creation order, usage by node then pool),
// so that two runs of the same input print the same bytes.
type Report struct {
	Machine MachineInfo  `json:"machine"`
	Steps   []StepReport `json:"steps"`
	Final   State        `json:"final"`
}

// MachineInfo summarizes the machine the workload ran on.
type MachineInfo struct {
	Source   string `json:"source"`
	CPUs     string `json:"cpus"`
	Nodes    []int  `json:"nodes"`
	Isolated string `json:"isolated"`
}

// StepReport is what one step did.
type StepReport struct {
	Step int      `json:"step"` // from 1
	Line int      `json:"line"` // in the workload file
	Kind StepKind `json:"kind"`
	// Pod ("namespace/name") and Container are the step's subject.
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	// Rejected are the containers the step could not place or resize.
	Rejected []Rejection `json:"rejected,omitempty"`
	// Exited are init containers that ran to completion during the step,
	// with the placement they had; Released the containers a delete
	// stopped, with theirs.
	Exited   []ContainerPlacement `json:"exited,omitempty"`
	Released []ContainerPlacement `json:"released,omitempty"`
	// Restart is what a restart step restored.
	Restart *RestartReport `json:"restart,omitempty"`
	// SharedCPUs is the shared pool after the step.
	SharedCPUs string `json:"sharedCPUs"`
	// Containers are every running container after the step.
	Containers []ContainerPlacement `json:"containers"`
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
	// MemoryBytes is the memory the Memory Manager accounts on Mems
	// (Guaranteed containers with exclusive CPUs).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// HugePages are the hugepage bytes accounted on Mems, by page size as
	// the kubelet names it ("2MB").
	HugePages map[string]int64 `json:"hugePages,omitempty"`
	Reason    string           `json:"reason"`
	// Change is what the step did to the container: created, resized,
	// updated (its CPUs or memory nodes changed because of another
	// container), adopted or replaced (by a restart); empty if nothing.
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

// RestartReport is what a plugin restart did with each running container
// ("namespace/pod/container"); Moved are those whose CPUs or memory nodes
// changed, which should be none.
type RestartReport struct {
	Kept     []string `json:"kept"`
	Adopted  []string `json:"adopted"`
	Replaced []string `json:"replaced"`
	Dropped  []string `json:"dropped"`
	Moved    []string `json:"moved"`
}

// State is the state after the last step.
type State struct {
	SharedCPUs string               `json:"sharedCPUs"`
	Containers []ContainerPlacement `json:"containers"`
	// Pools counts the running containers per pool.
	Pools map[string]int `json:"pools"`
	// Usage is policy.Usage: per NUMA node and pool, capacity, granted and
	// free CPUs, and the Memory Manager's memory.
	Usage []policy.NodeUsage `json:"usage"`
}

func describeMachine(m *Machine) MachineInfo {
	nodes := m.Topology.Nodes()
	if nodes == nil {
		nodes = []int{}
	}
	return MachineInfo{
		Source:   m.Source,
		CPUs:     m.Topology.CPUs().String(),
		Nodes:    nodes,
		Isolated: m.Topology.Isolated().String(),
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteSummary writes the report as text: one line per step, then one per
// placed, exited, released or refused container, and the final pools.
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s, cpus %s, nodes %v, isolated %q\n", r.Machine.Source, r.Machine.CPUs, r.Machine.Nodes, r.Machine.Isolated)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "step %d (line %d) %s%s%s: shared cpus %s\n", s.Step, s.Line, s.Kind, prefixed(" ", s.Pod), prefixed("/", s.Container), s.SharedCPUs)
		for _, c := range s.Containers {
			if c.Change != "" {
				fmt.Fprintf(&b, "  %-8s %s\n", c.Change, summaryLine(c))
			}
		}
		for _, c := range s.Exited {
			fmt.Fprintf(&b, "  %-8s %s\n", "exited", summaryLine(c))
		}
		for _, c := range s.Released {
			fmt.Fprintf(&b, "  %-8s %s\n", "released", summaryLine(c))
		}
		for _, c := range s.Rejected {
			fmt.Fprintf(&b, "  %-8s %s/%s/%s: %s\n", "REFUSED", c.Namespace, c.Pod, c.Container, c.Error)
		}
		if rr := s.Restart; rr != nil {
			fmt.Fprintf(&b, "  restart: %d kept, %d adopted, %d replaced, %d dropped, %d moved\n",
				len(rr.Kept), len(rr.Adopted), len(rr.Replaced), len(rr.Dropped), len(rr.Moved))
		}
	}
	pools := make([]string, 0, len(r.Final.Pools))
	for _, pool := range slices.Sorted(maps.Keys(r.Final.Pools)) {
		pools = append(pools, fmt.Sprintf("%s %d", pool, r.Final.Pools[pool]))
	}
	fmt.Fprintf(&b, "final: shared cpus %s; containers: %s\n", r.Final.SharedCPUs, strings.Join(pools, ", "))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

func summaryLine(c ContainerPlacement) string {
	return fmt.Sprintf("%s/%s/%s: %s cpus %s mems %s nodes %v: %s", c.Namespace, c.Pod, c.Container, c.Pool, c.CPUs, c.Mems, c.NUMANodes, c.Reason)
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
