package helm

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nri-suite/nri-suite/deployments/helm/internal/valuesdoc"
)

// set parses `helm --set` arguments as the helm CLI does: numbers become
// int64s, true and false booleans.
func set(t *testing.T, args ...string) map[string]any {
	t.Helper()
	values := map[string]any{}
	for _, arg := range args {
		require.NoError(t, strvals.ParseInto(arg, values), arg)
	}
	return values
}

// podSettings are the global pod settings of TestChartPodSettings, and
// stats' own.
var podSettings = map[string]any{
	"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
	"nodeSelector":     map[string]any{"pool": "nri"},
	"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "nri", "effect": "NoSchedule"}},
	"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "nri", "operator": "Exists"}}}}}}},
	"resources":      map[string]any{"requests": map[string]any{"cpu": "5m", "ephemeral-storage": "10Mi"}, "limits": map[string]any{"ephemeral-storage": "1Gi"}},
	"podAnnotations": map[string]any{"team": "node", "owner": "ops"},
	"podLabels":      map[string]any{"tier": "node", "cost": "infra"},
	"extraArgs":      []any{"--log-level=debug"},
	"extraEnv":       []any{map[string]any{"name": "GODEBUG", "value": "madvdontneed=1"}},
	"plugins": map[string]any{"stats": map[string]any{
		"nodeSelector":      map[string]any{"stats": "yes"},
		"tolerations":       []any{},
		"affinity":          map[string]any{},
		"priorityClassName": "",
		"resources":         map[string]any{"limits": map[string]any{"ephemeral-storage": "2Gi"}},
		"podAnnotations":    map[string]any{"team": "metrics"},
		"podLabels":         map[string]any{"tier": "metrics"},
		"extraArgs":         []any{"--log-level=warning"},
		"extraEnv": []any{map[string]any{"name": "NODE_IP", "valueFrom": map[string]any{
			"fieldRef": map[string]any{"fieldPath": "status.hostIP"}}}},
	}},
}

// Every plugin's pods get the global settings; stats' own replace them
// (nodeSelector, tolerations, affinity, priorityClassName, even empty), are
// merged over them (annotations, labels, resources) or come after them
// (args, env).
func TestChartPodSettings(t *testing.T) {
	r, err := render(t, podSettings)
	require.NoError(t, err)
	require.Len(t, r.daemonSets, 5)
	globalAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nri", Operator: corev1.NodeSelectorOpExists}}}}}}}
	for name, ds := range r.daemonSets {
		spec := ds.Spec.Template.Spec
		c := spec.Containers[0]
		meta := ds.Spec.Template.ObjectMeta
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, spec.ImagePullSecrets, name)
		assert.Equal(t, ds.Spec.Selector.MatchLabels, subset(meta.Labels, ds.Spec.Selector.MatchLabels), "%s: the selector matches the pods", name)
		assert.Contains(t, meta.Annotations, "checksum/config", name)
		assert.Equal(t, "ops", meta.Annotations["owner"], name)
		assert.Equal(t, "infra", meta.Labels["cost"], name)
		assert.Contains(t, c.Env, corev1.EnvVar{Name: "GODEBUG", Value: "madvdontneed=1"}, name)
		assert.Equal(t, "NODE_NAME", c.Env[0].Name, "%s: the chart's variables first", name)
		ownRequests := map[string]string{"device-injector": "10m", "sidecar-order": "10m", "topology-aware": "10m", "security": "10m", "stats": "20m"}
		for _, res := range append(spec.InitContainers, c) {
			assert.Equal(t, resource.MustParse(ownRequests[name]), res.Resources.Requests[corev1.ResourceCPU], "%s/%s: its own cpu request wins", name, res.Name)
			assert.Equal(t, resource.MustParse("10Mi"), res.Resources.Requests[corev1.ResourceEphemeralStorage], "%s/%s: the global one where it has none", name, res.Name)
			assert.False(t, res.Resources.Limits.Memory().IsZero(), "%s/%s: its memory limit stays", name, res.Name)
		}
		if name == "stats" {
			continue
		}
		assert.Equal(t, map[string]string{"kubernetes.io/os": "linux", "pool": "nri"}, spec.NodeSelector, name)
		assert.Equal(t, []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "nri", Effect: corev1.TaintEffectNoSchedule}},
			spec.Tolerations, "%s: the values' list replaces the chart's", name)
		assert.Equal(t, globalAffinity, spec.Affinity, name)
		assert.Equal(t, "system-node-critical", spec.PriorityClassName, name)
		assert.Equal(t, resource.MustParse("1Gi"), c.Resources.Limits[corev1.ResourceEphemeralStorage], name)
		assert.Equal(t, "node", meta.Annotations["team"], name)
		assert.Equal(t, "node", meta.Labels["tier"], name)
		assert.Equal(t, "--log-level=debug", c.Args[len(c.Args)-1], "%s: after the chart's --log-level, so that it wins", name)
	}

	stats := r.daemonSets["stats"].Spec.Template
	c := stats.Spec.Containers[0]
	assert.Equal(t, map[string]string{"stats": "yes"}, stats.Spec.NodeSelector, "replaced, not merged")
	assert.Empty(t, stats.Spec.Tolerations, "[] replaces the global tolerations")
	assert.Nil(t, stats.Spec.Affinity, "{} replaces the global affinity")
	assert.Empty(t, stats.Spec.PriorityClassName, `"" replaces the global class`)
	assert.Equal(t, resource.MustParse("2Gi"), c.Resources.Limits[corev1.ResourceEphemeralStorage], "its own limit wins")
	assert.Equal(t, "metrics", stats.Annotations["team"])
	assert.Equal(t, "metrics", stats.Labels["tier"])
	assert.Equal(t, []string{"--log-level=debug", "--log-level=warning"}, c.Args[len(c.Args)-2:], "the global extraArgs, then its own")
	assert.Equal(t, []string{"GODEBUG", "NODE_IP"}, []string{c.Env[len(c.Env)-2].Name, c.Env[len(c.Env)-1].Name}, "the global extraEnv, then its own")

	job := r.jobs[releaseName+"-uninstall"]
	require.NotNil(t, job)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, job.Spec.Template.Spec.ImagePullSecrets, "the hook pulls an image too")
}

// Numbers are quantities too, as `--set` and values files give them.
func TestChartNumericResources(t *testing.T) {
	r, err := render(t, set(t, "plugins.stats.resources.limits.cpu=1", "plugins.stats.resources.requests.memory=67108864",
		"resources.limits.cpu=2"))
	require.NoError(t, err)
	res := r.daemonSets["stats"].Spec.Template.Spec.Containers[0].Resources
	assertQuantity(t, "1", res.Limits[corev1.ResourceCPU], "limits.cpu")
	assertQuantity(t, "64Mi", res.Requests[corev1.ResourceMemory], "requests.memory")
	topo := r.daemonSets["topology-aware"].Spec.Template.Spec.Containers[0].Resources
	assertQuantity(t, "2", topo.Limits[corev1.ResourceCPU], "the global limit")

	file, err := chartutil.ReadValues([]byte("plugins:\n  security:\n    resources:\n      limits: {cpu: 0.5, memory: 268435456}\n"))
	require.NoError(t, err)
	r, err = render(t, file)
	require.NoError(t, err)
	res = r.daemonSets["security"].Spec.Template.Spec.Containers[0].Resources
	assertQuantity(t, "500m", res.Limits[corev1.ResourceCPU], "limits.cpu")
	assertQuantity(t, "256Mi", res.Limits[corev1.ResourceMemory], "limits.memory")

	_, err = render(t, set(t, "plugins.stats.resources.limits.cpu=-1"))
	require.Error(t, err)
	assert.ErrorContains(t, err, "at '/plugins/stats/resources/limits/cpu'")
}

// assertQuantity asserts that got is the quantity want, however written.
func assertQuantity(t *testing.T, want string, got resource.Quantity, what string) {
	t.Helper()
	w := resource.MustParse(want)
	assert.Zero(t, w.Cmp(got), "%s: got %s, want %s", what, &got, want)
}

func TestChartUpdateStrategy(t *testing.T) {
	r, err := render(t, set(t, "updateStrategy.rollingUpdate.maxUnavailable=20%"))
	require.NoError(t, err)
	for name, ds := range r.daemonSets {
		assert.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type, name)
		require.NotNil(t, ds.Spec.UpdateStrategy.RollingUpdate, name)
		assert.Equal(t, intstr.FromString("20%"), *ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, name)
	}
	r, err = render(t, set(t, "updateStrategy.type=OnDelete"))
	require.NoError(t, err)
	for name, ds := range r.daemonSets {
		assert.Equal(t, appsv1.OnDeleteDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type, name)
		assert.Nil(t, ds.Spec.UpdateStrategy.RollingUpdate, "%s: the API refuses rollingUpdate with OnDelete", name)
	}
}

// A plugin disabled has no DaemonSet; the others keep theirs.
func TestChartPluginEnabled(t *testing.T) {
	r, err := render(t, set(t, "plugins.security.enabled=false", "plugins.sidecar-order.priorityClassName=system-cluster-critical"))
	require.NoError(t, err)
	assert.NotContains(t, r.daemonSets, "security")
	assert.Len(t, r.daemonSets, 4)
	assert.Equal(t, "system-cluster-critical", r.daemonSets["sidecar-order"].Spec.Template.Spec.PriorityClassName)
	assert.Equal(t, "system-node-critical", r.daemonSets["stats"].Spec.Template.Spec.PriorityClassName)
}

// The schema refuses a key it does not know in the new values too, naming
// it and where it is; inside an affinity's kinds and an EnvVar's valueFrom
// it checks nothing: those are the API server's to check.
func TestChartRefusesUnknownNestedKeys(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"imagePullSecrets[0].nmae=regcred", "at '/imagePullSecrets/0': additional properties 'nmae' not allowed"},
		{"tolerations[0].opertor=Exists", "at '/tolerations/0': additional properties 'opertor' not allowed"},
		{"plugins.stats.tolerations[0].efect=NoSchedule", "at '/plugins/stats/tolerations/0': additional properties 'efect' not allowed"},
		{"affinity.nodeAfinity.x=y", "at '/affinity': additional properties 'nodeAfinity' not allowed"},
		{"extraEnv[0].name=A,extraEnv[0].valeu=b", "at '/extraEnv/0': additional properties 'valeu' not allowed"},
		{"plugins.security.extraEnv[0].value=b", "at '/plugins/security/extraEnv/0': missing property 'name'"},
		{"resources.limit.cpu=1", "at '/resources': additional properties 'limit' not allowed"},
		{"plugins.stats.resources.limits.gpu=1", "at '/plugins/stats/resources/limits': additional properties 'gpu' not allowed"},
		{"updateStrategy.rollingUpdate.maxSurge=1", "at '/updateStrategy/rollingUpdate': additional properties 'maxSurge' not allowed"},
		{"plugins.stats.podLabel.a=b", "at '/plugins/stats': additional properties 'podLabel' not allowed"},
		{"podLabels.tier=a b", "at '/podLabels/tier': 'a b' does not match pattern"},
		{"extraArgs[0]=1", "at '/extraArgs/0': got number, want string"},
		{"plugins.stats.port=http", "at '/plugins/stats/port': got string, want integer"},
		{"updateStrategy.rollingUpdate.maxUnavailable=half", "at '/updateStrategy/rollingUpdate/maxUnavailable': 'half' does not match pattern"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := render(t, set(t, tc.set))
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	r, err := render(t, set(t, "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
		"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=nri",
		"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists",
		"extraEnv[0].name=TOKEN", "extraEnv[0].valueFrom.secretKeyRef.name=s", "extraEnv[0].valueFrom.secretKeyRef.key=k"))
	require.NoError(t, err, "what is inside an affinity's kinds and a valueFrom is the API server's to check")
	spec := r.daemonSets["stats"].Spec.Template.Spec
	require.NotNil(t, spec.Affinity)
	assert.Equal(t, []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nri", Operator: corev1.NodeSelectorOpExists}}}}},
		spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	assert.Contains(t, spec.Containers[0].Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})
}

// podLabels and podAnnotations cannot take over the chart's own keys: the
// DaemonSets select their pods by its labels.
func TestChartRefusesChartOwnedPodKeys(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{set(t, "podLabels.app\\.kubernetes\\.io/name=mine"), `podLabels: "app.kubernetes.io/name" is a label the chart sets`},
		{set(t, "plugins.stats.podLabels.app\\.kubernetes\\.io/instance=other"), `plugins.stats.podLabels: "app.kubernetes.io/instance" is a label the chart sets`},
		{set(t, "podLabels.app\\.kubernetes\\.io/part-of=other"), `podLabels: "app.kubernetes.io/part-of" is a label the chart sets`},
		{set(t, "plugins.security.podAnnotations.checksum/config=x"), `plugins.security.podAnnotations: "checksum/config" is an annotation the chart sets`},
		{set(t, "podAnnotations.tolerate-missing-plugins\\.nri-suite\\.io=no"), `podAnnotations: "tolerate-missing-plugins.nri-suite.io" is an annotation the chart sets`},
		{set(t, "prometheus.annotations=true", "podAnnotations.prometheus\\.io/path=/m"), `podAnnotations: "prometheus.io/path" is an annotation the chart sets`},
	} {
		_, err := render(t, tc.values)
		require.Error(t, err, tc.want)
		assert.ErrorContains(t, err, tc.want)
	}
	r, err := render(t, set(t, "podAnnotations.prometheus\\.io/path=/m"))
	require.NoError(t, err, "without prometheus.annotations the chart sets none")
	assert.Equal(t, "/m", r.daemonSets["stats"].Spec.Template.Annotations["prometheus.io/path"])
}

// NOTES.txt says how to see each enabled plugin connected: the command asks
// the port its DaemonSet probes.
func TestChartNotes(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	require.NotEmpty(t, r.notes)
	assert.Contains(t, r.notes, "kubectl get daemonsets -n "+releaseNamespace+" -l app.kubernetes.io/part-of=nri-suite,app.kubernetes.io/instance="+releaseName)
	for name, ds := range r.daemonSets {
		probe := ds.Spec.Template.Spec.Containers[0].StartupProbe.Exec.Command
		assert.Contains(t, r.notes, "/usr/local/bin/nri-"+name+" probe "+probe[len(probe)-1], name)
	}
	assert.Contains(t, r.notes, "nri_suite_stats_plugin_connected")
	// Every metric it names is one the alerts or the dashboard read, which
	// deployments/monitoring checks against what the plugins register.
	var known strings.Builder
	for _, f := range []string{"nri-suite/files/prometheus-rules.yaml", "nri-suite/files/grafana-dashboard.json"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		known.Write(data)
	}
	for _, metric := range regexp.MustCompile(`nri_suite_[a-z_]+[a-z]`).FindAllString(r.notes, -1) {
		assert.Contains(t, known.String(), metric)
	}
	assert.NotContains(t, r.notes, "NRISuitePluginNotConnected", "no PrometheusRule without the operator's kinds")

	r, err = render(t, set(t, "plugins.stats.enabled=false", "plugins.security.enabled=false", "prometheus.rules.enabled=true"))
	require.NoError(t, err)
	assert.NotContains(t, r.notes, "nri-stats probe")
	assert.NotContains(t, r.notes, "nri-security probe")
	assert.NotContains(t, r.notes, "nri_suite_stats_plugin_connected")
	assert.Contains(t, r.notes, "nri-topology-aware probe")
	assert.Contains(t, r.notes, "NRISuitePluginNotConnected")
}

// The README's table of values is what `make chart-docs` writes.
func TestChartREADMEValuesTable(t *testing.T) {
	want, err := valuesdoc.README(chartDir)
	require.NoError(t, err)
	got, err := os.ReadFile(chartDir + "/README.md")
	require.NoError(t, err)
	if line, w, g := firstDifference(string(want), string(got)); line > 0 {
		t.Errorf("%s/README.md's table of values is out of date: run `make chart-docs`; line %d is %q, values.yaml and values.schema.json make %q",
			chartDir, line, g, w)
	}
}
