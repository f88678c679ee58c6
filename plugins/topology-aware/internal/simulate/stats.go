package simulate

import (
	"fmt"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// stats follows, from what the report says of each running container, the
// load of the pools that containers share (their containers and CPU
// requests) and the memory granted: for the warnings of overcommitted
// pools and for the peak, step by step without asking the plugin for its
// whole state.
type stats struct {
	pools    map[string]*poolLoad
	memory   int64 // bytes the Memory Manager accounts, hugepages included
	refusals int
	// last is the step last counted.
	last     int
	lastPos  Position
	peak     Peak
	peakSize int   // the peak's shared pool, in CPUs
	peakMem  int64 // the memory granted at the peak
}

// poolLoad is what a pool's containers request of it.
type poolLoad struct {
	containers    int
	requested     int64 // millicores
	overcommitted bool
	// worst is the step after which the pool was most overcommitted.
	worst *Warning
}

// sharedPools are the pools whose containers share their CPUs, in the
// order of the warnings.
var sharedPools = []policy.PoolKind{policy.PoolShared, policy.PoolReserved}

func (st *stats) load(pool string) *poolLoad {
	if st.pools == nil {
		st.pools = map[string]*poolLoad{}
	}
	l := st.pools[pool]
	if l == nil {
		l = &poolLoad{}
		st.pools[pool] = l
	}
	return l
}

// track counts a container as the report now says it is placed.
func (s *Simulator) track(sc *simContainer, e ContainerPlacement) {
	sc.pool, sc.cpuRequest, sc.memory = e.Pool, e.CPURequest, e.MemoryBytes
	for _, bytes := range e.HugePages {
		sc.memory += bytes
	}
	s.stat.count(sc, 1)
}

// untrack stops counting a container (stopped, or about to be counted
// anew).
func (s *Simulator) untrack(sc *simContainer) {
	s.stat.count(sc, -1)
	sc.pool, sc.cpuRequest, sc.memory = "", 0, 0
}

func (st *stats) count(sc *simContainer, sign int) {
	st.memory += int64(sign) * sc.memory
	if sc.pool == "" {
		return
	}
	l := st.load(sc.pool)
	l.containers += sign
	l.requested += int64(sign) * sc.cpuRequest
}

// afterStep counts a step done, with the CPUs of the shared pool and of
// the reserved ones, and returns the warnings that began with it.
func (st *stats) afterStep(step *Step, sharedCPUs, reservedCPUs int) []Warning {
	st.last, st.lastPos = step.Number, step.Pos
	var began []Warning
	for _, pool := range sharedPools {
		cpus := sharedCPUs
		if pool == policy.PoolReserved {
			cpus = reservedCPUs
		}
		l := st.load(string(pool))
		over := cpus > 0 && l.requested > int64(cpus)*1000
		if over && !l.overcommitted {
			began = append(began, st.warning(pool, l, cpus, "the %s pool is overcommitted: %s"))
		}
		if over && (l.worst == nil || l.requested*int64(l.worst.CPUs) > l.worst.RequestedMilliCPU*int64(cpus)) {
			w := st.warning(pool, l, cpus, fmt.Sprintf("the %%s pool was most overcommitted after step %d (%s): %%s", step.Number, step.Pos))
			l.worst = &w
		}
		l.overcommitted = over
	}
	return began
}

func (st *stats) warning(pool policy.PoolKind, l *poolLoad, cpus int, format string) Warning {
	what := fmt.Sprintf("%s request %s on %s", plural(l.containers, "container"), cpusText(l.requested), plural(cpus, "CPU"))
	return Warning{
		Step: st.last, Position: st.lastPos, Pool: string(pool), Containers: l.containers,
		RequestedMilliCPU: l.requested, CPUs: cpus, Message: fmt.Sprintf(format, pool, what),
	}
}

// plural writes "1 container", "1,000 containers".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(int64(n)) + " " + what + "s"
}

// cpusText writes millicores as CPUs: "1 CPU", "0.5 CPUs", "1,804 CPUs".
func cpusText(milli int64) string {
	if milli == 1000 {
		return "1 CPU"
	}
	return milliCPUs(milli) + " CPUs"
}

// final returns the warnings of the end of the run: the pools
// overcommitted then, and the worst of each pool.
func (st *stats) final(sharedCPUs, reservedCPUs int) []Warning {
	var out []Warning
	for _, pool := range sharedPools {
		l := st.load(string(pool))
		if l.overcommitted {
			cpus := sharedCPUs
			if pool == policy.PoolReserved {
				cpus = reservedCPUs
			}
			out = append(out, st.warning(pool, l, cpus, fmt.Sprintf("at the end, after step %d, the %%s pool is overcommitted: %%s", st.last)))
		}
		if l.worst != nil {
			out = append(out, *l.worst)
		}
	}
	return out
}

// isPeak tells whether the state after the step is the new peak: the
// smallest shared pool so far (the most CPUs granted), or as small with
// more memory granted.
func (st *stats) isPeak(sharedCPUs int) bool {
	if st.peak.Step != 0 && (sharedCPUs > st.peakSize || sharedCPUs == st.peakSize && st.memory <= st.peakMem) {
		return false
	}
	st.peakSize, st.peakMem = sharedCPUs, st.memory
	return true
}
