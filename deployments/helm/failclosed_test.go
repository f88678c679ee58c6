package helm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// tolerateKey is the containerd drop-in's tolerate_missing_plugins_annotation
// (deployments.TolerateMissingPlugins; this module does not import the suite's).
const tolerateKey = "tolerate-missing-plugins.nri-suite.io"

// The suite's own pods start while security is not connected: every
// DaemonSet's pods carry the annotation.
func TestChartPodsTolerateMissingSecurity(t *testing.T) {
	r, err := render(t, nil)
	require.NoError(t, err)
	for name, ds := range r.daemonSets {
		assert.Equal(t, "true", ds.Spec.Template.Annotations[tolerateKey], "pods of %s", name)
	}
}

// compilePolicy compiles a ValidatingAdmissionPolicy as the API server's
// admission plugin does (k8s.io/apiserver's unexported compilePolicy): the
// same CEL environment, variables, match conditions and message
// expressions. A compile error is a decision of every request, which
// failurePolicy Fail turns into a refusal of every pod in the cluster.
func compilePolicy(p *admissionv1.ValidatingAdmissionPolicy) validating.Validator {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	vars := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	variables := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, vars, environment.StoredExpressions)
	conditions := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
	for i := range p.Spec.MatchConditions {
		conditions[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
	}
	matcher := matchconditions.NewMatcher(compiler.CompileCondition(conditions, vars, environment.StoredExpressions),
		p.Spec.FailurePolicy, "policy", "validate", p.Name)
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, vars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, plugincel.OptionalVariableDeclarations{}, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
}

// admit runs validator on a request for pods (or a subresource) in
// namespace default and returns the message of the denial, "" if admitted;
// old is nil for a CREATE.
func admit(t *testing.T, v validating.Validator, op admission.Operation, subresource string, pod, old *corev1.Pod) string {
	t.Helper()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	var oldObject runtime.Object
	if old != nil {
		oldObject = old
	}
	attrs := admission.NewAttributesRecord(pod, oldObject, gvk, "default", pod.Name, gvr, subresource, op, nil, false, nil)
	result := v.Validate(context.Background(), gvr, &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk,
		VersionedObject: admission.NewLazyObject(pod), VersionedOldObject: admission.NewLazyObject(oldObject)}, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	for _, d := range result.Decisions {
		require.NotEqual(t, validating.EvalError, d.Evaluation, "evaluating the policy: %s", d.Message)
		if d.Action == validating.ActionDeny {
			return d.Message
		}
	}
	return ""
}

func annotatedPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: annotations}}
}

// The chart's ValidatingAdmissionPolicy, compiled and evaluated with the API
// server's own CEL code, and its binding's namespaces: no pod outside the
// release namespace may add the annotation that would let it run without
// security.
func TestChartAdmissionPolicy(t *testing.T) {
	r, err := render(t, map[string]any{"tolerateMissingPlugins": map[string]any{"namespaces": []any{"monitoring"}}})
	require.NoError(t, err)
	require.Len(t, r.policies, 1)
	require.Len(t, r.bindings, 1)
	policy, binding := r.policies[0], r.bindings[0]
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
	require.NotNil(t, policy.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *policy.Spec.FailurePolicy)

	selector, err := metav1.LabelSelectorAsSelector(binding.Spec.MatchResources.NamespaceSelector)
	require.NoError(t, err)
	for ns, bound := range map[string]bool{releaseNamespace: false, "monitoring": false, "default": true, "tenants": true} {
		assert.Equal(t, bound, selector.Matches(labels.Set{"kubernetes.io/metadata.name": ns}), "the policy applies in namespace %s", ns)
	}

	v := compilePolicy(policy)
	const refusal = "lets containers start without the nri-suite security plugin: pods of namespace default may not add it, " +
		"only those of kube-system, monitoring (the release namespace and the chart value tolerateMissingPlugins.namespaces)"
	mirror := map[string]string{"kubernetes.io/config.mirror": "abc", tolerateKey: "true"}
	for _, tt := range []struct {
		name        string
		op          admission.Operation
		subresource string
		pod, old    map[string]string
		denied      string // "" when admitted
	}{
		{name: "no annotations", op: admission.Create},
		{name: "other annotations", op: admission.Create, pod: map[string]string{"a": "b", tolerateKey + ".example.com": "true"}},
		{name: "pod-wide", op: admission.Create, pod: map[string]string{tolerateKey: "true"}, denied: "annotation " + tolerateKey + " " + refusal},
		{name: "per pod", op: admission.Create, pod: map[string]string{tolerateKey + "/pod": "true"}, denied: tolerateKey + "/pod"},
		{name: "per container", op: admission.Create, pod: map[string]string{tolerateKey + "/container.app": "true"},
			denied: tolerateKey + "/container.app"},
		{name: "false, still refused", op: admission.Create, pod: map[string]string{tolerateKey: "false"}, denied: refusal},
		{name: "mirror pod", op: admission.Create, pod: mirror},
		{name: "added", op: admission.Update, pod: map[string]string{tolerateKey: "true"}, old: map[string]string{}, denied: refusal},
		{name: "changed", op: admission.Update, pod: map[string]string{tolerateKey: "true"}, old: map[string]string{tolerateKey: "false"},
			denied: refusal},
		{name: "added through status", op: admission.Update, subresource: "status", pod: map[string]string{tolerateKey: "true"},
			old: map[string]string{}, denied: refusal},
		{name: "kept", op: admission.Update, pod: map[string]string{tolerateKey: "true", "a": "b"}, old: map[string]string{tolerateKey: "true"}},
		{name: "removed", op: admission.Update, pod: map[string]string{}, old: map[string]string{tolerateKey: "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var old *corev1.Pod
			if tt.op == admission.Update {
				old = annotatedPod(tt.old)
			}
			got := admit(t, v, tt.op, tt.subresource, annotatedPod(tt.pod), old)
			if tt.denied == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.denied)
			}
		})
	}
	for _, rule := range policy.Spec.MatchConstraints.ResourceRules {
		assert.Equal(t, []string{"pods", "pods/status"}, rule.Resources, "the subresources that can change annotations")
		assert.ElementsMatch(t, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, rule.Operations)
	}
}

func TestChartAdmissionPolicyOff(t *testing.T) {
	r, err := render(t, map[string]any{"tolerateMissingPlugins": map[string]any{"admissionPolicy": false}})
	require.NoError(t, err)
	assert.Empty(t, r.policies)
	assert.Empty(t, r.bindings)
	for name, ds := range r.daemonSets {
		assert.Equal(t, "true", ds.Spec.Template.Annotations[tolerateKey], "pods of %s tolerate still", name)
	}
}

// Before 1.30 there is no v1 ValidatingAdmissionPolicy: the chart says so
// rather than leave the annotation open without a word.
func TestChartAdmissionPolicyNeedsKubernetes130(t *testing.T) {
	_, err := renderFor(t, "v1.29.4", nil)
	require.Error(t, err)
	assert.ErrorContains(t, err, "tolerateMissingPlugins.admissionPolicy: Kubernetes v1.29.4 has no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, expected >= 1.30")
	_, err = renderFor(t, "v1.29.4", map[string]any{"tolerateMissingPlugins": map[string]any{"admissionPolicy": false}})
	assert.NoError(t, err)
	_, err = renderFor(t, "v1.30.0", nil)
	assert.NoError(t, err)
}
