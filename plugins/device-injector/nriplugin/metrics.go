package nriplugin

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"

	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// Kinds of injected items, the values of the kind label.
const (
	kindCDI   = "cdi"
	kindNode  = "node"
	kindMount = "mount"
)

// failureReasons map error classes to reason labels, first match wins; then
// an annotation's error is "invalid-annotation" (refusals by policy name
// their annotation too), and other errors count as "other".
var failureReasons = []struct {
	err    error
	reason string
}{
	{config.ErrDenied, "policy"},
	{resolve.ErrUnresolvable, "unresolvable"},
	{ErrNoDevice, "missing-device"},
	{ErrNoMountSource, "missing-mount-source"},
	{ErrConflict, "conflict"},
	{ErrUnsupported, "unsupported"},
	{ErrPublish, "record"},
	{ErrUnhealthy, "unhealthy"},
}

func failureReason(err error) string {
	for _, r := range failureReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	var annErr *request.Error
	if errors.As(err, &annErr) {
		return "invalid-annotation"
	}
	return "other"
}

type metrics struct {
	injections   *prometheus.CounterVec
	failures     *prometheus.CounterVec
	recordErrors prometheus.Counter
}

func newMetrics(namespace string) *metrics {
	return &metrics{
		injections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "injections_total",
			Help: "Devices and mounts given to created containers, by mode (runtime, plugin) and kind (cdi, node, mount).",
		}, []string{"mode", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "failures_total",
			Help: "Container creations failed, by reason (invalid-annotation, policy, unresolvable, missing-device, missing-mount-source, conflict, unsupported, unhealthy, record, other).",
		}, []string{"reason"}),
		recordErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "record_errors_total",
			Help: "Shared-state records (device locality, device and container health) that could not be written or removed.",
		}),
	}
}

// register adds the metrics, those read from the CDI cache at scrape time
// and the devices' health.
func (m *metrics) register(reg prometheus.Registerer, namespace string, specErrors, devices func() int,
	health func() map[string]state.DeviceHealth) error {
	collectors := []prometheus.Collector{
		m.injections, m.failures, m.recordErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "spec_errors",
			Help: "Errors the CDI cache reports for spec files (invalid, conflicting), plus spec directories that cannot be read.",
		}, func() float64 { return float64(specErrors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cdi_devices",
			Help: "CDI devices the spec directories define (resolvable names).",
		}, func() float64 { return float64(devices()) }),
		newHealthCollector(namespace, health),
	}
	return plugin.RegisterMetrics(reg, collectors...)
}

// healthCollector reports the monitor's view at scrape time, so that a
// device that went away leaves no stale series behind.
type healthCollector struct {
	health     func() map[string]state.DeviceHealth
	byHealth   *prometheus.Desc
	deviceDesc *prometheus.Desc
}

// healthValues are the values of the health label.
var healthValues = []state.Health{state.HealthHealthy, state.HealthUnhealthy, state.HealthUnknown}

func newHealthCollector(namespace string, health func() map[string]state.DeviceHealth) *healthCollector {
	return &healthCollector{
		health: health,
		byHealth: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "devices_by_health"),
			"Watched devices (CDI names, and device nodes in use) by health (Healthy, Unhealthy, Unknown).",
			[]string{"health"}, nil),
		deviceDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "device_health"),
			"1 for a watched device's current health.", []string{"device", "health"}, nil),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byHealth
	ch <- c.deviceDesc
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[state.Health]int{}
	for device, h := range c.health() {
		counts[h.Health]++
		ch <- prometheus.MustNewConstMetric(c.deviceDesc, prometheus.GaugeValue, 1, device, string(h.Health))
	}
	for _, h := range healthValues {
		ch <- prometheus.MustNewConstMetric(c.byHealth, prometheus.GaugeValue, float64(counts[h]), string(h))
	}
}
