package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {cpu.nri-suite.io: shared}
    spec:
      containers:
      - name: app
        image: busybox
        resources: {limits: {cpu: "2", memory: 1Gi}}
`

func TestParseObjects(t *testing.T) {
	objects, err := ParseObjects([]byte(deployment+`---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db}
  spec:
    template:
      spec: {containers: [{name: db, image: x}]}
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: agent, namespace: kube-system}
  spec:
    template:
      spec: {containers: [{name: agent, image: x}]}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata: {name: batch}
  spec:
    replicas: 0
    template:
      spec: {containers: [{name: w, image: x}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: single}
  spec: {containers: [{name: c, image: x}]}
---
`), "m.yaml")
	require.NoError(t, err)
	require.Len(t, objects, 5)

	web := objects[0]
	assert.Equal(t, KindDeployment, web.Kind)
	assert.Equal(t, "Deployment shop/web", web.String())
	assert.Equal(t, Position{File: "m.yaml", Line: 1, Column: 1}, web.Pos)
	assert.Equal(t, 3, web.Replicas)
	pods := web.Pods()
	require.Len(t, pods, 3)
	for i, p := range pods {
		assert.Equal(t, []string{"shop", "web-" + string(rune('0'+i))}, []string{p.Namespace, p.Name})
		assert.Equal(t, "v1", p.APIVersion)
		assert.Equal(t, map[string]string{"app": "web"}, p.Labels, "the template's labels")
		assert.Equal(t, "shared", p.Annotations["cpu.nri-suite.io"], "the template's annotations")
		assert.Equal(t, "2", p.Spec.Containers[0].Resources.Requests.Cpu().String(), "API defaults applied: requests from limits")
	}
	pods[0].Spec.Containers[0].Name = "changed"
	assert.Equal(t, "app", web.Pods()[0].Spec.Containers[0].Name, "each pod is a copy")

	db := objects[1]
	assert.Equal(t, "StatefulSet default/db", db.String())
	assert.Equal(t, 1, db.Replicas, "the API's default")
	assert.Equal(t, Position{File: "m.yaml", Line: 20, Column: 3}, db.Pos)
	assert.Equal(t, 1, objects[2].Replicas, "a DaemonSet runs one pod on the node")
	assert.Equal(t, "agent-0", objects[2].Pods()[0].Name)
	assert.Empty(t, objects[3].Pods(), "0 replicas")
	single := objects[4]
	assert.Equal(t, KindPod, single.Kind)
	assert.Equal(t, []*v1.Pod{single.Template}, single.Pods(), "a Pod is its own")
	assert.Equal(t, "single", single.Pods()[0].Name)
}

func TestParseObjectsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // each on a line of its own, in order
	}{
		{"empty", "", []string{"m.yaml: no objects"}},
		{"only separators", "---\n---\n", []string{"m.yaml: no objects"}},
		{"not yaml", "kind: [", []string{"m.yaml: yaml:"}},
		{"a scalar", "hello", []string{"m.yaml:1:1: expected a Kubernetes object"}},
		{"unknown kind", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}", []string{"m.yaml:1:1", `kind "Job"`, "Pod (v1), Deployment (apps/v1)"}},
		{"wrong apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}", []string{"m.yaml:1:1: Deployment", `apiVersion "extensions/v1beta1": expected "apps/v1"`}},
		{"unknown field", strings.Replace(deployment, "replicas: 3", "replica: 3", 1), []string{"m.yaml:1:1: Deployment", `unknown field "replica"`}},
		{"no name", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {namespace: a}\nspec: {template: {spec: {containers: [{name: c}]}}}", []string{"m.yaml:1:1: DaemonSet: metadata.name is empty"}},
		{"negative replicas", strings.Replace(deployment, "replicas: 3", "replicas: -1", 1), []string{"m.yaml:1:1: Deployment shop/web: spec.replicas -1: expected 0 to 10000"}},
		{"too many replicas", strings.Replace(deployment, "replicas: 3", "replicas: 100000", 1), []string{"spec.replicas 100000: expected 0 to 10000"}},
		{"template without containers", "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r}\nspec: {template: {spec: {}}}", []string{"m.yaml:1:1: ReplicaSet default/r: spec.template", "spec.containers is empty"}},
		{"bad pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, imag: x}]}", []string{"m.yaml:1:1", "imag"}},
		{"List with a bad apiVersion", "apiVersion: v2\nkind: List\nitems: []", []string{`List: apiVersion "v2"`}},
		{"List without items", "apiVersion: v1\nkind: List", []string{"List: items: expected a list"}},
		{"List with an unknown key", "apiVersion: v1\nkind: List\nitemz: []", []string{"m.yaml:3:1: List: unknown key \"itemz\""}},
		{"List in a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}", []string{"m.yaml:4:3: List item: a List in a List"}},
		{"every problem", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret}\n- 3\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {}\n", []string{
			"m.yaml:4:3", `kind "Secret"`,
			"\nm.yaml:5:3: List item: expected a Kubernetes object",
			"\nm.yaml:7:1: Deployment: metadata.name is empty",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects, err := ParseObjects([]byte(tc.doc), "m.yaml")
			require.Error(t, err)
			assert.Nil(t, objects)
			rest := err.Error()
			for _, want := range tc.want {
				i := strings.Index(rest, want)
				if assert.GreaterOrEqual(t, i, 0, "%q in order in %q", want, err.Error()) {
					rest = rest[i+len(want):]
				}
			}
		})
	}
}

// FuzzParseObjects checks that no manifest file makes the parser panic,
// and that what it accepts is well-formed: named objects of a known kind,
// within the replicas bound, each pod a valid Pod named after its object.
func FuzzParseObjects(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(workloadDir, "*", "*.yaml"))
	require.NoError(f, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, seed := range []string{
		"", "---", deployment, "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}]",
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {replicas: 2, template: {spec: {containers: [{name: c}]}}}",
		"{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: &a d}, spec: {template: {metadata: {name: *a}, spec: {containers: [{name: c}]}}}}",
	} {
		f.Add([]byte(seed))
	}
	kinds := map[ObjectKind]bool{}
	for _, k := range objectKinds {
		kinds[k.kind] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objects, err := ParseObjects(data, "f.yaml")
		if err != nil {
			assert.Nil(t, objects)
			return
		}
		require.NotEmpty(t, objects)
		for _, o := range objects {
			assert.True(t, kinds[o.Kind], "kind %q", o.Kind)
			assert.NotEmpty(t, o.Name)
			assert.NotEmpty(t, o.Namespace)
			assert.Equal(t, "f.yaml", o.Pos.File)
			assert.Positive(t, o.Pos.Line)
			assert.True(t, o.Replicas >= 0 && o.Replicas <= MaxReplicas, "replicas %d", o.Replicas)
			require.NotNil(t, o.Template)
			assert.NotEmpty(t, o.Template.Spec.Containers)
			if o.Replicas <= 3 {
				pods := o.Pods()
				assert.Len(t, pods, map[bool]int{true: 1, false: o.Replicas}[o.Kind == KindPod])
				for _, p := range pods {
					assert.Equal(t, o.Namespace, p.Namespace)
					assert.True(t, strings.HasPrefix(p.Name, o.Name), "pod %s of %s", p.Name, o)
				}
			}
		}
	})
}
