package nriplugin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
)

// metrics are fed from the plugin's own decisions and from the reports the
// helpers leave in the coordination directories: the waits and stops happen
// inside the containers, where the plugin cannot see them.
type metrics struct {
	containers   *prometheus.CounterVec
	invalid      prometheus.Counter
	unsupported  prometheus.Counter
	mainWait     prometheus.Histogram
	timeouts     *prometheus.CounterVec
	orderedStops *prometheus.CounterVec
	badReports   prometheus.Counter
}

func newMetrics(namespace string) *metrics {
	return &metrics{
		containers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "containers_total",
			Help: "Containers of annotated pods given the helper, by role (main, sidecar).",
		}, []string{"role"}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "invalid_annotations_total",
			Help: "Container creations refused because of a bad sidecar-order annotation.",
		}),
		unsupported: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "args_dropped_total",
			Help: "Containers of annotated pods the order could not be enforced for: the runtime dropped (or is known to drop) the NRI args adjustment.",
		}),
		mainWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "main_wait_seconds",
			Help:    "How long a main container waited for its pod's sidecars to be ready.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "readiness_timeouts_total",
			Help: "Containers that stopped waiting for a sidecar that was not ready in time, by role and action (start, fail).",
		}, []string{"role", "action"}),
		orderedStops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ordered_stops_total",
			Help: "Sidecars stopped by their helper in order, by trigger (mains-exited, signal).",
		}, []string{"trigger"}),
		badReports: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "report_errors_total",
			Help: "Helper reports that could not be read.",
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	return plugin.RegisterMetrics(reg, m.containers, m.invalid, m.unsupported, m.mainWait, m.timeouts, m.orderedStops, m.badReports)
}

// observe counts one helper's report.
func (m *metrics) observe(r coord.Report) {
	if r.Role == helper.RoleMain {
		m.mainWait.Observe(time.Duration(r.Waited).Seconds())
	}
	if len(r.TimedOut) > 0 {
		m.timeouts.WithLabelValues(r.Role, r.Action).Inc()
	}
	if r.Stop != "" {
		m.orderedStops.WithLabelValues(r.Stop).Inc()
	}
}
