package simulate

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// summarySink writes the records for a reader: a line per step and per
// container it changed, then the use of every NUMA node at the peak and at
// the end, and the warnings.
type summarySink struct {
	w *bufio.Writer
}

func newSummarySink(w io.Writer) *summarySink { return &summarySink{w: bufio.NewWriter(w)} }

func (s *summarySink) Write(r Record) error {
	var b strings.Builder
	switch {
	case r.Machine != nil:
		m := r.Machine
		fmt.Fprintf(&b, "machine: %s, cpus %s, NUMA nodes %v, isolated %q, reserved %q\n", m.Source, m.CPUs, m.Nodes, m.Isolated, m.Reserved)
	case r.Step != nil:
		writeStep(&b, r.Step)
	case r.Error != nil:
		fmt.Fprintf(&b, "FAILED at step %d (%s): %s\n", r.Error.Step, r.Error.Position, r.Error.Message)
	case r.Final != nil:
		writeFinal(&b, r.Final)
	}
	if _, err := s.w.WriteString(b.String()); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

func writeStep(b *strings.Builder, s *StepReport) {
	subject := strings.Join(s.Objects, ", ")
	if s.Pod != "" {
		subject = s.Pod + "/" + s.Container
	}
	fmt.Fprintf(b, "step %d (%s) %s%s: %d running, shared cpus %s\n", s.Step, s.Position, s.Kind, prefixed(" ", subject), s.Running, s.SharedCPUs)
	for _, c := range s.Changed {
		fmt.Fprintf(b, "  %-8s %s\n", c.Change, summaryLine(c))
	}
	if s.Followed > 0 {
		fmt.Fprintf(b, "  %-8s %s to the shared pool\n", "followed", plural(s.Followed, "shared container"))
	}
	for _, c := range s.Exited {
		fmt.Fprintf(b, "  %-8s %s\n", "exited", summaryLine(c))
	}
	for _, c := range s.Released {
		fmt.Fprintf(b, "  %-8s %s\n", "released", summaryLine(c))
	}
	for _, c := range s.Rejected {
		fmt.Fprintf(b, "  %-8s %s/%s/%s: %s\n", "REFUSED", c.Namespace, c.Pod, c.Container, c.Error)
	}
	if rr := s.Restart; rr != nil {
		fmt.Fprintf(b, "  restart: %d kept, %d moved%s\n", rr.Kept, len(rr.Moved), prefixed(": ", strings.Join(rr.Moved, ", ")))
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(b, "  WARNING  %s\n", w.Message)
	}
}

func writeFinal(b *strings.Builder, st *State) {
	if st.Peak.Step > 0 {
		fmt.Fprintf(b, "\nat the peak, after step %d (%s): shared cpus %s\n", st.Peak.Step, st.Peak.Position, st.Peak.SharedCPUs)
		writeNodeTable(b, st.Peak.Usage)
	}
	fmt.Fprintf(b, "\nat the end, after step %d: shared cpus %s\n", st.StepsRun, st.SharedCPUs)
	writeNodeTable(b, st.Usage)
	if len(st.Warnings) > 0 {
		b.WriteString("\nwarnings:\n")
		for _, w := range st.Warnings {
			fmt.Fprintf(b, "  %s\n", w.Message)
		}
	}
	pools := make([]string, 0, len(st.Pools))
	for _, pool := range slices.Sorted(maps.Keys(st.Pools)) {
		pools = append(pools, fmt.Sprintf("%s %d", pool, st.Pools[pool]))
	}
	fmt.Fprintf(b, "\ncontainers: %s; %d refused during the run\n", orNone(strings.Join(pools, ", ")), st.Refusals)
}

// nodeUse is one NUMA node's line of the table.
type nodeUse struct {
	node                          int
	cpus, exclusive, shared, free int
	requested                     int64 // millicores
	memory, memoryFree            uint64
}

// nodeUses sums policy.Usage's rows by node: its CPUs (those the plugin may
// use), the CPUs granted exclusively (isolated ones included), the shared
// pool's CPUs there and what the shared and reserved containers request of
// them, the CPUs that can still be granted, and the Memory Manager's
// memory.
func nodeUses(usage []policy.NodeUsage) []nodeUse {
	var out []nodeUse
	for _, u := range usage {
		if len(out) == 0 || out[len(out)-1].node != u.Node {
			out = append(out, nodeUse{node: u.Node})
		}
		n := &out[len(out)-1]
		switch u.Pool {
		case policy.PoolExclusive, policy.PoolIsolated:
			n.cpus += u.CapacityCPUs
			n.exclusive += int(u.GrantedMilliCPU / 1000)
			n.free += u.FreeCPUs
			n.memory += u.MemoryCapacity
			n.memoryFree += u.MemoryFree
		case policy.PoolShared:
			n.shared += u.CapacityCPUs
			n.requested += u.GrantedMilliCPU
		case policy.PoolReserved:
			n.cpus += u.CapacityCPUs
			n.requested += u.GrantedMilliCPU
		}
	}
	return out
}

func writeNodeTable(b *strings.Builder, usage []policy.NodeUsage) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tCPUs\texclusive\tshared pool\trequested\tfree CPUs\tmemory\tfree memory\t")
	var total nodeUse
	for _, n := range nodeUses(usage) {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", n.node, n.cpus, n.exclusive, n.shared, milliCPUs(n.requested), n.free, gib(n.memory), gib(n.memoryFree))
		total.cpus += n.cpus
		total.exclusive += n.exclusive
		total.shared += n.shared
		total.requested += n.requested
		total.free += n.free
		total.memory += n.memory
		total.memoryFree += n.memoryFree
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", total.cpus, total.exclusive, total.shared, milliCPUs(total.requested), total.free, gib(total.memory), gib(total.memoryFree))
	_ = tw.Flush()
}

// milliCPUs writes millicores as CPUs: "1,804", "10.5".
func milliCPUs(m int64) string {
	whole := thousands(m / 1000)
	if frac := m % 1000; frac != 0 {
		return whole + strings.TrimRight(fmt.Sprintf(".%03d", frac), "0")
	}
	return whole
}

// thousands writes n with a comma every three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func gib(bytes uint64) string {
	return strconv.FormatFloat(float64(bytes)/(1<<30), 'f', 1, 64) + "Gi"
}

func summaryLine(c ContainerPlacement) string {
	line := fmt.Sprintf("%s/%s/%s: %s cpus %s mems %s nodes %v: %s", c.Namespace, c.Pod, c.Container, c.Pool, c.CPUs, c.Mems, c.NUMANodes, c.Reason)
	if c.Unplaced {
		line += " (UNPLACED)"
	}
	return line
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
