package classes

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func TestChoosePrecedence(t *testing.T) {
	cfg, err := parse(t, exampleConfig)
	require.NoError(t, err)
	tests := []struct {
		name        string
		ctr         Container
		blockIO, rd string
	}{
		{"by QoS class", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort}, "throttled", "bronze"},
		{"a QoS class without one gets none", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBurstable}, "", ""},
		{"the namespace beats the QoS class", Container{Name: "app", Namespace: "batch", QOS: k8s.QOSGuaranteed}, "throttled", "gold"},
		{"the kubelet's pod annotation beats the namespace", Container{Name: "app", Namespace: "batch", QOS: k8s.QOSGuaranteed,
			PodAnnotations: map[string]string{"blockio.resources.beta.kubernetes.io/pod": "fast"}}, "fast", "gold"},
		{"the kubelet's container annotation beats its pod annotation", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort,
			PodAnnotations: map[string]string{
				"blockio.resources.beta.kubernetes.io/pod":           "throttled",
				"blockio.resources.beta.kubernetes.io/container.app": "fast",
				"rdt.resources.beta.kubernetes.io/container.app":     "gold",
			}}, "fast", "gold"},
		{"another container's kubelet annotation does not apply", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort,
			PodAnnotations: map[string]string{"blockio.resources.beta.kubernetes.io/container.db": "fast"}}, "throttled", "bronze"},
		{"the suite's bare annotation beats the kubelet's", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort,
			PodAnnotations: map[string]string{
				"blockio.resources.beta.kubernetes.io/container.app": "throttled",
				"blockio.nri-suite.io":                               "fast",
			}}, "fast", "bronze"},
		{"the suite's pod annotation beats its bare one", Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort,
			PodAnnotations: map[string]string{
				"blockio.nri-suite.io":     "throttled",
				"blockio.nri-suite.io/pod": "fast",
				"rdt.nri-suite.io/pod":     "gold",
			}}, "fast", "gold"},
		{"the suite's container annotation beats its pod annotation", Container{Name: "app", Namespace: "default", QOS: k8s.QOSGuaranteed,
			PodAnnotations: map[string]string{
				"blockio.nri-suite.io/pod":           "fast",
				"blockio.nri-suite.io/container.app": " throttled\n",
				"rdt.nri-suite.io/container.app":     RootRDTClass,
			}}, "throttled", RootRDTClass},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for kind, want := range map[Kind]string{BlockIO: tc.blockIO, RDT: tc.rd} {
				got, err := cfg.Rules(kind).Choose(tc.ctr)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s class", kind)
			}
		})
	}
}

func TestChooseLeavesTheKubeletsAnnotationsToTheRuntimeWithoutClasses(t *testing.T) {
	cfg, err := parse(t, "")
	require.NoError(t, err)
	got, err := cfg.BlockIO.Choose(Container{Name: "app", QOS: k8s.QOSBestEffort,
		PodAnnotations: map[string]string{"blockio.resources.beta.kubernetes.io/pod": "whatever-the-runtime-has"}})
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestChooseErrors(t *testing.T) {
	cfg, err := parse(t, exampleConfig)
	require.NoError(t, err)
	tests := []struct {
		name        string
		kind        Kind
		annotations map[string]string
		want        string
	}{
		{"an unknown class", BlockIO, map[string]string{"blockio.nri-suite.io/container.app": "turbo"},
			`annotation blockio.nri-suite.io/container.app="turbo": want one of "fast", "throttled" (the classes of the plugin's blockio.config)`},
		{"an unknown class in the kubelet's annotation", RDT, map[string]string{"rdt.resources.beta.kubernetes.io/pod": "platinum"},
			`annotation rdt.resources.beta.kubernetes.io/pod="platinum": want one of "bronze", "gold", "system/default"`},
		{"a class pods may not choose", RDT, map[string]string{"rdt.nri-suite.io": "bronze"},
			`annotation rdt.nri-suite.io="bronze": want a class that pods may choose: the configuration sets kubernetes.denyPodAnnotation for this one`},
		{"a key of no form", BlockIO, map[string]string{"blockio.nri-suite.io/containers.app": "fast"},
			`annotation blockio.nri-suite.io/containers.app="fast": want a key of the form blockio.nri-suite.io, blockio.nri-suite.io/pod or blockio.nri-suite.io/container.<name>`},
		{"an overlong value", BlockIO, map[string]string{"blockio.nri-suite.io": strings.Repeat("x", 300)},
			`want a value of at most 253 bytes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cfg.Rules(tc.kind).Choose(Container{Name: "app", Namespace: "default", QOS: k8s.QOSBurstable, PodAnnotations: tc.annotations})
			require.Error(t, err)
			var annErr *k8s.AnnotationError
			require.ErrorAs(t, err, &annErr)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzChoose feeds the annotation parsers of both kinds: every answer is a
// defined class or none, every refusal an annotation error of bounded
// length, nothing panics.
func FuzzChoose(f *testing.F) {
	cfg, err := parse(f, exampleConfig)
	require.NoError(f, err)
	for _, seed := range [][3]string{
		{"blockio.nri-suite.io", "fast", "app"},
		{"blockio.nri-suite.io/container.app", " throttled ", "app"},
		{"rdt.resources.beta.kubernetes.io/container.app", "gold", "app"},
		{"rdt.resources.beta.kubernetes.io/pod", "bronze", ""},
		{"rdt.nri-suite.io/pod", "system/default", "x"},
		{"rdt.nri-suite.io/bogus", "gold", "app"},
		{"blockio.nri-suite.io", strings.Repeat("\xff", 300), "app"},
	} {
		f.Add(seed[0], seed[1], seed[2], "batch")
	}
	f.Fuzz(func(t *testing.T, key, value, container, namespace string) {
		ctr := Container{Name: container, Namespace: namespace, QOS: k8s.QOSBestEffort, PodAnnotations: map[string]string{key: value}}
		for _, kind := range Kinds {
			rules := cfg.Rules(kind)
			class, err := rules.Choose(ctr)
			if err != nil {
				var annErr *k8s.AnnotationError
				if !errors.As(err, &annErr) {
					t.Fatalf("%s: untyped error %v", kind, err)
				}
				assert.Less(t, len(err.Error()), 2048, "the error quotes a bounded prefix")
				continue
			}
			if class != "" && !rules.Defined(class) {
				t.Fatalf("%s: chose class %q, which is not defined, from %q=%q", kind, class, key, value)
			}
		}
	})
}

// BenchmarkClassStep is what CreateContainer spends on classes: choosing
// both classes and setting them in the adjustment, for a container by its
// QoS class and for one annotated (the suite's container key beating the
// kubelet's, among a pod's usual annotations).
func BenchmarkClassStep(b *testing.B) {
	cfg, err := parse(b, exampleConfig)
	require.NoError(b, err)
	tracker := NewTracker(NewNode(testLog(), NodeOptions{}), "bench")
	require.NoError(b, tracker.Configure(cfg))
	usual := map[string]string{
		"kubernetes.io/config.seen": "2026-01-01T00:00:00Z", "kubernetes.io/config.source": "api",
		"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
	}
	annotated := map[string]string{
		"blockio.nri-suite.io/container.app":                 "fast",
		"blockio.resources.beta.kubernetes.io/container.app": "throttled",
		"rdt.nri-suite.io/pod":                               "gold",
	}
	for k, v := range usual {
		annotated[k] = v
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{{"by-qos", usual}, {"annotated", annotated}} {
		b.Run(tc.name, func(b *testing.B) {
			ctr := Container{Name: "app", Namespace: "default", QOS: k8s.QOSBestEffort, PodAnnotations: tc.annotations}
			for b.Loop() {
				a, err := tracker.Assign(ctr)
				if err != nil {
					b.Fatal(err)
				}
				tracker.Set("ctr", &api.ContainerAdjustment{}, a)
			}
		})
	}
}
