package simulate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/topology/locality"
)

const inlinePod = `
    pod:
      apiVersion: v1
      kind: Pod
      metadata: {name: p}
      spec:
        containers:
        - name: c
          image: busybox
          resources: {limits: {cpu: "2", memory: 1Gi}}
`

func TestParse(t *testing.T) {
	w, err := Parse([]byte(`
steps:
- create:
    file: pods/a.yaml
- create:`+inlinePod+`    devices:
      c: [{numa-node: 1}, {char: "195:0"}, {block: "259:1"}]
- resize:
    pod: p
    container: c
    resources:
      requests: {cpu: 1500m}
      limits: {cpu: "3", memory: 1Gi}
- restart:
- restart: {}
- delete:
    pod: a
    namespace: team
- delete: {deployment: web}
`), "w.yaml")
	require.NoError(t, err)
	require.Len(t, w.Steps, 7)
	for i, s := range w.Steps {
		assert.Equal(t, i+1, s.Number)
	}
	var kinds []StepKind
	for _, s := range w.Steps {
		kinds = append(kinds, s.Kind)
	}
	assert.Equal(t, []StepKind{StepCreate, StepCreate, StepResize, StepRestart, StepRestart, StepDelete, StepDelete}, kinds)
	assert.Equal(t, Position{File: "w.yaml", Line: 3, Column: 3}, w.Steps[0].Pos)

	assert.Equal(t, "pods/a.yaml", w.Steps[0].Create.File)
	assert.Nil(t, w.Steps[0].Create.Objects, "files are read by Load")

	c := w.Steps[1].Create
	require.Len(t, c.Objects, 1)
	assert.Equal(t, KindPod, c.Objects[0].Kind)
	assert.Equal(t, "default", c.Objects[0].Template.Namespace, "API defaults applied")
	one := 1
	assert.Equal(t, []DeviceSpec{
		{NUMANode: &one},
		{Kind: locality.Char, Major: 195, Minor: 0},
		{Kind: locality.Block, Major: 259, Minor: 1},
	}, c.Devices["c"])

	r := w.Steps[2].Resize
	assert.Equal(t, PodRef{Namespace: "default", Name: "p"}, r.PodRef)
	assert.Equal(t, "c", r.Container)
	assert.Equal(t, resource.MustParse("1500m"), r.Resources.Requests[v1.ResourceCPU])
	assert.Equal(t, resource.MustParse("3"), r.Resources.Limits[v1.ResourceCPU])

	assert.Equal(t, &Delete{Kind: KindPod, PodRef: PodRef{Namespace: "team", Name: "a"}}, w.Steps[5].Delete)
	assert.Equal(t, &Delete{Kind: KindDeployment, PodRef: PodRef{Namespace: "default", Name: "web"}}, w.Steps[6].Delete)
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"empty", ``, []string{"w.yaml: empty document", "steps"}},
		{"not yaml", `steps: [`, []string{"w.yaml: yaml:"}},
		{"two documents", "steps: [restart: {}]\n---\nsteps: []", []string{"one YAML document"}},
		{"a list at the top", `[restart: {}]`, []string{"w.yaml:1:1: workload: top level: expected a mapping with keys steps"}},
		{"unknown top-level key", "steps: [restart: {}]\nmachine: x", []string{"w.yaml:2:1", `unknown key "machine"`, "expected steps"}},
		{"no steps", `steps: []`, []string{"steps: expected a non-empty list"}},
		{"unknown step kind", "steps:\n- restart:\n- scale: {pod: a}", []string{"w.yaml:3:3: step 2", `unknown step kind "scale"`, "create, resize, delete, restart"}},
		{"two kinds in a step", "steps:\n- restart:\n  delete: {pod: a}", []string{"step 1", "exactly one key"}},
		{"a step that is not a mapping", "steps:\n- restart", []string{"step 1", "exactly one key"}},
		{"create with file and pod", "steps:\n- create:\n    file: a.yaml" + inlinePod, []string{"step 1", "exactly one of file", "or pod"}},
		{"create with neither", "steps:\n- create: {devices: {c: [{numa-node: 0}]}}", []string{"step 1", "exactly one of file"}},
		{"create with an empty file", "steps:\n- create: {file: ''}", []string{"create.file", "empty string"}},
		{"create with an unknown key", "steps:\n- create: {file: a.yaml, replicas: 2}", []string{"w.yaml:2:26: step 1 (create)", `unknown key "replicas"`, "file, pod, devices"}},
		{"pod that is not a Pod", "steps:\n- create:\n    pod: {apiVersion: v1, kind: Service, metadata: {name: s}}", []string{"step 1", "create.pod", `expected apiVersion "v1" kind "Pod"`}},
		{"pod with an unknown field", "steps:\n- create:\n    pod: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containerz: []}}", []string{"create.pod", "containerz"}},
		{"pod without containers", "steps:\n- create:\n    pod: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {}}", []string{"create.pod", "spec.containers is empty"}},
		{"pod as a string", "steps:\n- create: {pod: p.yaml}", []string{"create.pod", "inline v1.Pod manifest"}},
		{"inline Deployment", "steps:\n- create:\n    pod: {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}", []string{"create.pod", `expected apiVersion "v1" kind "Pod"`}},
		{"devices of an unknown container", "steps:\n- create:" + inlinePod + "    devices: {d: [{numa-node: 0}]}", []string{"step 1", "create.devices.d", `container "d"`, "expected one of c"}},
		{"device with a bad major:minor", "steps:\n- create:" + inlinePod + "    devices: {c: [{char: '195'}]}", []string{"create.devices.c[0].char", `"195"`, "major:minor"}},
		{"device with a negative node", "steps:\n- create:" + inlinePod + "    devices: {c: [{numa-node: -1}]}", []string{"create.devices.c[0].numa-node", "non-negative"}},
		{"device of two kinds", "steps:\n- create:" + inlinePod + "    devices: {c: [{numa-node: 0, char: '1:2'}]}", []string{"create.devices.c[0]", "exactly one of numa-node"}},
		{"device of an unknown kind", "steps:\n- create:" + inlinePod + "    devices: {c: [{pci: '0000:00:01.0'}]}", []string{"create.devices.c[0]", `unknown key "pci"`}},
		{"devices not a list", "steps:\n- create:" + inlinePod + "    devices: {c: {numa-node: 0}}", []string{"create.devices.c", "non-empty list"}},
		{"resize without container", "steps:\n- resize: {pod: p, resources: {limits: {cpu: '1'}}}", []string{"step 1", "resize.container: missing"}},
		{"resize without pod", "steps:\n- resize: {container: c, resources: {limits: {cpu: '1'}}}", []string{"step 1", "resize.pod: missing"}},
		{"resize without resources", "steps:\n- resize: {pod: p, container: c}", []string{"resize.resources", "requests and/or limits"}},
		{"resize with a misspelt key", "steps:\n- resize: {pod: p, container: c, resources: {limitz: {cpu: '1'}}}", []string{"resize.resources", "limitz"}},
		{"resize with a bad quantity", "steps:\n- resize: {pod: p, container: c, resources: {limits: {cpu: lots}}}", []string{"resize.resources", "quantities must match"}},
		{"delete without pod", "steps:\n- delete: {namespace: a}", []string{"delete: expected exactly one of pod, deployment, statefulset, daemonset, replicaset"}},
		{"delete of two objects", "steps:\n- delete: {pod: a, deployment: b}", []string{"delete: expected exactly one of"}},
		{"delete of an unknown kind", "steps:\n- delete: {job: a}", []string{`unknown key "job"`}},
		{"delete with an empty namespace", "steps:\n- delete: {pod: a, namespace: ''}", []string{"delete.namespace", "empty string"}},
		{"delete with a list as pod", "steps:\n- delete: {pod: [a]}", []string{"delete.pod", "single value"}},
		{"restart with a parameter", "steps:\n- restart: {force: true}", []string{"step 1", `unknown key "force"`, "expected none"}},
		{"restart with a value", "steps:\n- restart: now", []string{"step 1", "restart: expected a mapping"}},
		{"every step's problem", "steps:\n- restart: now\n- restart:\n- delete: {}\n", []string{"w.yaml:2:12: step 1 (restart)", "\nw.yaml:4:11: step 3 (delete)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "w.yaml")
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	w, err := Load(filepath.Join(workloadDir, "basics.yaml"))
	require.NoError(t, err)
	for _, s := range w.Steps {
		if s.Create != nil {
			assert.NotEmpty(t, s.Create.Objects, "step %d: the manifest is read", s.Number)
		}
	}
	assert.Equal(t, "kube-proxy", w.Steps[0].Create.Objects[0].Name)

	w, err = Load(filepath.Join(workloadDir, "controllers.yaml"))
	require.NoError(t, err)
	var names []string
	for _, o := range w.Steps[1].Create.Objects {
		for _, p := range o.Pods() {
			names = append(names, p.Namespace+"/"+p.Name)
		}
	}
	assert.Equal(t, []string{"kube-system/node-agent-0", "jobs/batch-0", "jobs/batch-1", "jobs/batch-2", "jobs/batch-3"}, names)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	write("bad-pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, imag: x}]}\n")
	write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n")
	for _, tc := range []struct {
		name, workload string
		want           []string
	}{
		{"missing workload", "", []string{"read workload", "no-such-workload.yaml"}},
		{"missing pod file", "steps:\n- create: {file: nowhere.yaml}", []string{"workload.yaml:2:3: step 1 (create): create.file", "nowhere.yaml"}},
		{"malformed pod file", "steps:\n- restart:\n- create: {file: bad-pod.yaml}", []string{"workload.yaml:3:3: step 2 (create)", "bad-pod.yaml:1:1", "imag"}},
		{"devices of an unknown container", "steps:\n- create: {file: pod.yaml, devices: {x: [{numa-node: 0}]}}", []string{"step 1", `container "x"`}},
		{"every file's problem", "steps:\n- create: {file: nowhere.yaml}\n- create: {file: bad-pod.yaml}", []string{"workload.yaml:2:3: step 1", "\n" + filepath.Join(dir, "workload.yaml") + ":3:3: step 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "no-such-workload.yaml")
			if tc.workload != "" {
				path = write("workload.yaml", tc.workload)
			}
			_, err := Load(path)
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// FuzzParse checks that no input makes the parser panic and that what it
// accepts is well-formed: numbered steps, each with the one field of its
// kind.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(workloadDir, "*.yaml"))
	require.NoError(f, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, seed := range []string{
		"", "steps:", "steps: [restart: {}]", "steps: [{scale: {}}]",
		"steps:\n- create:" + inlinePod + "    devices: {c: [{numa-node: 0}, {char: '1:2'}]}",
		"steps: [{resize: {pod: p, container: c, resources: {limits: {cpu: '1'}}}}]",
		"steps: [{delete: {pod: &a p, namespace: *a}}]",
		"steps: [{create: {pod: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}}}]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(data, "w.yaml")
		if err != nil {
			assert.Nil(t, w)
			return
		}
		require.NotEmpty(t, w.Steps)
		for i, s := range w.Steps {
			assert.Equal(t, i+1, s.Number)
			set := map[StepKind]bool{StepCreate: s.Create != nil, StepResize: s.Resize != nil, StepDelete: s.Delete != nil}
			for kind, isSet := range set {
				assert.Equal(t, kind == s.Kind, isSet, "step %d of kind %s", s.Number, s.Kind)
			}
			if s.Create != nil {
				assert.NotEqual(t, s.Create.File == "", s.Create.Objects == nil, "exactly one of file and an inline pod")
			}
			if s.Delete != nil {
				assert.NotEmpty(t, s.Delete.Kind)
				assert.NotEmpty(t, s.Delete.Name)
			}
			if s.Resize != nil {
				assert.NotEmpty(t, s.Resize.Name)
				assert.NotEmpty(t, s.Resize.Container)
			}
		}
	})
}
