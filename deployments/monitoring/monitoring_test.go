// Package monitoring tests the chart's Grafana dashboard and Prometheus
// alerting rules (deployments/helm/nri-suite/files) against the plugins'
// code: every expression parses with Prometheus' own PromQL parser, and
// every metric it reads, with every label it matches or groups by, is one a
// plugin registers. A module of its own, so that Prometheus' dependencies
// stay out of the plugins'.
package monitoring

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	dashboardPath = "../helm/nri-suite/files/grafana-dashboard.json"
	rulesPath     = "../helm/nri-suite/files/prometheus-rules.yaml"
)

// targetLabels are the labels a scrape adds to every series: Prometheus'
// own, the Prometheus Operator's, and kubernetes_node, which the chart's
// ServiceMonitor and PodMonitor set from the pod's node.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "kubernetes_node"}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
			Query    any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// variables replaces the dashboard's template variables with values that
// parse: Grafana's interval variables with a duration, the dashboard's
// query variables with their all value.
func variables(t *testing.T, d dashboard) *strings.Replacer {
	t.Helper()
	pairs := []string{"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h"}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			require.NotEmpty(t, v.AllValue, "variable %s: an all value", v.Name)
			pairs = append(pairs, "${"+v.Name+"}", v.AllValue, "$"+v.Name, v.AllValue)
		}
	}
	return strings.NewReplacer(pairs...)
}

// labelValues is Grafana's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

func TestDashboardQueriesResolve(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(data, &d))
	families := registered(t)
	vars := variables(t, d)

	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has queries", p.Title)
		for _, target := range p.Targets {
			checkExpr(t, families, "panel "+p.Title, vars.Replace(target.Expr))
			queries++
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(map[string]any)
		require.True(t, ok, "variable %s: a query object", v.Name)
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		require.NotNil(t, m, "variable %s: label_values(selector, label)", v.Name)
		checkExpr(t, families, "variable "+v.Name, fmt.Sprintf("%s{%s!=\"\"}", m[1], m[2]))
	}
	assert.Greater(t, queries, 20, "the dashboard's queries were read")
}

// The dashboard has panels for what issue 15 asks: every plugin's
// decisions, placements per NUMA node, device health, handler latency and
// reconnects of every plugin.
func TestDashboardCoversEveryPlugin(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(data, &d))
	var all strings.Builder
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			all.WriteString(target.Expr + "\n")
		}
	}
	for _, kind := range []string{"device_injector", "sidecar_order", "topology_aware", "security", "stats"} {
		for _, m := range []string{"handler_duration_seconds_bucket", "reconnects_total", "requests_total", "handler_panics_total"} {
			assert.Contains(t, all.String(), "nri_suite_"+kind+"_"+m)
		}
	}
	for _, m := range []string{"nri_suite_device_injector_failures_total", "nri_suite_sidecar_order_containers_total",
		"nri_suite_topology_aware_grants_total", "nri_suite_security_decisions_total", "nri_suite_topology_aware_pool_node_containers",
		"nri_suite_device_injector_devices_by_health", "nri_suite_stats_container_device_health"} {
		assert.Contains(t, all.String(), m)
	}
}

func TestAlertRulesResolve(t *testing.T) {
	groups, errs := rulefmt.ParseFile(rulesPath, false, model.LegacyValidation, parser.NewParser(parser.Options{}),
		slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	families := registered(t)
	alerts := []string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkExpr(t, families, "alert "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"NRISuitePluginNotConnected", "NRISuiteHandlerPanics", "NRISuiteContainersRefused", "NRISuiteDeviceUnhealthy"} {
		assert.Contains(t, alerts, want)
	}
}

// checkExpr parses expr and checks every selector in it against families:
// the metric is registered (a histogram's or summary's _bucket, _sum and
// _count by their family), and every label matched, grouped by or joined
// on is the family's or a target label.
func checkExpr(t *testing.T, families map[string]family, where, expr string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if !assert.NoError(t, err, "%s: %s", where, expr) {
		return
	}
	// known are the labels the series reaching each node may carry.
	var check func(parser.Node) map[string]bool
	check = func(n parser.Node) map[string]bool {
		switch n := n.(type) {
		case *parser.VectorSelector:
			return checkSelector(t, families, where, n)
		case *parser.MatrixSelector:
			return check(n.VectorSelector)
		case *parser.AggregateExpr:
			known := check(n.Expr)
			for _, l := range n.Grouping {
				assert.True(t, known[l], "%s: %s groups by %q, which the series of %s lack", where, expr, l, n.Expr)
			}
			if n.Without {
				return known
			}
			grouped := map[string]bool{}
			for _, l := range n.Grouping {
				grouped[l] = true
			}
			return grouped
		case *parser.Call:
			var known map[string]bool
			for _, a := range n.Args {
				if k := check(a); k != nil {
					known = k
				}
			}
			return known
		case *parser.BinaryExpr:
			lhs, rhs := check(n.LHS), check(n.RHS)
			if n.VectorMatching != nil {
				for _, l := range n.VectorMatching.MatchingLabels {
					assert.True(t, lhs[l] || rhs[l], "%s: %s matches on %q, which neither side has", where, expr, l)
				}
			}
			if lhs == nil {
				return rhs
			}
			return lhs
		case *parser.ParenExpr:
			return check(n.Expr)
		case *parser.UnaryExpr:
			return check(n.Expr)
		case *parser.SubqueryExpr:
			return check(n.Expr)
		case *parser.StepInvariantExpr:
			return check(n.Expr)
		}
		return nil
	}
	check(e)
}

// histogramSuffixes are the series a histogram or summary family serves
// besides its name, and the label a bucket adds.
var histogramSuffixes = map[string]string{"_bucket": "le", "_sum": "", "_count": ""}

func checkSelector(t *testing.T, families map[string]family, where string, s *parser.VectorSelector) map[string]bool {
	t.Helper()
	name := s.Name
	for _, m := range s.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if !assert.NotEmpty(t, name, "%s: %s names no metric", where, s) {
		return nil
	}
	f, ok := families[name]
	known := map[string]bool{}
	if !ok {
		for suffix, label := range histogramSuffixes {
			if base, cut := strings.CutSuffix(name, suffix); cut {
				if f, ok = families[base]; ok && label != "" {
					known[label] = true
				}
			}
		}
	}
	if !assert.True(t, ok, "%s: %s is not a metric any plugin registers", where, name) {
		return nil
	}
	for l := range f.labels {
		known[l] = true
	}
	for _, l := range targetLabels {
		known[l] = true
	}
	for _, m := range s.LabelMatchers {
		if m.Name != labels.MetricName {
			assert.True(t, known[m.Name], "%s: %s matches label %q, which %s does not have (it has %v)", where, s, m.Name, name,
				slices.Sorted(func(yield func(string) bool) {
					for l := range f.labels {
						if !yield(l) {
							return
						}
					}
				}))
		}
	}
	return known
}
