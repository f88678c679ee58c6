package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The Prometheus Operator's kinds, as a cluster with its CRDs serves them.
var operatorAPIs = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

const securityPort = 9140

// httpAddr is a plugin's --http-addr.
func httpAddr(t *testing.T, r *rendered, plugin string) string {
	t.Helper()
	for _, a := range r.daemonSets[plugin].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--http-addr="); ok {
			return v
		}
	}
	t.Fatalf("%s has no --http-addr", plugin)
	return ""
}

// podIPEnv is the POD_IP variable of a plugin's container, if any.
func podIPEnv(r *rendered, plugin string) *corev1.EnvVar {
	for _, e := range r.daemonSets[plugin].Spec.Template.Spec.Containers[0].Env {
		if e.Name == "POD_IP" {
			return &e
		}
	}
	return nil
}

// checkNotScraped: nothing for Prometheus, and security's metrics on the
// node's loopback alone.
func checkNotScraped(t *testing.T, r *rendered) {
	t.Helper()
	assert.Empty(t, r.services, "no Services")
	assert.Empty(t, r.serviceMonitors, "no ServiceMonitor")
	assert.Empty(t, r.podMonitors, "no PodMonitor")
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", securityPort), httpAddr(t, r, "security"))
	assert.Nil(t, podIPEnv(r, "security"))
	for name, ds := range r.daemonSets {
		assert.NotContains(t, ds.Spec.Template.Annotations, "prometheus.io/scrape", name)
	}
}

// checkScraped: security (on the node's network) serves its metrics on
// the address the pod reports, the node's, besides its loopback where it
// is probed; the other plugins on their pod's every address, as always.
func checkScraped(t *testing.T, r *rendered) {
	t.Helper()
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d,[$(POD_IP)]:%d", securityPort, securityPort), httpAddr(t, r, "security"))
	env := podIPEnv(r, "security")
	require.NotNil(t, env, "security's POD_IP")
	require.NotNil(t, env.ValueFrom)
	assert.Equal(t, "status.podIP", env.ValueFrom.FieldRef.FieldPath)
	probe := r.daemonSets["security"].Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet
	assert.Equal(t, "127.0.0.1", probe.Host, "still probed on loopback")
	for _, name := range []string{"device-injector", "sidecar-order", "topology-aware", "stats"} {
		assert.Equal(t, fmt.Sprintf("0.0.0.0:%d", r.daemonSets[name].Spec.Template.Spec.Containers[0].Ports[0].ContainerPort),
			httpAddr(t, r, name), name)
		assert.Nil(t, podIPEnv(r, name), name)
	}
}

// Without the operator's CRDs and with the defaults, nothing is rendered
// for Prometheus; the default rendering is the plain manifests'
// (TestPlainManifestsInSync).
func TestChartPrometheusOffWithoutOperator(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	checkNotScraped(t, r)
	assert.Empty(t, r.rules)
	assert.Empty(t, r.otherConfigMaps, "no dashboard")
}

// auto: where the cluster serves the operator's kinds, a Service per
// plugin, one ServiceMonitor for them all and the alerts.
func TestChartPrometheusAuto(t *testing.T) {
	r, err := renderWithAPIs(t, operatorAPIs, nil)
	require.NoError(t, err)
	checkScraped(t, r)
	assert.Empty(t, r.podMonitors, "podMonitor defaults to false: not both")
	require.Len(t, r.services, 5, "a Service per plugin")
	for plugin, ds := range r.daemonSets {
		svc := r.services[ds.Name]
		require.NotNil(t, svc, plugin)
		assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "%s: headless", plugin)
		assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ds.Spec.Template.Labels)), "%s: selects the pods", plugin)
		var wantPorts []string
		for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
			wantPorts = append(wantPorts, fmt.Sprintf("%s:%d", p.Name, p.ContainerPort))
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			assert.Equal(t, p.Name, p.TargetPort.String(), "%s: the container's named port", plugin)
			ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.Port))
		}
		assert.Equal(t, wantPorts, ports, plugin)
	}

	require.Len(t, r.serviceMonitors, 1)
	sm := r.serviceMonitors[releaseName]
	require.NotNil(t, sm)
	selector, err := metav1LabelSelector(sm.Spec.Selector)
	require.NoError(t, err)
	for name, svc := range r.services {
		assert.True(t, selector.Matches(labels.Set(svc.Labels)), "the ServiceMonitor selects %s", name)
	}
	assert.Equal(t, []string{releaseNamespace}, sm.Spec.NamespaceSelector.MatchNames)
	require.Len(t, sm.Spec.Endpoints, 3)
	own := sm.Spec.Endpoints[0]
	assert.Equal(t, "http", own.Port)
	assert.Equal(t, "/metrics", own.Path)
	checkNodeLabel(t, own.RelabelConfigs)
	var paths []string
	for _, e := range sm.Spec.Endpoints[1:] {
		assert.Equal(t, "stats", e.Port)
		require.NotNil(t, e.Scheme)
		assert.Equal(t, "HTTPS", strings.ToUpper(e.Scheme.String()))
		assert.True(t, e.HonorLabels, "the containers' namespace, pod and container labels are kept")
		assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", e.BearerTokenFile, "the Prometheus' own token, reviewed by nri-stats")
		require.NotNil(t, e.TLSConfig)
		require.NotNil(t, e.TLSConfig.InsecureSkipVerify)
		assert.True(t, *e.TLSConfig.InsecureSkipVerify, "stats' certificate is self-signed without tlsSecret")
		checkNodeLabel(t, e.RelabelConfigs)
		if e.Path == "/metrics" {
			require.Len(t, e.MetricRelabelConfigs, 1, "the runner's series are scraped once, from its /metrics")
			keep := e.MetricRelabelConfigs[0]
			assert.Equal(t, "keep", keep.Action)
			assert.Equal(t, "nri_suite_stats_container_.*", keep.Regex)
		} else {
			assert.Empty(t, e.MetricRelabelConfigs)
		}
		paths = append(paths, e.Path)
	}
	assert.Equal(t, []string{"/metrics", "/metrics/cadvisor"}, paths)

	require.Len(t, r.rules, 1)
	rule := r.rules[releaseName]
	require.NotNil(t, rule)
	var file monitoringv1.PrometheusRuleSpec
	data, err := os.ReadFile("nri-suite/files/prometheus-rules.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &file))
	assert.Equal(t, file, rule.Spec, "the rules of the plain file")
	assert.NotEmpty(t, file.Groups)
}

// checkNodeLabel: the node's name reaches the series as kubernetes_node,
// the dashboard's and alerts' node label.
func checkNodeLabel(t *testing.T, relabelings []monitoringv1.RelabelConfig) {
	t.Helper()
	require.Len(t, relabelings, 1)
	assert.Equal(t, []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"}, relabelings[0].SourceLabels)
	assert.Equal(t, "kubernetes_node", relabelings[0].TargetLabel)
}

// Each monitor's value wins over auto: false renders nothing where the
// CRDs are, true renders without them (an operator installed later).
func TestChartPrometheusExplicit(t *testing.T) {
	off := map[string]any{"prometheus": map[string]any{"serviceMonitor": map[string]any{"enabled": false},
		"rules": map[string]any{"enabled": false}}}
	r, err := renderWithAPIs(t, operatorAPIs, off)
	require.NoError(t, err)
	checkNotScraped(t, r)
	assert.Empty(t, r.rules)

	on := map[string]any{"prometheus": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "interval": "15s",
		"labels": map[string]any{"release": "kube-prometheus"}}, "rules": map[string]any{"enabled": true}}}
	r, err = render(t, on)
	require.NoError(t, err)
	checkScraped(t, r)
	require.Contains(t, r.serviceMonitors, releaseName)
	sm := r.serviceMonitors[releaseName]
	assert.Equal(t, "kube-prometheus", sm.Labels["release"], "for the Prometheus' serviceMonitorSelector")
	for _, e := range sm.Spec.Endpoints {
		assert.Equal(t, monitoringv1.Duration("15s"), e.Interval)
	}
	assert.Len(t, r.rules, 1)
}

// A PodMonitor instead of the ServiceMonitor: no Services; stats' listener
// only with an authorization, which a PodMonitor needs to send a token.
func TestChartPrometheusPodMonitor(t *testing.T) {
	values := map[string]any{"prometheus": map[string]any{"serviceMonitor": map[string]any{"enabled": false},
		"podMonitor": map[string]any{"enabled": "auto"}}}
	r, err := renderWithAPIs(t, operatorAPIs, values)
	require.NoError(t, err)
	checkScraped(t, r)
	assert.Empty(t, r.services)
	assert.Empty(t, r.serviceMonitors)
	pm := r.podMonitors[releaseName]
	require.NotNil(t, pm)
	selector, err := metav1LabelSelector(pm.Spec.Selector)
	require.NoError(t, err)
	for name, ds := range r.daemonSets {
		assert.True(t, selector.Matches(labels.Set(ds.Spec.Template.Labels)), "the PodMonitor selects %s's pods", name)
	}
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1, "the plugins' own /metrics only")
	require.NotNil(t, pm.Spec.PodMetricsEndpoints[0].Port)
	assert.Equal(t, "http", *pm.Spec.PodMetricsEndpoints[0].Port)
	checkNodeLabel(t, pm.Spec.PodMetricsEndpoints[0].RelabelConfigs)

	values["prometheus"].(map[string]any)["stats"] = map[string]any{
		"authorization": map[string]any{"credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
		"tlsConfig":     map[string]any{"serverName": "nri-stats", "ca": map[string]any{"secret": map[string]any{"name": "nri-stats-ca", "key": "ca.crt"}}}}
	values["plugins"] = map[string]any{"stats": map[string]any{"cadvisor": false}}
	r, err = renderWithAPIs(t, operatorAPIs, values)
	require.NoError(t, err)
	pm = r.podMonitors[releaseName]
	require.Len(t, pm.Spec.PodMetricsEndpoints, 2, "the plugins' /metrics, stats' /metrics (no /metrics/cadvisor with cadvisor: false)")
	stats := pm.Spec.PodMetricsEndpoints[1]
	assert.Equal(t, "/metrics", stats.Path)
	require.NotNil(t, stats.Authorization)
	assert.Equal(t, "prometheus-token", stats.Authorization.Credentials.Name)
	require.NotNil(t, stats.TLSConfig)
	assert.Nil(t, stats.TLSConfig.InsecureSkipVerify, "verified with the CA given")
	require.NotNil(t, stats.TLSConfig.ServerName)
	assert.Equal(t, "nri-stats", *stats.TLSConfig.ServerName)

	values = map[string]any{"prometheus": map[string]any{"podMonitor": map[string]any{"enabled": true}}}
	_, err = renderWithAPIs(t, operatorAPIs, values)
	assert.ErrorContains(t, err, "serviceMonitor and podMonitor are both on", "each plugin would be scraped twice")
}

// Scrape annotations alone: a Prometheus that follows them reaches every
// plugin's own /metrics, security's on the node's address.
func TestChartPrometheusAnnotations(t *testing.T) {
	r, err := render(t, map[string]any{"prometheus": map[string]any{"annotations": true}})
	require.NoError(t, err)
	checkScraped(t, r)
	assert.Empty(t, r.serviceMonitors)
	for name, ds := range r.daemonSets {
		a := ds.Spec.Template.Annotations
		assert.Equal(t, "true", a["prometheus.io/scrape"], name)
		assert.Equal(t, fmt.Sprint(ds.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort), a["prometheus.io/port"], name)
		assert.Equal(t, "/metrics", a["prometheus.io/path"], name)
		assert.Equal(t, "http", a["prometheus.io/scheme"], name)
	}
}

// stats on the node's network is probed on loopback and scraped on the
// node's address, as security; without its listener (auth none) no
// monitor reads it.
func TestChartPrometheusStatsVariants(t *testing.T) {
	on := map[string]any{"serviceMonitor": map[string]any{"enabled": true}}
	r, err := render(t, map[string]any{"prometheus": on, "plugins": map[string]any{"stats": map[string]any{"hostNetwork": true}}})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9190,[$(POD_IP)]:9190", httpAddr(t, r, "stats"))
	assert.NotNil(t, podIPEnv(r, "stats"))

	r, err = render(t, map[string]any{"prometheus": on, "plugins": map[string]any{"stats": map[string]any{"auth": "none"}}})
	require.NoError(t, err)
	sm := r.serviceMonitors[releaseName]
	require.Len(t, sm.Spec.Endpoints, 1, "no stats listener to scrape")
	assert.Len(t, r.services[releaseName+"-stats"].Spec.Ports, 1)

	r, err = render(t, map[string]any{"prometheus": on, "plugins": map[string]any{"stats": map[string]any{"enabled": false}}})
	require.NoError(t, err)
	assert.Len(t, r.services, 4)
	assert.Len(t, r.serviceMonitors[releaseName].Spec.Endpoints, 1)
}

// The dashboard's ConfigMap carries the file, for Grafana's sidecar.
func TestChartGrafanaDashboard(t *testing.T) {
	r, err := render(t, map[string]any{"prometheus": map[string]any{"dashboard": map[string]any{"enabled": true,
		"namespace": "monitoring", "annotations": map[string]any{"grafana_folder": "nri-suite"}}}})
	require.NoError(t, err)
	cm := r.otherConfigMaps[releaseName+"-grafana-dashboard"]
	require.NotNil(t, cm)
	assert.Equal(t, "monitoring", cm.Namespace)
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	assert.Equal(t, "nri-suite", cm.Annotations["grafana_folder"])
	file, err := os.ReadFile("nri-suite/files/grafana-dashboard.json")
	require.NoError(t, err)
	assert.JSONEq(t, string(file), cm.Data["nri-suite.json"])
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(cm.Data["nri-suite.json"]), &d))
	assert.Equal(t, "nri-suite", d["uid"])
}

func TestChartPrometheusRefusesBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"monitor mode":       {map[string]any{"serviceMonitor": map[string]any{"enabled": "yes"}}, "/prometheus/serviceMonitor/enabled"},
		"interval":           {map[string]any{"podMonitor": map[string]any{"interval": "30 seconds"}}, "/prometheus/podMonitor/interval"},
		"unknown key":        {map[string]any{"serviceMonitors": map[string]any{}}, "serviceMonitors"},
		"rules mode":         {map[string]any{"rules": map[string]any{"enabled": "on"}}, "/prometheus/rules/enabled"},
		"dashboard ns":       {map[string]any{"dashboard": map[string]any{"namespace": "Grafana"}}, "/prometheus/dashboard/namespace"},
		"authorization keys": {map[string]any{"stats": map[string]any{"authorization": map[string]any{"credentials": map[string]any{"name": "x"}}}}, "key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, map[string]any{"prometheus": tc.values})
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// metav1LabelSelector is a monitor's selector as a labels.Selector.
func metav1LabelSelector(s metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&s)
}
