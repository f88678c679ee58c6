// Package helm tests the nri-suite chart: rendered through Helm's own
// library, every object decoded strictly into the Kubernetes API types, the
// security settings checked per plugin, and the plain manifests in
// deployments/kubernetes kept equal to what the chart renders.
package helm

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deployments/kubernetes/nri-suite.yaml from the chart")

const (
	chartDir     = "nri-suite"
	manifestPath = "../kubernetes/nri-suite.yaml"
	// The plain manifests are rendered as release nri-suite in kube-system.
	releaseName      = "nri-suite"
	releaseNamespace = "kube-system"
)

// rendered is what the chart produced, decoded.
type rendered struct {
	daemonSets      map[string]*appsv1.DaemonSet // by plugin
	configMaps      map[string]*corev1.ConfigMap // by plugin
	policies        []*admissionv1.ValidatingAdmissionPolicy
	bindings        []*admissionv1.ValidatingAdmissionPolicyBinding
	serviceAccounts map[string]*corev1.ServiceAccount // by object name
	roles           map[string]*rbacv1.Role
	roleBindings    map[string]*rbacv1.RoleBinding
	clusterBindings map[string]*rbacv1.ClusterRoleBinding
	jobs            map[string]*batchv1.Job
	otherConfigMaps map[string]*corev1.ConfigMap // of no plugin, by name
	services        map[string]*corev1.Service
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	podMonitors     map[string]*monitoringv1.PodMonitor
	rules           map[string]*monitoringv1.PrometheusRule
	text            string // the documents, in file and then document order
	notes           string // NOTES.txt

	// The NodeResourceTopology's (nodeResourceTopology.enabled) and the
	// Events' (kubeAPI.events).
	clusterRoles map[string]*rbacv1.ClusterRole
	crds         map[string]*apiextensionsv1.CustomResourceDefinition
}

// kubeVersion is the cluster's version the chart is rendered for: the
// kubelet's that the real-node tests run. Helm's library defaults to 1.20.
const kubeVersion = "v1.37.2"

// render renders the chart with values over its defaults, as `helm
// template --kube-version` kubeVersion does, and decodes every object
// strictly.
func render(t *testing.T, values map[string]any) (*rendered, error) {
	t.Helper()
	return renderFor(t, kubeVersion, values)
}

// renderFor is render for a cluster of Kubernetes version (vMAJOR.MINOR.PATCH).
func renderFor(t *testing.T, version string, values map[string]any) (*rendered, error) {
	t.Helper()
	return renderCluster(t, version, nil, values)
}

// renderWithAPIs is render for a cluster that also serves apis (as
// `helm template --api-versions`), such as monitoring.coreos.com/v1/ServiceMonitor.
func renderWithAPIs(t *testing.T, apis []string, values map[string]any) (*rendered, error) {
	t.Helper()
	return renderCluster(t, kubeVersion, apis, values)
}

func renderCluster(t *testing.T, version string, apis []string, values map[string]any) (*rendered, error) {
	t.Helper()
	chart, err := loader.Load(chartDir)
	require.NoError(t, err)
	kube, err := chartutil.ParseKubeVersion(version)
	require.NoError(t, err)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kube
	caps.APIVersions = append(caps.APIVersions, apis...)
	vals, err := chartutil.ToRenderValues(chart, values,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chart, vals)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	r := &rendered{daemonSets: map[string]*appsv1.DaemonSet{}, configMaps: map[string]*corev1.ConfigMap{},
		serviceAccounts: map[string]*corev1.ServiceAccount{}, roles: map[string]*rbacv1.Role{},
		roleBindings:    map[string]*rbacv1.RoleBinding{},
		clusterBindings: map[string]*rbacv1.ClusterRoleBinding{}, jobs: map[string]*batchv1.Job{},
		otherConfigMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{}, podMonitors: map[string]*monitoringv1.PodMonitor{},
		rules:        map[string]*monitoringv1.PrometheusRule{},
		clusterRoles: map[string]*rbacv1.ClusterRole{}, crds: map[string]*apiextensionsv1.CustomResourceDefinition{}}
	var text strings.Builder
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		docs, err := splitDocuments(files[name])
		require.NoError(t, err, name)
		for _, doc := range docs {
			fmt.Fprintf(&text, "---\n# Source: %s\n%s\n", name, doc)
			require.NoError(t, r.decode(doc), "%s:\n%s", name, doc)
		}
	}
	r.text = text.String()
	r.notes = files[chartDir+"/templates/NOTES.txt"]
	return r, nil
}

// splitDocuments returns the non-empty YAML documents of a rendered file.
func splitDocuments(data string) ([]string, error) {
	reader := yamlutil.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	var docs []string
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(doc)); s != "" && s != "---" {
			docs = append(docs, s)
		}
	}
}

// decode decodes one object strictly (an unknown or duplicated field is an
// error) into its API type.
func (r *rendered) decode(doc string) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		return err
	}
	switch meta.GroupVersionKind().String() {
	case "apps/v1, Kind=DaemonSet":
		ds := &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict([]byte(doc), ds); err != nil {
			return err
		}
		r.daemonSets[strings.TrimPrefix(ds.Labels["app.kubernetes.io/name"], "nri-")] = ds
	case "/v1, Kind=ConfigMap":
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict([]byte(doc), cm); err != nil {
			return err
		}
		if plugin, ok := strings.CutPrefix(cm.Labels["app.kubernetes.io/name"], "nri-"); ok {
			r.configMaps[plugin] = cm
		} else {
			r.otherConfigMaps[cm.Name] = cm
		}
	case "admissionregistration.k8s.io/v1, Kind=ValidatingAdmissionPolicy":
		p := &admissionv1.ValidatingAdmissionPolicy{}
		if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
			return err
		}
		r.policies = append(r.policies, p)
	case "admissionregistration.k8s.io/v1, Kind=ValidatingAdmissionPolicyBinding":
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
			return err
		}
		r.bindings = append(r.bindings, b)
	case "/v1, Kind=ServiceAccount":
		return decodeNamed(doc, r.serviceAccounts)
	case "rbac.authorization.k8s.io/v1, Kind=Role":
		return decodeNamed(doc, r.roles)
	case "rbac.authorization.k8s.io/v1, Kind=RoleBinding":
		return decodeNamed(doc, r.roleBindings)
	case "rbac.authorization.k8s.io/v1, Kind=ClusterRoleBinding":
		return decodeNamed(doc, r.clusterBindings)
	case "batch/v1, Kind=Job":
		return decodeNamed(doc, r.jobs)
	case "/v1, Kind=Service":
		return decodeNamed(doc, r.services)
	case "monitoring.coreos.com/v1, Kind=ServiceMonitor":
		return decodeNamed(doc, r.serviceMonitors)
	case "monitoring.coreos.com/v1, Kind=PodMonitor":
		return decodeNamed(doc, r.podMonitors)
	case "monitoring.coreos.com/v1, Kind=PrometheusRule":
		return decodeNamed(doc, r.rules)
	case "rbac.authorization.k8s.io/v1, Kind=ClusterRole":
		return decodeNamed(doc, r.clusterRoles)
	case "apiextensions.k8s.io/v1, Kind=CustomResourceDefinition":
		return decodeNamed(doc, r.crds)
	default:
		return fmt.Errorf("unexpected object %s", meta.GroupVersionKind())
	}
	return nil
}

// decodeNamed decodes doc strictly into a new T, kept in into by name.
func decodeNamed[T any, PT interface {
	*T
	GetName() string
}](doc string, into map[string]PT) error {
	obj := PT(new(T))
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return err
	}
	into[obj.GetName()] = obj
	return nil
}

// pluginNeeds is what each plugin needs of the host, and nothing more:
// host paths by mount path in its container (read-only unless written),
// and the host namespaces.
type pluginNeeds struct {
	hostPaths  map[string]string // mount path -> host path
	writable   []string          // mount paths it writes
	hostNS     bool              // the node's PID and network namespaces
	hostNet    bool              // the node's network namespace only
	hostPID    bool              // the node's PID namespace only
	extraPorts []int32
	// configFiles are the volumes of other sources than the host (the
	// ConfigMap, a Secret) by mount path.
	configFiles []string
}

func defaultNeeds() map[string]pluginNeeds {
	common := func(extra map[string]string) map[string]string {
		m := map[string]string{"/var/run/nri": "/var/run/nri", "/run/nri-suite": "/run/nri-suite"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	writable := []string{"/var/run/nri", "/run/nri-suite"}
	return map[string]pluginNeeds{
		"device-injector": {hostPaths: common(map[string]string{"/host/sys": "/sys", "/dev": "/dev", "/etc/cdi": "/etc/cdi", "/var/run/cdi": "/var/run/cdi"}), writable: writable},
		"sidecar-order": {hostPaths: common(map[string]string{"/opt/nri-suite/bin": "/opt/nri-suite/bin"}),
			writable: append(slices.Clone(writable), "/opt/nri-suite/bin")}, // it removes the helper when uninstalled
		"topology-aware": {hostPaths: common(map[string]string{"/host/sys": "/sys"}), writable: writable},
		"security":       {hostPaths: common(nil), writable: writable, hostNS: true},
		// The node's PID namespace: network counters from /proc/<pid>/net/dev.
		// The host's machine-id and os-release: the machine_* labels and cadvisor_version_info.
		"stats": {hostPaths: common(map[string]string{"/host/sys/fs/cgroup": "/sys/fs/cgroup", "/host/etc/machine-id": "/etc/machine-id",
			"/host/etc/os-release": "/etc/os-release"}), writable: writable, extraPorts: []int32{9191},
			configFiles: []string{"/etc/nri-suite/client-ca"}, hostPID: true},
	}
}

// defaultPlugin is a plugin's NRI index and port as values.yaml sets
// them; the main module's TestChartValuesFollowTheCatalog holds them to
// the plugins' own table (internal/catalog).
type defaultPlugin struct {
	Index string
	Port  int
}

// defaultPlugins are the plugins of values.yaml by name.
func defaultPlugins(t *testing.T) map[string]defaultPlugin {
	t.Helper()
	chart, err := loader.Load(chartDir)
	require.NoError(t, err)
	data, err := yaml.Marshal(chart.Values["plugins"])
	require.NoError(t, err)
	var plugins map[string]defaultPlugin
	require.NoError(t, yaml.Unmarshal(data, &plugins))
	return plugins
}

func TestChartDefaults(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	require.Len(t, r.daemonSets, 5, "one DaemonSet per plugin")
	require.Len(t, r.configMaps, 5)
	for name, needs := range defaultNeeds() {
		t.Run(name, func(t *testing.T) {
			ds := r.daemonSets[name]
			require.NotNil(t, ds)
			checkDaemonSet(t, name, ds, needs)
			switch name {
			case "security":
			case "device-injector":
				assert.Equal(t, "spec-dirs:\n- /etc/cdi\n- /var/run/cdi", r.configMaps[name].Data["config.yaml"],
					"the plugin reads CDI specs where the chart mounts them")
			default:
				assert.Contains(t, r.configMaps[name].Data["config.yaml"], "# defaults: plugins/"+name+"/README.md")
			}
			assert.Equal(t, "ghcr.io/nri-suite/nri-"+name+":0.1.0", ds.Spec.Template.Spec.Containers[0].Image)
		})
	}
}

// TestChartCDISpecDirs: moved CDI spec directories are mounted where they
// are and given to device-injector, unless its config names its own.
func TestChartCDISpecDirs(t *testing.T) {
	r, err := render(t, map[string]any{"cdiSpecDirs": []any{"/srv/cdi"}})
	require.NoError(t, err)
	assert.Equal(t, "spec-dirs:\n- /srv/cdi", r.configMaps["device-injector"].Data["config.yaml"])
	var hostPaths []string
	for _, v := range r.daemonSets["device-injector"].Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	assert.Contains(t, hostPaths, "/srv/cdi")

	r, err = render(t, map[string]any{"cdiSpecDirs": []any{"/srv/cdi"},
		"plugins": map[string]any{"device-injector": map[string]any{"config": map[string]any{"spec-dirs": []any{"/srv/cdi/a"}}}}})
	require.NoError(t, err)
	assert.Equal(t, "spec-dirs:\n- /srv/cdi/a", r.configMaps["device-injector"].Data["config.yaml"], "the config's own wins")
}

// checkDaemonSet checks what every plugin's DaemonSet must hold.
func checkDaemonSet(t *testing.T, name string, ds *appsv1.DaemonSet, needs pluginNeeds) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	assert.Equal(t, releaseNamespace, ds.Namespace)
	assert.Equal(t, ds.Spec.Selector.MatchLabels, subset(ds.Spec.Template.Labels, ds.Spec.Selector.MatchLabels), "the selector matches the pods")
	assert.Equal(t, "system-node-critical", spec.PriorityClassName)
	assert.Contains(t, spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}, "tolerates every taint")
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.True(t, *spec.AutomountServiceAccountToken, "a token, to read its own DaemonSet when it stops (TestChartUninstall)")
	assert.Equal(t, ds.Name, spec.ServiceAccountName, "its own service account")
	assert.Equal(t, needs.hostNS || needs.hostPID, spec.HostPID, "hostPID")
	hostNet := needs.hostNS || needs.hostNet
	assert.Equal(t, hostNet, spec.HostNetwork, "hostNetwork")
	require.NotNil(t, spec.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, spec.SecurityContext.SeccompProfile.Type)

	require.Len(t, spec.Containers, 1)
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		require.NotNil(t, sc, c.Name)
		assert.True(t, *sc.ReadOnlyRootFilesystem, "%s: read-only root filesystem", c.Name)
		assert.False(t, *sc.AllowPrivilegeEscalation, "%s: no privilege escalation", c.Name)
		assert.False(t, *sc.Privileged, "%s: not privileged", c.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: every capability dropped", c.Name)
		assert.Empty(t, sc.Capabilities.Add, "%s: no capability added", c.Name)
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			q := c.Resources.Requests[res]
			assert.True(t, q.Sign() > 0, "%s: a %s request", c.Name, res)
		}
		q := c.Resources.Limits[corev1.ResourceMemory]
		assert.True(t, q.Cmp(c.Resources.Requests[corev1.ResourceMemory]) >= 0, "%s: a memory limit at least the request", c.Name)
	}

	c := spec.Containers[0]
	defaults := defaultPlugins(t)[name]
	assert.Contains(t, c.Args, "--idx="+defaults.Index)
	assert.Contains(t, c.Args, "--name="+name)
	assert.Contains(t, c.Args, "--config=/etc/nri-suite/config.yaml")
	assert.Contains(t, c.Args, "--daemonset="+releaseNamespace+"/"+ds.Name)
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	require.NotZero(t, port, "a port named http")
	assert.Equal(t, defaults.Port, int(port), "the port values.yaml sets")
	host := "0.0.0.0"
	if hostNet {
		host = "127.0.0.1" // the node's loopback: probed there, not exposed
	}
	assert.Contains(t, c.Args, fmt.Sprintf("--http-addr=%s:%d", host, port))
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe, path)
		require.NotNil(t, probe.HTTPGet, path)
		assert.Equal(t, path, probe.HTTPGet.Path)
		assert.Equal(t, "http", probe.HTTPGet.Port.String())
		if hostNet {
			assert.Equal(t, "127.0.0.1", probe.HTTPGet.Host, "%s: the kubelet probes the node's loopback", path)
		} else {
			assert.Empty(t, probe.HTTPGet.Host, "%s: the pod's IP", path)
		}
	}
	startup := c.StartupProbe
	require.NotNil(t, startup, "a startup probe")
	require.NotNil(t, startup.Exec, "the startup probe is exec: its output reaches the pod's events")
	assert.Equal(t, []string{"/usr/local/bin/nri-" + name, "probe", fmt.Sprintf("http://127.0.0.1:%d/readyz", port)}, startup.Exec.Command)
	var extraPorts []int32
	for _, p := range c.Ports {
		if p.Name != "http" {
			extraPorts = append(extraPorts, p.ContainerPort)
		}
	}
	assert.Equal(t, needs.extraPorts, extraPorts)

	// The host paths mounted: exactly what the plugin needs, read-only
	// unless it writes there.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	got := map[string]string{}
	configFiles := []string{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		require.True(t, ok, "mount %s has a volume", m.Name)
		if v.HostPath == nil {
			assert.True(t, m.ReadOnly, "mount %s is read-only", m.MountPath)
			if m.MountPath != "/etc/nri-suite" {
				configFiles = append(configFiles, m.MountPath)
			}
			continue
		}
		got[m.MountPath] = v.HostPath.Path
		assert.Equal(t, !slices.Contains(needs.writable, m.MountPath), m.ReadOnly, "mount %s read-only unless written", m.MountPath)
	}
	assert.Equal(t, needs.hostPaths, got, "host paths mounted")
	assert.ElementsMatch(t, needs.configFiles, configFiles, "other volumes mounted")
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		"--node-name's default")
	// The kubelet mounts the termination log file: not into a read-only mount.
	logPath := c.TerminationMessagePath
	if logPath == "" {
		logPath = corev1.TerminationMessagePathDefault
	}
	for _, m := range c.VolumeMounts {
		if m.ReadOnly {
			assert.False(t, strings.HasPrefix(logPath, strings.TrimSuffix(m.MountPath, "/")+"/"),
				"termination log %s inside the read-only mount %s", logPath, m.MountPath)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			assert.Contains(t, slices.Collect(maps.Values(needs.hostPaths)), v.HostPath.Path, "volume %s is mounted", v.Name)
		}
	}
}

// Both ways of installing configure security alike by default, but for
// Both ways of installing configure security alike by default, but for
// where each puts sidecar-order's helper, and the chart's own pods: they
// carry the tolerate annotation, which security allows in the release
// namespace only (and where the values add).
func TestChartSecurityConfigIsThePreRegisteredOne(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	shipped, err := os.ReadFile("../preregistered/conf.d/40-security.conf.in")
	require.NoError(t, err)
	helper, _ := sidecarPaths(t, r)
	shipped = []byte(strings.ReplaceAll(string(shipped), "@LIBEXECDIR@", filepath.Dir(helper)))
	var fromChart, fromFile map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(r.configMaps["security"].Data["config.yaml"]), &fromChart))
	require.NoError(t, yaml.UnmarshalStrict(shipped, &fromFile))
	fromFile["rules"] = map[string]any{"tolerate-missing-plugins": map[string]any{"namespaces": map[string]any{"kube-system": "off"}}}
	assert.Equal(t, fromFile, fromChart)

	r, err = render(t, map[string]any{
		"tolerateMissingPlugins": map[string]any{"namespaces": []any{"storage"}},
		"plugins": map[string]any{"security": map[string]any{"config": map[string]any{
			"rules": map[string]any{"seccomp": "audit", "tolerate-missing-plugins": map[string]any{"namespaces": map[string]any{"storage": "audit"}}}}}},
	})
	require.NoError(t, err)
	fromChart = nil
	require.NoError(t, yaml.UnmarshalStrict([]byte(r.configMaps["security"].Data["config.yaml"]), &fromChart))
	assert.Equal(t, map[string]any{"seccomp": "audit", "tolerate-missing-plugins": map[string]any{
		"namespaces": map[string]any{"kube-system": "off", "storage": "audit"}}}, fromChart["rules"],
		"the chart adds its namespaces; what the values set wins")
}

// The suite does not refuse itself: security's validator lets sidecar-order
// mount its helper and the pods' directories where the chart puts them.
func TestChartSecurityAllowsTheSidecarMounts(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	var cfg struct {
		Validator struct {
			Mounts struct {
				Plugins map[string][]string `json:"plugins"`
			} `json:"mounts"`
		} `json:"validator"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(r.configMaps["security"].Data["config.yaml"]), &cfg))
	helper, stateDir := sidecarPaths(t, r)
	assert.Equal(t, []string{helper, stateDir + "/*"}, cfg.Validator.Mounts.Plugins[defaultPlugins(t)["sidecar-order"].Index+"-sidecar-order"])
}

// Security refuses a pod for a plugin that its annotations ask for only if
// the chart installs that plugin, at the index the chart gives it; the
// values' map replaces the chart's, and the rule turned off takes none.
func TestChartSecurityAnnotationPlugins(t *testing.T) {
	// annotationPlugins renders the chart with security's config and other
	// plugins' values, and returns the map security gets.
	annotationPlugins := func(t *testing.T, security, others map[string]any) map[string]any {
		t.Helper()
		plugins := map[string]any{}
		maps.Copy(plugins, others)
		if security != nil {
			plugins["security"] = map[string]any{"config": security}
		}
		r, err := render(t, map[string]any{"plugins": plugins})
		require.NoError(t, err)
		var cfg struct {
			Validator map[string]any `json:"validator"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(r.configMaps["security"].Data["config.yaml"]), &cfg))
		owned, _ := cfg.Validator["annotation-plugins"].(map[string]any)
		return owned
	}
	owned := annotationPlugins(t, nil, nil)
	assert.Equal(t, "10-device-injector", owned["cdi.k8s.io"])
	assert.Equal(t, "10-device-injector", owned["cdi-devices.nri-suite.io"])
	assert.Equal(t, "20-sidecar-order", owned["sidecar-order.nri-suite.io"])

	owned = annotationPlugins(t, nil, map[string]any{"device-injector": map[string]any{"enabled": false},
		"sidecar-order": map[string]any{"index": "25"}})
	assert.Equal(t, map[string]any{"sidecar-order.nri-suite.io": "25-sidecar-order"}, owned,
		"no device-injector: pods with cdi.k8s.io annotations run as before")

	owned = annotationPlugins(t, map[string]any{"validator": map[string]any{"annotation-plugins": map[string]any{"vendor.example": "15-vendor"}}}, nil)
	assert.Equal(t, map[string]any{"vendor.example": "15-vendor"}, owned, "the values' map replaces the chart's")
	assert.Empty(t, annotationPlugins(t, map[string]any{"validator": map[string]any{"annotation-plugins": map[string]any{}}}, nil))
	for _, off := range []any{"off", map[string]any{"mode": "off"}} {
		assert.Empty(t, annotationPlugins(t, map[string]any{"rules": map[string]any{"annotated-plugins": off}}, nil),
			"the rule off contradicts a map: the chart adds none")
	}
	assert.NotEmpty(t, annotationPlugins(t, map[string]any{"rules": map[string]any{"annotated-plugins": map[string]any{"namespaces": map[string]any{"batch": "audit"}}}}, nil))
}

// sidecarPaths are the helper and state dir the chart gives sidecar-order.
func sidecarPaths(t *testing.T, r *rendered) (helper, stateDir string) {
	t.Helper()
	for _, arg := range r.daemonSets["sidecar-order"].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, "--helper="); ok {
			helper = v
		}
		if v, ok := strings.CutPrefix(arg, "--state-dir="); ok {
			stateDir = v
		}
	}
	require.NotEmpty(t, helper, "sidecar-order's --helper")
	require.NotEmpty(t, stateDir, "sidecar-order's --state-dir")
	return helper, stateDir
}

func TestChartNonDefaultValues(t *testing.T) {
	r, err := render(t, map[string]any{
		"image": map[string]any{"registry": "registry.example/nri", "tag": "v9"},
		"nri":   map[string]any{"socketDir": "/run/containerd/nri"},
		"plugins": map[string]any{
			"stats":          map[string]any{"enabled": false},
			"topology-aware": map[string]any{"config": map[string]any{"reserved-cpus": "0,1", "topology-policy": "single-numa-node"}},
			"security":       map[string]any{"validator": false, "profileDir": "/etc/nri-suite/seccomp"},
			"device-injector": map[string]any{"mountSourceDirs": []any{"/opt/models"}, "resources": map[string]any{
				"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "512Mi"}}},
		},
	})
	require.NoError(t, err)
	assert.NotContains(t, r.daemonSets, "stats", "a disabled plugin has no DaemonSet")
	assert.NotContains(t, r.configMaps, "stats", "nor a ConfigMap")
	require.Len(t, r.daemonSets, 4)

	topo := r.daemonSets["topology-aware"]
	assert.Equal(t, "registry.example/nri/nri-topology-aware:v9", topo.Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, topo.Spec.Template.Spec.Containers[0].Args, "--socket=/run/containerd/nri/nri.sock")
	var config map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(r.configMaps["topology-aware"].Data["config.yaml"]), &config))
	assert.Equal(t, map[string]any{"reserved-cpus": "0,1", "topology-policy": "single-numa-node"}, config)
	assert.NotEqual(t, r.daemonSets["device-injector"].Spec.Template.Annotations["checksum/config"],
		topo.Spec.Template.Annotations["checksum/config"], "a configuration's checksum restarts its pods")

	sec := r.daemonSets["security"].Spec.Template.Spec
	assert.Contains(t, sec.Containers[0].Args, "--validator=false")
	needs := defaultNeeds()["security"]
	needs.hostPaths["/etc/nri-suite/seccomp"] = "/etc/nri-suite/seccomp"
	delete(needs.hostPaths, "/var/run/nri")
	needs.hostPaths["/run/containerd/nri"] = "/run/containerd/nri"
	needs.writable = []string{"/run/containerd/nri", "/run/nri-suite"}
	checkDaemonSet(t, "security", r.daemonSets["security"], needs)

	di := r.daemonSets["device-injector"].Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, resource.MustParse("50m"), di.Requests[corev1.ResourceCPU])
	assert.Equal(t, resource.MustParse("512Mi"), di.Limits[corev1.ResourceMemory])
	needs = defaultNeeds()["device-injector"]
	delete(needs.hostPaths, "/var/run/nri")
	needs.hostPaths["/run/containerd/nri"] = "/run/containerd/nri"
	needs.hostPaths["/opt/models"] = "/opt/models"
	needs.writable = []string{"/run/containerd/nri", "/run/nri-suite"}
	checkDaemonSet(t, "device-injector", r.daemonSets["device-injector"], needs)
	for _, m := range r.daemonSets["device-injector"].Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == "/opt/models" {
			require.NotNil(t, m.MountPropagation)
			assert.Equal(t, corev1.MountPropagationHostToContainer, *m.MountPropagation, "mounts the host makes in a mount source dir later are seen")
		}
	}
}

// TestChartClassMounts: the mounts of the block I/O and RDT classes, of
// the resctrl metrics and of the node's filesystems are there only when
// asked for, read-write only where topology-aware makes the RDT groups.
func TestChartClassMounts(t *testing.T) {
	r, err := render(t, map[string]any{"plugins": map[string]any{
		"topology-aware": map[string]any{"blockDevices": true, "resctrl": true},
		"stats":          map[string]any{"resctrl": true, "hostFilesystems": true},
	}})
	require.NoError(t, err)
	defaults, err := render(t, nil)
	require.NoError(t, err)
	assert.Contains(t, defaults.daemonSets["stats"].Spec.Template.Spec.Containers[0].Args, "--host-root=",
		"by default stats reads no usage of the node's filesystems: the container's / is not the node's")
	needs := defaultNeeds()
	topo := needs["topology-aware"]
	topo.hostPaths["/dev"] = "/dev"
	topo.hostPaths["/sys/fs/resctrl"] = "/sys/fs/resctrl"
	topo.writable = append(topo.writable, "/sys/fs/resctrl")
	checkDaemonSet(t, "topology-aware", r.daemonSets["topology-aware"], topo)
	stats := needs["stats"]
	stats.hostPaths["/sys/fs/resctrl"] = "/sys/fs/resctrl"
	stats.hostPaths["/host/root"] = "/"
	checkDaemonSet(t, "stats", r.daemonSets["stats"], stats)
	ctr := r.daemonSets["stats"].Spec.Template.Spec.Containers[0]
	assert.Contains(t, ctr.Args, "--host-root=/host/root")
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == "/host/root" {
			require.NotNil(t, m.MountPropagation)
			assert.Equal(t, corev1.MountPropagationHostToContainer, *m.MountPropagation, "the node's later mounts are seen")
			assert.True(t, m.ReadOnly)
		}
	}
	for _, name := range []string{"device-injector", "sidecar-order", "security"} {
		checkDaemonSet(t, name, r.daemonSets[name], needs[name])
	}
}

func TestChartRefusesBadValues(t *testing.T) {
	tests := []struct {
		name    string
		values  map[string]any
		wantErr []string
	}{
		{name: "unknown plugin", values: map[string]any{"plugins": map[string]any{"gpu": map[string]any{"enabled": true}}},
			wantErr: []string{"plugins", "gpu"}},
		{name: "negative memory", values: map[string]any{"plugins": map[string]any{"stats": map[string]any{
			"resources": map[string]any{"limits": map[string]any{"memory": "-1Mi"}}}}},
			wantErr: []string{"/plugins/stats/resources/limits/memory", "-1Mi"}},
		{name: "negative cpu", values: map[string]any{"plugins": map[string]any{"security": map[string]any{
			"resources": map[string]any{"requests": map[string]any{"cpu": "-100m"}}}}},
			wantErr: []string{"/plugins/security/resources/requests/cpu"}},
		{name: "bad index", values: map[string]any{"plugins": map[string]any{"stats": map[string]any{"index": "9"}}},
			wantErr: []string{"/plugins/stats/index"}},
		{name: "relative socket dir", values: map[string]any{"nri": map[string]any{"socketDir": "run/nri"}},
			wantErr: []string{"/nri/socketDir"}},
		{name: "unknown plugin key", values: map[string]any{"plugins": map[string]any{"stats": map[string]any{"replicas": 2}}},
			wantErr: []string{"replicas"}},
		{name: "bad tolerating namespace", values: map[string]any{"tolerateMissingPlugins": map[string]any{"namespaces": []any{"Kube_System"}}},
			wantErr: []string{"/tolerateMissingPlugins/namespaces/0", "Kube_System"}},
		{name: "unknown tolerateMissingPlugins key", values: map[string]any{"tolerateMissingPlugins": map[string]any{"webhook": true}},
			wantErr: []string{"webhook"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.values)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

// The plain manifests are the chart's defaults rendered; `go test -update`
// rewrites them.
func TestPlainManifestsInSync(t *testing.T) {
	// kubectl runs no hook: the plain manifests leave the node state at a
	// delete, and the plugins without a token.
	r, err := render(t, map[string]any{"uninstall": map[string]any{"removeNodeState": false}})
	require.NoError(t, err)
	want := manifestHeader + r.text
	if *update {
		require.NoError(t, os.WriteFile(manifestPath, []byte(want), 0o644))
	}
	got, err := os.ReadFile(manifestPath)
	require.NoError(t, err)
	if line, w, g := firstDifference(want, string(got)); line > 0 {
		t.Errorf("%s is out of date: run `go test ./... -update` in deployments/helm; line %d is %q, the chart renders %q",
			filepath.Base(manifestPath), line, g, w)
	}
}

// firstDifference returns the first line (from 1) where want and got
// differ, and both lines; 0 when they are equal.
func firstDifference(want, got string) (int, string, string) {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return i + 1, wl, gl
		}
	}
	return 0, "", ""
}

const manifestHeader = `# nri-suite: the Helm chart deployments/helm/nri-suite rendered with its
# default values as release "nri-suite" in kube-system, but for
# uninstall.removeNodeState: false (kubectl runs no pre-delete hook, so a
# kubectl delete leaves the plugins' node state in /run until reboot).
# Generated by deployments/helm/chart_test.go (go test ./... -update); do not edit.
`

func TestFirstDifference(t *testing.T) {
	line, w, g := firstDifference("a\nb\nc", "a\nx\nc")
	assert.Equal(t, []any{2, "b", "x"}, []any{line, w, g})
	line, _, _ = firstDifference("a\nb", "a\nb")
	assert.Zero(t, line)
	line, w, g = firstDifference("a\nb", "a")
	assert.Equal(t, []any{2, "b", ""}, []any{line, w, g})
}

func subset(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
