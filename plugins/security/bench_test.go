package main_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

// ruleProfile is a deny-by-default profile of n rules, each allowing ioctl
// with one request number (the shape of device allowlists); 300 rules is
// larger than Docker's default profile (60 rules).
func ruleProfile(n int) string {
	rules := make([]string, n)
	for i := range rules {
		rules[i] = fmt.Sprintf(`{"names": ["ioctl"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": %d, "op": "SCMP_CMP_EQ"}]}`, 0x5400+i)
	}
	return `{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [` + strings.Join(rules, ",\n") + `]}`
}

// BenchmarkCreateContainer measures the CreateContainer round trip through
// the runtime's NRI adaptation with the security plugin binary (validator
// included, as deployed): for a container it leaves alone (already
// RuntimeDefault), one that gets the runtime default profile, and one that
// names a 300-rule profile. Profiles are converted once and cached, so the
// cost after the first container is the lookup, the policy's transfer to
// the runtime and its application to the spec. Each pod is made and removed
// untimed.
func BenchmarkCreateContainer(b *testing.B) {
	cases := []struct {
		name, annotation, spec string
	}{
		{name: "untouched", spec: "securityContext: {seccompProfile: {type: RuntimeDefault}}"},
		{name: "default-profile"},
		{name: "300-rule-profile", annotation: "rules-300.json"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			// Info, as in production: one line per decision.
			n := startNode(b, nodeOptions{config: "seccomp: {profile-dir: \"{{profiles}}\"}\n", logLevel: "info",
				profiles: map[string]string{"rules-300.json": ruleProfile(300)}})
			annotations := map[string]string{}
			if tc.annotation != "" {
				annotations["seccomp.nri-suite.io/pod"] = tc.annotation
			}
			var took, plugin []time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				p := n.rt.NewPod(b, harness.ParsePod(b, podYAML("default", fmt.Sprintf("bench-%d", i), annotations, tc.spec)))
				require.NoError(b, n.rt.RunPodSandbox(p))
				b.StartTimer()
				start := time.Now()
				err := n.rt.CreateContainer(p.Container("app"))
				d := time.Since(start)
				b.StopTimer()
				require.NoError(b, err)
				took = append(took, d)
				plugin = append(plugin, n.rt.PluginLatency("40-security", "CreateContainer"))
				if tc.name != "untouched" {
					require.NotNil(b, p.Container("app").Spec().Linux.Seccomp, "the policy reached the spec")
				}
				n.rt.RemovePod(b, p)
				i++
				b.StartTimer()
			}
			report(b, "", took)
			report(b, "plugin-", plugin)
		})
	}
}

// report adds the median and 99th percentile of durations to the results.
func report(b *testing.B, prefix string, durations []time.Duration) {
	slices.Sort(durations)
	at := func(p int) float64 {
		return float64(durations[(len(durations)-1)*p/100].Microseconds())
	}
	b.ReportMetric(at(50), prefix+"p50-µs")
	b.ReportMetric(at(99), prefix+"p99-µs")
}
