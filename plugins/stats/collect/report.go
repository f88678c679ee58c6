package collect

import (
	"time"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// Report is a snapshot per pod, for people and for the sandbox's report:
// the JSON of the /stats/pods endpoint.
type Report struct {
	Time    time.Time            `json:"time"`
	Node    *Usage               `json:"node,omitempty"`
	Pods    []PodReport          `json:"pods"`
	Plugins []state.PluginStatus `json:"plugins,omitempty"`
}

// PodReport is one pod.
type PodReport struct {
	Namespace  string            `json:"namespace"`
	Name       string            `json:"name"`
	UID        string            `json:"uid,omitempty"`
	ID         string            `json:"id"`
	Cgroup     string            `json:"cgroup,omitempty"`
	Usage      *Usage            `json:"usage,omitempty"`
	Containers []ContainerReport `json:"containers"`
}

// ContainerReport is one running container.
type ContainerReport struct {
	Name    string     `json:"name"`
	ID      string     `json:"id"`
	Image   string     `json:"image,omitempty"`
	Cgroup  string     `json:"cgroup,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	Usage   *Usage     `json:"usage,omitempty"`
	// CPUs and Mems are the cgroup's cpuset.
	CPUs      string                 `json:"cpus,omitempty"`
	Mems      string                 `json:"mems,omitempty"`
	Placement *Placement             `json:"placement,omitempty"`
	Devices   []state.ResourceHealth `json:"devices,omitempty"`
}

// Placement is topology-aware's record of a container.
type Placement struct {
	Pool      string `json:"pool"`
	CPUs      string `json:"cpus"`
	Mems      string `json:"mems"`
	NUMANodes []int  `json:"numaNodes,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Usage is a cgroup's sample in seconds and bytes; absent groups are nil.
type Usage struct {
	CPU      *CPUUsage       `json:"cpu,omitempty"`
	Memory   *cgstats.Memory `json:"memory,omitempty"`
	Pids     *cgstats.Pids   `json:"pids,omitempty"`
	Limits   *cgstats.Spec   `json:"limits,omitempty"`
	Pressure *PressureUsage  `json:"pressure,omitempty"`
}

// CPUUsage is cumulative CPU time in seconds.
type CPUUsage struct {
	UsageSeconds     float64 `json:"usageSeconds"`
	UserSeconds      float64 `json:"userSeconds"`
	SystemSeconds    float64 `json:"systemSeconds"`
	Periods          uint64  `json:"periods"`
	ThrottledPeriods uint64  `json:"throttledPeriods"`
	ThrottledSeconds float64 `json:"throttledSeconds"`
}

// PressureUsage is PSI in seconds.
type PressureUsage struct {
	CPU    *PSIUsage `json:"cpu,omitempty"`
	Memory *PSIUsage `json:"memory,omitempty"`
	IO     *PSIUsage `json:"io,omitempty"`
}

// PSIUsage are the stall totals of one resource.
type PSIUsage struct {
	WaitingSeconds float64 `json:"waitingSeconds"` // some
	StalledSeconds float64 `json:"stalledSeconds"` // full
}

// NewReport turns a snapshot into its report.
func NewReport(s *Snapshot) Report {
	r := Report{Time: s.Time, Node: usageOf(s.Node), Pods: make([]PodReport, 0, len(s.Pods)), Plugins: s.Suite.Plugins}
	for _, p := range s.Pods {
		pr := PodReport{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ID: p.ID, Cgroup: p.Cgroup,
			Usage: usageOf(p.Sample), Containers: make([]ContainerReport, 0, len(p.Containers))}
		for _, c := range p.Containers {
			cr := ContainerReport{Name: c.Name, ID: c.ID, Image: c.Image, Cgroup: c.Cgroup, Usage: usageOf(c.Sample),
				Devices: s.Suite.Health[c.ID].Resources}
			if !c.Started.IsZero() {
				cr.Started = &c.Started
			}
			if c.Sample != nil && c.Sample.CPUSet != nil {
				cr.CPUs, cr.Mems = c.Sample.CPUSet.CPUs, c.Sample.CPUSet.Mems
			}
			if pl, ok := s.Suite.Placements[c.ID]; ok {
				cr.Placement = &Placement{Pool: pl.Pool, CPUs: pl.CPUs, Mems: pl.Mems, NUMANodes: pl.NUMANodes, Reason: pl.Reason}
			}
			pr.Containers = append(pr.Containers, cr)
		}
		r.Pods = append(r.Pods, pr)
	}
	return r
}

func usageOf(s *cgstats.Sample) *Usage {
	if s == nil {
		return nil
	}
	u := &Usage{Memory: s.Memory, Pids: s.Pids}
	if s.Spec.HasCPU || s.Spec.HasMemory {
		spec := s.Spec
		u.Limits = &spec
	}
	if c := s.CPU; c != nil {
		u.CPU = &CPUUsage{UsageSeconds: seconds(c.UsageNs), UserSeconds: seconds(c.UserNs), SystemSeconds: seconds(c.SystemNs),
			Periods: c.Periods, ThrottledPeriods: c.ThrottledPeriods, ThrottledSeconds: seconds(c.ThrottledNs)}
	}
	if p := s.Pressure; p.CPU != nil || p.Memory != nil || p.IO != nil {
		u.Pressure = &PressureUsage{CPU: psiUsage(p.CPU), Memory: psiUsage(p.Memory), IO: psiUsage(p.IO)}
	}
	return u
}

func psiUsage(p *cgstats.PSI) *PSIUsage {
	if p == nil {
		return nil
	}
	return &PSIUsage{WaitingSeconds: usecSeconds(p.SomeUsec), StalledSeconds: usecSeconds(p.FullUsec)}
}
