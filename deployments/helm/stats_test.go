package helm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// statsArgs are the stats-only arguments of the stats plugin's container.
func statsArgs(c corev1.Container) []string {
	var args []string
	for _, a := range c.Args {
		if len(a) > 8 && a[:8] == "--stats-" {
			args = append(args, a)
		}
	}
	return args
}

// By default the stats listener is protected as the kubelet's port, on the
// pod's address: a token through TokenReview or a client certificate of
// the cluster's CA, each authorized by a SubjectAccessReview, for which
// its service account alone is bound to system:auth-delegator.
func TestChartStatsDefaults(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	pod := r.daemonSets["stats"].Spec.Template.Spec
	c := pod.Containers[0]
	assert.Equal(t, []string{"--stats-addr=0.0.0.0:9191", "--stats-auth=webhook", "--stats-client-ca=/etc/nri-suite/client-ca/ca.crt",
		"--stats-cadvisor=true"}, statsArgs(c))
	assert.False(t, pod.HostNetwork)
	assert.Equal(t, []corev1.ContainerPort{{Name: "http", ContainerPort: 9190, Protocol: corev1.ProtocolTCP},
		{Name: "stats", ContainerPort: 9191, Protocol: corev1.ProtocolTCP}}, c.Ports)
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	require.NotNil(t, volumes["client-ca"].ConfigMap)
	assert.Equal(t, "kube-root-ca.crt", volumes["client-ca"].ConfigMap.Name, "the cluster's CA, as the kubelet's --client-ca-file")
	assert.NotContains(t, volumes, "tls", "a self-signed certificate without a Secret")

	var delegators []string
	for name, b := range r.clusterBindings {
		if b.RoleRef.Name == "system:auth-delegator" {
			delegators = append(delegators, name)
		}
	}
	assert.Equal(t, []string{"nri-suite-stats:auth-delegator"}, delegators, "no other plugin is bound")
	binding := r.clusterBindings["nri-suite-stats:auth-delegator"]
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nri-suite-stats", Namespace: releaseNamespace}}, binding.Subjects)
	assert.Equal(t, "nri-suite-stats", pod.ServiceAccountName)
}

// Where metrics-server finds it: the node's network, or a host port; a TLS
// Secret; the suite's own series only.
func TestChartStatsValues(t *testing.T) {
	stats := func(values map[string]any) corev1.PodSpec {
		t.Helper()
		r, err := render(t, map[string]any{"plugins": map[string]any{"stats": values}})
		require.NoError(t, err)
		return r.daemonSets["stats"].Spec.Template.Spec
	}

	pod := stats(map[string]any{"hostNetwork": true, "tlsSecret": "nri-stats-tls", "clientCAConfigMap": "", "cadvisor": false})
	assert.True(t, pod.HostNetwork)
	assert.True(t, pod.HostPID, "always: the network counters come from /proc/<pid>/net/dev")
	assert.Equal(t, []string{"--stats-addr=0.0.0.0:9191", "--stats-auth=webhook", "--stats-tls-cert=/etc/nri-suite/tls/tls.crt",
		"--stats-tls-key=/etc/nri-suite/tls/tls.key", "--stats-cadvisor=false"}, statsArgs(pod.Containers[0]))
	needs := defaultNeeds()["stats"]
	needs.hostNet, needs.configFiles = true, []string{"/etc/nri-suite/tls"}
	r, err := render(t, map[string]any{"plugins": map[string]any{"stats": map[string]any{"hostNetwork": true, "tlsSecret": "nri-stats-tls",
		"clientCAConfigMap": ""}}})
	require.NoError(t, err)
	checkDaemonSet(t, "stats", r.daemonSets["stats"], needs)
	var secret *corev1.SecretVolumeSource
	for _, v := range pod.Volumes {
		if v.Name == "tls" {
			secret = v.Secret
		}
	}
	require.NotNil(t, secret)
	assert.Equal(t, "nri-stats-tls", secret.SecretName)

	pod = stats(map[string]any{"hostPort": 10255})
	assert.False(t, pod.HostNetwork)
	assert.Equal(t, corev1.ContainerPort{Name: "stats", ContainerPort: 9191, HostPort: 10255, Protocol: corev1.ProtocolTCP}, pod.Containers[0].Ports[1])

	pod = stats(map[string]any{"auth": "none"})
	assert.Equal(t, []string{"--stats-addr=127.0.0.1:9191", "--stats-cadvisor=true"}, statsArgs(pod.Containers[0]),
		"without authentication the listener stays on the pod's loopback")
	for _, v := range pod.Volumes {
		assert.NotContains(t, []string{"tls", "client-ca"}, v.Name)
	}
}

func TestChartStatsRefusesBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"both host network and port": {map[string]any{"hostNetwork": true, "hostPort": 9191}, "hostNetwork and hostPort are both set"},
		"host port without auth":     {map[string]any{"auth": "none", "hostPort": 9191}, "hostPort with auth none"},
		"unknown auth":               {map[string]any{"auth": "basic"}, "/plugins/stats/auth"},
		"bad secret name":            {map[string]any{"tlsSecret": "My_Secret"}, "/plugins/stats/tlsSecret"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, map[string]any{"plugins": map[string]any{"stats": tc.values}})
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
