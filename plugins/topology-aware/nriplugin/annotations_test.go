package nriplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

func TestParseAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        Preferences
	}{
		{"none", nil, Preferences{}},
		{"pod-wide shared", map[string]string{"cpu.nri-suite.io": "shared"},
			Preferences{CPU: policy.CPUShared, CPUAnnotation: `cpu.nri-suite.io="shared"`}},
		{"reserved, as written", map[string]string{"cpu.nri-suite.io/pod": " reserved"},
			Preferences{CPU: policy.CPUReserved, CPUAnnotation: `cpu.nri-suite.io/pod=" reserved"`}},
		{"prefer isolated", map[string]string{"cpu.nri-suite.io": "prefer-isolated"},
			Preferences{CPU: policy.CPUIsolatedPrefer, CPUAnnotation: `cpu.nri-suite.io="prefer-isolated"`}},
		{"require isolated for this container only", map[string]string{
			"cpu.nri-suite.io/container.app":   "require-isolated",
			"cpu.nri-suite.io/container.other": "shared",
		}, Preferences{CPU: policy.CPUIsolatedRequire, CPUAnnotation: `cpu.nri-suite.io/container.app="require-isolated"`}},
		{"container auto undoes the pod's choice", map[string]string{
			"cpu.nri-suite.io/pod":           "shared",
			"cpu.nri-suite.io/container.app": "auto",
		}, Preferences{CPU: policy.CPUAuto}},
		{"cpu-less memory", map[string]string{"memory.nri-suite.io": "include-cpuless"}, Preferences{CPULessMemory: true}},
		{"memory on cpu nodes, spaces trimmed", map[string]string{"memory.nri-suite.io": " cpu-nodes\n"}, Preferences{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAnnotations(k8s.NewAnnotations(tc.annotations, "app"))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseAnnotationsErrors(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		key, value  string
		want        string
	}{
		{"unknown cpu value", map[string]string{"cpu.nri-suite.io/container.app": "exclusive"},
			"cpu.nri-suite.io/container.app", "exclusive", `"auto", "shared", "reserved", "prefer-isolated", "require-isolated"`},
		{"case matters", map[string]string{"cpu.nri-suite.io": "Shared"}, "cpu.nri-suite.io", "Shared", `"shared"`},
		{"unknown memory value", map[string]string{"memory.nri-suite.io/pod": "hbm"},
			"memory.nri-suite.io/pod", "hbm", `"cpu-nodes", "include-cpuless"`},
		{"unknown cpu suffix", map[string]string{"cpu.nri-suite.io/bogus": "shared", "cpu.nri-suite.io/pod": "reserved"},
			"cpu.nri-suite.io/bogus", "shared", "want a key of the form cpu.nri-suite.io, cpu.nri-suite.io/pod or cpu.nri-suite.io/container.<name>"},
		{"unknown memory suffix", map[string]string{"memory.nri-suite.io/containers.app": "include-cpuless"},
			"memory.nri-suite.io/containers.app", "include-cpuless", "want a key of the form memory.nri-suite.io,"},
		{"cpu value above the limit", map[string]string{"cpu.nri-suite.io": strings.Repeat("shared,", 1<<17)},
			"cpu.nri-suite.io", strings.Repeat("shared,", 1<<17), "…(917504 bytes): want a value of at most 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAnnotations(k8s.NewAnnotations(tc.annotations, "app"))
			var annErr *k8s.AnnotationError
			require.True(t, errors.As(err, &annErr), "a typed error: %v", err)
			assert.Equal(t, tc.key, annErr.Key)
			assert.Equal(t, tc.value, annErr.Value)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 2048, "the error quotes a bounded prefix")
		})
	}
}

func FuzzParseAnnotations(f *testing.F) {
	for _, seed := range [][2]string{
		{"shared", ""}, {"require-isolated", "include-cpuless"}, {"auto", "cpu-nodes"}, {"bogus", ""}, {"", "x"},
		{strings.Repeat("x", 1<<13), ""}, {"shared", strings.Repeat("\xff", 1<<13)},
	} {
		f.Add(seed[0], seed[1])
	}
	allowed := map[policy.CPUPreference]bool{
		policy.CPUAuto: true, policy.CPUShared: true, policy.CPUReserved: true,
		policy.CPUIsolatedPrefer: true, policy.CPUIsolatedRequire: true,
	}
	f.Fuzz(func(t *testing.T, cpu, memory string) {
		prefs, err := ParseAnnotations(k8s.NewAnnotations(map[string]string{
			"cpu.nri-suite.io/container.app": cpu,
			"memory.nri-suite.io":            memory,
		}, "app"))
		if err != nil {
			var annErr *k8s.AnnotationError
			if !errors.As(err, &annErr) {
				t.Fatalf("untyped error %v", err)
			}
			assert.Less(t, len(err.Error()), 2048, "the error quotes a bounded prefix")
			return
		}
		if !allowed[prefs.CPU] {
			t.Fatalf("accepted cpu preference %q from %q", prefs.CPU, cpu)
		}
	})
}
