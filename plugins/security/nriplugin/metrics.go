package nriplugin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// Outcomes of a decision, the values of the outcome label.
const (
	// outcomePass: the rule found nothing to do.
	outcomePass = "pass"
	// outcomeExempt: policy exempts the pod (seccomp).
	outcomeExempt = "exempt"
	// outcomeApplied: the plugin confined the container (seccomp).
	outcomeApplied = "applied"
	// outcomeRefused: the container was refused.
	outcomeRefused = "refused"
	// outcomeAudited: the rule found something, logged it and let it through.
	outcomeAudited = "audited"
)

// Reasons, the values of the reason label besides "": what a decision was
// about when it was not the rule's usual case.
const (
	// reasonPodHostNamespaces: host-namespaces judged what the pod itself
	// asks for, not what a plugin changed.
	reasonPodHostNamespaces = "pod-host-namespaces"
)

type metrics struct {
	decisions *prometheus.CounterVec
}

// newMetrics registers the decision counter and the profile gauges; status
// reports the seccomp store's profile counts when scraped.
func newMetrics(reg prometheus.Registerer, namespace string, status func() (loaded, invalid int)) (*metrics, error) {
	m := &metrics{decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "decisions_total",
		Help: "Decisions per rule (seccomp, user-namespace, oci-hooks, ...), outcome (pass, exempt, applied, refused, audited) " +
			"and reason (privileged, pod-host-namespaces, or empty).",
	}, []string{"rule", "outcome", "reason"})}
	profiles := func(name, help string, pick func(loaded, invalid int) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help},
			func() float64 { return float64(pick(status())) })
	}
	collectors := []prometheus.Collector{
		m.decisions,
		profiles("profiles_loaded", "Named seccomp profiles loaded from the profile directory.",
			func(loaded, _ int) int { return loaded }),
		profiles("profiles_invalid", "Files in the profile directory rejected as invalid (never applied).",
			func(_, invalid int) int { return invalid }),
	}
	if err := plugin.RegisterMetrics(reg, collectors...); err != nil {
		return nil, err
	}
	// Every series exists from the start, so that a rate over a fresh
	// process is not missing its first decisions.
	for _, r := range config.Rules {
		for _, o := range []string{outcomePass, outcomeRefused, outcomeAudited} {
			m.decisions.WithLabelValues(string(r), o, "")
		}
	}
	return m, nil
}

func (m *metrics) decided(rule config.Rule, outcome, reason string) {
	m.decisions.WithLabelValues(string(rule), outcome, reason).Inc()
}
