package nriplugin

import (
	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// The pod annotations the plugin reads, each also as <key>/pod and
// <key>/container.<name> (see k8s.Annotations for the precedence).
const (
	// AnnotationCPU chooses the CPU pool: auto (the default: the kubelet's
	// static policy), shared, reserved, prefer-isolated or require-isolated.
	AnnotationCPU = "cpu.nri-suite.io"
	// AnnotationMemory chooses the memory nodes: cpu-nodes (the default: the
	// nodes of the container's CPUs) or include-cpuless (also the closest
	// CPU-less memory nodes: HBM, PMEM, CXL).
	AnnotationMemory = "memory.nri-suite.io"
)

// The values of AnnotationCPU beyond the policy's preferences: "auto" exists
// so that a container-level annotation can undo a pod-level one.
const cpuAuto = "auto"

// The values of AnnotationMemory.
const (
	MemoryCPUNodes       = "cpu-nodes"
	MemoryIncludeCPULess = "include-cpuless"
)

// Preferences are what a container's annotations ask of the policy.
type Preferences struct {
	CPU           policy.CPUPreference
	CPUAnnotation string // the annotation that set CPU, key="value", for errors
	CPULessMemory bool
}

// ParseAnnotations reads the container's preferences. An absent annotation
// means the default; a bad one is a *k8s.AnnotationError naming the key, the
// value and the values allowed.
func ParseAnnotations(a k8s.Annotations) (Preferences, error) {
	var prefs Preferences
	cpu, ok, err := a.OneOf(AnnotationCPU, cpuAuto, string(policy.CPUShared), string(policy.CPUReserved),
		string(policy.CPUIsolatedPrefer), string(policy.CPUIsolatedRequire))
	if err != nil {
		return prefs, err
	}
	if ok && cpu != cpuAuto {
		prefs.CPU = policy.CPUPreference(cpu)
		written, key, _, _ := a.Lookup(AnnotationCPU) // the form that won, checked by OneOf
		prefs.CPUAnnotation = quote.Bare(key) + "=" + quote.Value(written)
	}
	mem, _, err := a.OneOf(AnnotationMemory, MemoryCPUNodes, MemoryIncludeCPULess)
	if err != nil {
		return prefs, err
	}
	prefs.CPULessMemory = mem == MemoryIncludeCPULess
	return prefs, nil
}
