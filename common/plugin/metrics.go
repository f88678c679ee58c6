package plugin

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nri-suite/nri-suite/common/version"
)

// Request outcomes, the values of the outcome label.
const (
	outcomeOK    = "ok"
	outcomeError = "error"
	outcomePanic = "panic"
)

// runnerMetrics are the runner's own metrics, named <namespace>_<name>.
type runnerMetrics struct {
	panics     *prometheus.CounterVec
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	connected  prometheus.Gauge
	reconnects prometheus.Counter
}

// newRegistry returns a registry with the Go and process collectors and the runner's
// metrics registered in it.
func newRegistry(namespace string) (*prometheus.Registry, *runnerMetrics) {
	m := newRunnerMetrics(namespace)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.collectors()...)
	return reg, m
}

// RunnerCollectors are new, unregistered copies of what every runner serves
// on /metrics besides its plugin's metrics, under namespace
// (MetricsNamespace): what dashboards and alerts may query of any plugin.
func RunnerCollectors(namespace string) []prometheus.Collector {
	return newRunnerMetrics(namespace).collectors()
}

// collectors are the runner's metrics with the build info, Go and process
// collectors.
func (m *runnerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		BuildInfo(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.panics, m.requests, m.duration, m.connected, m.reconnects,
	}
}

func newRunnerMetrics(namespace string) *runnerMetrics {
	return &runnerMetrics{
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "handler_panics_total",
			Help:      "Panics recovered in the plugin's NRI handlers, by event.",
		}, []string{"event"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "requests_total",
			Help:      "NRI requests handled by the plugin, by event and outcome (ok, error, panic).",
		}, []string{"event", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "handler_duration_seconds",
			Help:      "Time spent in the plugin's NRI handlers, by event.",
			// NRI's default request timeout is 2s: resolve the range below it finely.
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2},
		}, []string{"event"}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "connected",
			Help:      "1 while the plugin is registered with the runtime, 0 otherwise.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "reconnects_total",
			Help:      "Registrations with the runtime after the first one.",
		}),
	}
}

// BuildInfo is nri_suite_build_info: 1, labelled with what the binary was
// built from (common/version), under the same name in every plugin so that
// one query finds the versions running on every node.
func BuildInfo() prometheus.Collector {
	v := version.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "nri_suite_build_info",
		Help:        "1, labelled with the version, VCS revision and Go version the plugin was built from.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": v.GoVersion},
	}, func() float64 { return 1 })
}

// RegisterMetrics registers a plugin's collectors on reg (usually
// Deps.Registry), all of them, and reports every one that could not be
// (a name taken twice, an inconsistent help or label set).
func RegisterMetrics(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	return nil
}
