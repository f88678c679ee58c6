package monitoring

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/endpointauth"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	deviceinjector "github.com/nri-suite/nri-suite/plugins/device-injector/nriplugin"
	security "github.com/nri-suite/nri-suite/plugins/security/nriplugin"
	sidecarorder "github.com/nri-suite/nri-suite/plugins/sidecar-order/nriplugin"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
	stats "github.com/nri-suite/nri-suite/plugins/stats/nriplugin"
	topologyaware "github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
)

// family is a metric family a plugin registers: its labels.
type family struct {
	labels map[string]bool
}

// registered are the metric families every plugin serves, by name, from
// the plugins' own code: each plugin's nriplugin.New, as its main.go calls
// it (topology-aware on a recorded machine's tree), with a Registerer that
// records what it registers, plus the runner's collectors
// (plugin.RunnerCollectors) and the collectors stats serves on its own
// listener.
func registered(t *testing.T) map[string]family {
	t.Helper()
	rec := &recorder{families: map[string]family{}}
	log := logrus.New()
	log.SetOutput(io.Discard)
	// One registry per plugin with the runner's collectors, as in its
	// process: a name taken twice is an error here too.
	regs := map[string]prometheus.Registerer{}
	for _, kind := range []string{"device-injector", "sidecar-order", "topology-aware", "security", "stats"} {
		regs[kind] = rec.forPlugin()
		require.NoError(t, regs[kind].Register(multi(plugin.RunnerCollectors(plugin.MetricsNamespace(kind)))), kind)
	}
	deps := func(kind string) plugin.Deps {
		return plugin.Deps{Name: kind, Index: "50", Log: log.WithField("plugin", kind), Registry: regs[kind],
			MetricsNamespace: plugin.MetricsNamespace(kind), SharedDir: t.TempDir()}
	}

	// closeAtEnd checks a plugin was built, and closes it at the end if it
	// runs something.
	closeAtEnd := func(p any, err error) {
		t.Helper()
		require.NoError(t, err)
		if c, ok := p.(io.Closer); ok {
			t.Cleanup(func() { c.Close() })
		}
	}
	closeAtEnd(deviceinjector.New(deps("device-injector"), deviceinjector.Options{SysfsRoot: "/sys"}))
	closeAtEnd(sidecarorder.New(deps("sidecar-order"), sidecarorder.Options{StateDir: t.TempDir()}))
	topo, err := sysfs.Discover("../../common/topology/testdata/smt-2s-12c-interleaved/sysfs")
	require.NoError(t, err)
	closeAtEnd(topologyaware.New(deps("topology-aware"), topologyaware.Options{Topology: topo, SysfsRoot: "/sys", StateDir: t.TempDir()}))
	closeAtEnd(security.New(deps("security"), security.Options{Proc: "/proc"}))

	// stats registers its operational metrics on the runner's registry, and
	// serves the per-container ones on its own listener from these.
	statsDeps := deps("stats")
	statsOpts := stats.DefaultOptions()
	statsOpts.Server.Addr = "" // the listener's collectors are registered below
	closeAtEnd(stats.New(statsDeps, statsOpts))
	c, err := collect.New(inventory.New(), nil, collect.DefaultOptions(), statsDeps.MetricsNamespace, statsDeps.Log)
	require.NoError(t, err)
	listener := &recordOnly{rec}
	for _, col := range append([]prometheus.Collector{collect.NewSuiteContainers(c, statsDeps.MetricsNamespace), collect.NewCAdvisor(c),
		collect.NewResource(c)}, endpointauth.NewMetrics(statsDeps.MetricsNamespace).Collectors()...) {
		require.NoError(t, listener.Register(col))
	}
	return rec.families
}

// multi is several collectors as one.
type multi []prometheus.Collector

func (m multi) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m {
		c.Describe(ch)
	}
}

func (m multi) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m {
		c.Collect(ch)
	}
}

// recorder records the families of what is registered.
type recorder struct {
	families map[string]family
}

func (r *recorder) forPlugin() prometheus.Registerer {
	return &recording{rec: r, reg: prometheus.NewRegistry()}
}

type recording struct {
	rec *recorder
	reg *prometheus.Registry
}

func (r *recording) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	return r.rec.describe(c)
}

func (r *recording) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recording) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// recordOnly records without a registry (stats' listener collectors share
// descriptors with the runner's registry by design).
type recordOnly struct{ rec *recorder }

func (r *recordOnly) Register(c prometheus.Collector) error { return r.rec.describe(c) }
func (r *recordOnly) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
func (r *recordOnly) Unregister(prometheus.Collector) bool { return false }

// descPattern reads a descriptor's name and variable labels from its
// String(): client_golang exports no accessor for them.
var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), .*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

var constLabel = regexp.MustCompile(`(?:^|,)(\w+)="`)

func (r *recorder) describe(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var errs []string
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			errs = append(errs, "cannot read descriptor "+d.String())
			continue
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			errs = append(errs, fmt.Sprintf("descriptor %s: %v", d, err))
			continue
		}
		f, ok := r.families[name]
		if !ok {
			f = family{labels: map[string]bool{}}
			r.families[name] = f
		}
		for _, pair := range constLabel.FindAllStringSubmatch(m[2], -1) {
			f.labels[pair[1]] = true
		}
		for _, l := range splitList(m[3]) {
			f.labels[strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")")] = true
		}
	}
	if errs != nil {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
