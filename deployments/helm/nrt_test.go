package helm

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const nrtArg = "--node-resource-topology"

// By default topology-aware publishes no NodeResourceTopology: no CRD, no
// cluster-wide RBAC, no flag.
func TestChartNodeResourceTopologyOff(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	assert.Empty(t, r.crds)
	for name := range r.clusterRoles {
		assert.NotContains(t, name, "noderesourcetopology")
	}
	for name := range r.clusterBindings {
		assert.NotContains(t, name, "noderesourcetopology")
	}
	assert.NotContains(t, r.daemonSets["topology-aware"].Spec.Template.Spec.Containers[0].Args, nrtArg)
}

// nodeResourceTopology.enabled: the CRD (v1alpha2 stored, cluster-scoped),
// and topology-aware alone may get Nodes and write NodeResourceTopologies,
// and is told to publish.
func TestChartNodeResourceTopology(t *testing.T) {
	r, err := render(t, map[string]any{"nodeResourceTopology": map[string]any{"enabled": true}})
	require.NoError(t, err)
	crd := r.crds["noderesourcetopologies.topology.node.k8s.io"]
	require.NotNil(t, crd, "the CRD is installed")
	assert.Equal(t, apiextensionsv1.ClusterScoped, crd.Spec.Scope)
	assert.Equal(t, "NodeResourceTopology", crd.Spec.Names.Kind)
	stored := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			stored = v.Name
		}
		if v.Name == "v1alpha2" {
			assert.True(t, v.Served, "v1alpha2 is served")
		}
	}
	assert.Equal(t, "v1alpha2", stored)
	assert.Equal(t, "nri-suite", crd.Labels["app.kubernetes.io/part-of"])

	const name = "nri-suite-topology-aware:noderesourcetopology"
	var nrtRoles []string // the others are kubeAPI.events' (kubeapi_test.go)
	for n, role := range r.clusterRoles {
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "noderesourcetopologies") {
				nrtRoles = append(nrtRoles, n)
			}
		}
	}
	assert.Equal(t, []string{name}, nrtRoles)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"get", "create", "update", "delete"}},
	}, r.clusterRoles[name].Rules)
	binding := r.clusterBindings[name]
	require.NotNil(t, binding)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nri-suite-topology-aware", Namespace: releaseNamespace}}, binding.Subjects)

	for plugin, ds := range r.daemonSets {
		args := ds.Spec.Template.Spec.Containers[0].Args
		if plugin == "topology-aware" {
			assert.Contains(t, args, nrtArg)
			assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Env[0].Name, "NODE_NAME", "the node it publishes for")
			continue
		}
		assert.NotContains(t, args, nrtArg, plugin)
	}
}

// Without the node-state removal (and the Events, kubeapi_test.go),
// topology-aware still gets a service account with a token for the
// publishing, and only that binding; the CRD is left to whoever installs it
// when installCRD is false.
func TestChartNodeResourceTopologyAlone(t *testing.T) {
	r, err := render(t, map[string]any{
		"nodeResourceTopology": map[string]any{"enabled": true, "installCRD": false},
		"uninstall":            map[string]any{"removeNodeState": false},
		"kubeAPI":              map[string]any{"events": false},
	})
	require.NoError(t, err)
	assert.Empty(t, r.crds)
	assert.Empty(t, r.roles, "no Role to read a DaemonSet")
	assert.Equal(t, []string{"nri-suite-stats", "nri-suite-topology-aware"}, slices.Sorted(maps.Keys(r.serviceAccounts)))
	assert.Equal(t, []string{"nri-suite-stats:auth-delegator", "nri-suite-topology-aware:noderesourcetopology"},
		slices.Sorted(maps.Keys(r.clusterBindings)))
	spec := r.daemonSets["topology-aware"].Spec.Template.Spec
	assert.Equal(t, "nri-suite-topology-aware", spec.ServiceAccountName)
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.True(t, *spec.AutomountServiceAccountToken)

	_, err = render(t, map[string]any{"nodeResourceTopology": map[string]any{"enabled": "yes"}})
	assert.ErrorContains(t, err, "nodeResourceTopology")
}
