package helm

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// At helm uninstall the pre-delete hook's Job deletes exactly the release's
// DaemonSets (its selector matches each of them, its Role may delete those
// and only list the others) with the first enabled plugin's image, before
// anything else goes; each plugin may read its own DaemonSet and nothing
// else, and asks with --daemonset when it stops (checkDaemonSet). The hook's
// objects are made before the Job and deleted once it succeeded.
func TestChartUninstall(t *testing.T) {
	r, err := render(t, map[string]any{"plugins": map[string]any{"device-injector": map[string]any{"enabled": false}}})
	require.NoError(t, err)
	require.Len(t, r.daemonSets, 4)
	require.Len(t, r.jobs, 1, "the hook's Job")
	job := r.jobs["nri-suite-uninstall"]
	require.NotNil(t, job)
	for _, meta := range []map[string]string{job.Annotations, r.serviceAccounts[job.Name].Annotations, r.roles[job.Name].Annotations,
		r.roleBindings[job.Name].Annotations} {
		assert.Equal(t, "pre-delete", meta["helm.sh/hook"])
		assert.Equal(t, "before-hook-creation,hook-succeeded", meta["helm.sh/hook-delete-policy"])
	}
	assert.Equal(t, "0", job.Annotations["helm.sh/hook-weight"], "the Job after its service account, Role and binding (-1)")
	pod := job.Spec.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	assert.Equal(t, job.Name, pod.ServiceAccountName)
	assert.Equal(t, "true", job.Spec.Template.Annotations["tolerate-missing-plugins.nri-suite.io"], "it runs while security stops")
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "ghcr.io/nri-suite/nri-security:0.1.0", c.Image, "the first enabled plugin's image")
	assert.Equal(t, []string{"/usr/local/bin/nri-security", "uninstall", "--namespace=" + releaseNamespace,
		"--selector=app.kubernetes.io/part-of=nri-suite,app.kubernetes.io/instance=" + releaseName, "--timeout=2m"}, c.Command)
	selector, err := labels.Parse(c.Command[3][len("--selector="):])
	require.NoError(t, err)
	var names []string
	for _, ds := range r.daemonSets {
		assert.True(t, selector.Matches(labels.Set(ds.Labels)), "the hook deletes DaemonSet %s", ds.Name)
		names = append(names, ds.Name)
	}
	slices.Sort(names)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: names, Verbs: []string{"delete"}},
	}, r.roles[job.Name].Rules)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: job.Name, Namespace: releaseNamespace}}, r.roleBindings[job.Name].Subjects)

	for name, ds := range r.daemonSets {
		sa := ds.Spec.Template.Spec.ServiceAccountName
		require.NotNil(t, r.serviceAccounts[sa], "plugin %s's service account", name)
		assert.Empty(t, r.serviceAccounts[sa].Annotations["helm.sh/hook"], "a plugin's service account lives with the release")
		assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"},
			ResourceNames: []string{ds.Name}, Verbs: []string{"get"}}}, r.roles[sa].Rules, "plugin %s reads its own DaemonSet only", name)
		assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa}, r.roleBindings[sa].RoleRef)
		assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: releaseNamespace}}, r.roleBindings[sa].Subjects)
	}
	assert.Len(t, r.serviceAccounts, 5, "four plugins' and the hook's")
}

// uninstall.removeNodeState false: no hook, no Role to read a DaemonSet,
// and the plugins never ask; only stats, which reviews the requests to its
// endpoints (auth webhook), keeps a service account, with that one binding
// (with kubeAPI.events off, which gives every plugin one: kubeapi_test.go).
func TestChartUninstallKeepsNodeState(t *testing.T) {
	noEvents := map[string]any{"events": false}
	r, err := render(t, map[string]any{"uninstall": map[string]any{"removeNodeState": false}, "kubeAPI": noEvents})
	require.NoError(t, err)
	assert.Empty(t, r.jobs)
	assert.Empty(t, r.roles)
	assert.Empty(t, r.roleBindings)
	assert.Equal(t, []string{"nri-suite-stats"}, slices.Sorted(maps.Keys(r.serviceAccounts)))
	assert.Equal(t, []string{"nri-suite-stats:auth-delegator"}, slices.Sorted(maps.Keys(r.clusterBindings)))
	for name, ds := range r.daemonSets {
		spec := ds.Spec.Template.Spec
		require.NotNil(t, spec.AutomountServiceAccountToken)
		for _, arg := range spec.Containers[0].Args {
			assert.NotContains(t, arg, "--daemonset", name)
		}
		if name == "stats" {
			assert.True(t, *spec.AutomountServiceAccountToken, "stats: a token for its reviews")
			assert.Equal(t, "nri-suite-stats", spec.ServiceAccountName)
			continue
		}
		assert.False(t, *spec.AutomountServiceAccountToken, "%s: no API access, no token", name)
		assert.Empty(t, spec.ServiceAccountName)
	}

	r, err = render(t, map[string]any{"uninstall": map[string]any{"removeNodeState": false}, "kubeAPI": noEvents,
		"plugins": map[string]any{"stats": map[string]any{"auth": "none"}}})
	require.NoError(t, err)
	assert.Empty(t, r.serviceAccounts, "no plugin uses the API")
	assert.Empty(t, r.clusterBindings)
}
