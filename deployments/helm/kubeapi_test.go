package helm

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// kubeAPI.events (default true): every enabled plugin has a service
// account with a token, bound to one ClusterRole that may create and patch
// Events and nothing else; device-injector's alone may also read nodes and
// patch nodes/status (its NRIDevicesHealthy condition). No plugin is told
// --api-events=false.
func TestChartKubeAPIEvents(t *testing.T) {
	r, err := render(t, map[string]any{"plugins": map[string]any{"sidecar-order": map[string]any{"enabled": false}}})
	require.NoError(t, err)
	require.Len(t, r.daemonSets, 4)
	assert.Equal(t, []string{"nri-suite-device-injector:node-status", "nri-suite-events"}, slices.Sorted(maps.Keys(r.clusterRoles)))
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}},
		r.clusterRoles["nri-suite-events"].Rules)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}, r.clusterRoles["nri-suite-device-injector:node-status"].Rules)

	var subjects []rbacv1.Subject
	for name, ds := range r.daemonSets {
		spec := ds.Spec.Template.Spec
		require.NotNil(t, spec.AutomountServiceAccountToken)
		assert.True(t, *spec.AutomountServiceAccountToken, "%s: a token to post Events", name)
		assert.Equal(t, "nri-suite-"+name, spec.ServiceAccountName)
		assert.NotContains(t, spec.Containers[0].Args, "--api-events=false", name)
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: releaseNamespace})
	}
	events := r.clusterBindings["nri-suite-events"]
	require.NotNil(t, events)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nri-suite-events"}, events.RoleRef)
	assert.ElementsMatch(t, subjects, events.Subjects, "every enabled plugin, and only those")
	node := r.clusterBindings["nri-suite-device-injector:node-status"]
	require.NotNil(t, node)
	assert.Equal(t, "nri-suite-device-injector:node-status", node.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nri-suite-device-injector", Namespace: releaseNamespace}}, node.Subjects)

	r, err = render(t, map[string]any{"plugins": map[string]any{"device-injector": map[string]any{"enabled": false}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"nri-suite-events"}, slices.Sorted(maps.Keys(r.clusterRoles)), "no node rights without device-injector")
	assert.NotContains(t, r.clusterBindings, "nri-suite-device-injector:node-status")
}

// kubeAPI.events false: no ClusterRole nor binding of it, and every plugin
// is told --api-events=false.
func TestChartKubeAPIEventsOff(t *testing.T) {
	r, err := render(t, map[string]any{"kubeAPI": map[string]any{"events": false}})
	require.NoError(t, err)
	assert.Empty(t, r.clusterRoles)
	assert.NotContains(t, r.clusterBindings, "nri-suite-events")
	assert.NotContains(t, r.clusterBindings, "nri-suite-device-injector:node-status")
	for name, ds := range r.daemonSets {
		assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Args, "--api-events=false", name)
	}

	_, err = render(t, map[string]any{"kubeAPI": map[string]any{"event": true}})
	require.ErrorContains(t, err, "event", "the schema names the mistyped key")
}
