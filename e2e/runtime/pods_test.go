package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/deployments"
)

const validPod = `apiVersion: v1
kind: Pod
metadata:
  name: ok
spec:
  hostNetwork: true
  containers:
    - name: main
      image: localhost/nri-suite/busybox:latest
      imagePullPolicy: Never
`

func TestDecodePod(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "valid", yaml: validPod},
		{name: "IfNotPresent is local too", yaml: replace(validPod, "Never", "IfNotPresent")},
		{name: "no name", yaml: replace(validPod, "name: ok", "labels: {}"),
			wantErr: "metadata.name is empty: expected a pod name"},
		{name: "pod network", yaml: replace(validPod, "hostNetwork: true", "hostNetwork: false"),
			wantErr: "pod ok: spec.hostNetwork is false, expected true (the sandbox has no CNI)"},
		{name: "pulls", yaml: replace(validPod, "imagePullPolicy: Never", "imagePullPolicy: Always"),
			wantErr: `pod ok: container main: imagePullPolicy is "Always", expected Never or IfNotPresent`},
		{name: "default pull policy", yaml: replace(validPod, "      imagePullPolicy: Never\n", ""),
			wantErr: `container main: imagePullPolicy is "", expected Never or IfNotPresent`},
		{name: "init container pulls", yaml: validPod + "  initContainers:\n    - name: init\n      image: x\n",
			wantErr: `container init: imagePullPolicy is ""`},
		{name: "no containers", yaml: "apiVersion: v1\nkind: Pod\nmetadata: {name: empty}\nspec: {hostNetwork: true}\n",
			wantErr: `pod "empty": spec.containers is empty`},
		{name: "wrong kind", yaml: replace(validPod, "kind: Pod", "kind: Deployment"),
			wantErr: `kind "Deployment": expected apiVersion "v1" kind "Pod"`},
		{name: "unknown field", yaml: validPod + "  hostNetwrok: true\n",
			wantErr: `unknown field "hostNetwrok"`},
		{name: "not YAML", yaml: "{", wantErr: "decoding pod manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := DecodePod([]byte(tt.yaml))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "ok", pod.Name)
		})
	}
}

// replace changes the first old in s; a row whose old is missing stays
// valid and fails on its expected error.
func replace(s, old, new string) string { return strings.Replace(s, old, new, 1) }

func FuzzDecodePod(f *testing.F) {
	f.Add(validPod)
	f.Add("kind: Pod\nmetadata: {name: x}\nspec: {hostNetwork: true, containers: [{name: c, imagePullPolicy: Never}]}\n")
	f.Add("spec: {containers: [{resources: {limits: {cpu: 'x'}}}]}")
	f.Add("")
	f.Fuzz(func(t *testing.T, manifest string) {
		pod, err := DecodePod([]byte(manifest))
		if err == nil {
			assert.NoError(t, CheckPod(pod), "an accepted pod passes CheckPod")
		}
	})
}

// The demo workload of `make run` must be runnable by the sandbox.
func TestLoadPodsDemo(t *testing.T) {
	pods, err := LoadPods("testdata/demo")
	require.NoError(t, err)
	require.NotEmpty(t, pods)
	names := map[string]bool{}
	classes := map[corev1.PodQOSClass]int{}
	for _, p := range pods {
		assert.False(t, names[p.Name], "pod name %s is unique", p.Name)
		names[p.Name] = true
		classes[kubepod.QOSClass(p)]++
	}
	// make run shows what plugins do to every QoS class; topology-aware's
	// exclusive grant needs the Guaranteed one.
	assert.Equal(t, map[corev1.PodQOSClass]int{corev1.PodQOSBestEffort: 1, corev1.PodQOSBurstable: 1, corev1.PodQOSGuaranteed: 1}, classes,
		"pods of the demo by QoS class")
	_, err = LoadPods(t.TempDir())
	assert.ErrorContains(t, err, "no *.yaml in")
}

func TestParseEnviron(t *testing.T) {
	got := ParseEnviron("PATH=/bin\x00EMPTY=\x00EQ=a=b\x00NOVALUE\x00\x00")
	assert.Equal(t, map[string]string{"PATH": "/bin", "EMPTY": "", "EQ": "a=b", "NOVALUE": ""}, got)
	assert.Empty(t, ParseEnviron(""))
}

func TestParseProcStatus(t *testing.T) {
	got := ParseProcStatus("Name:\tsh\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\nno colon here\n")
	assert.Equal(t, map[string]string{"Name": "sh", "Cpus_allowed_list": "0-1", "Mems_allowed_list": "0"}, got)
}

// Without a kubelet nobody reads static pods: the pod calls say so instead
// of writing manifests into the void.
func TestStaticPodsNeedKubelet(t *testing.T) {
	sb := &Sandbox{opts: Options{NoKubelet: true, NodeName: DefaultNodeName}}
	tests := []struct {
		name string
		call func() error
	}{
		{name: "WritePod", call: func() error { return sb.WritePod(BusyboxPod("web")) }},
		{name: "RemovePod", call: func() error { return sb.RemovePod(context.Background(), "web") }},
		{name: "WaitContainer", call: func() error { _, err := sb.WaitContainer(context.Background(), "web", "main"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)
			assert.ErrorContains(t, err, "static pod web: the sandbox runs without a kubelet (Options.NoKubelet)")
		})
	}
	assert.Empty(t, sb.KubeletLog(), "no kubelet, no kubelet log")
}

// With Options.TolerateMissingPlugins a static pod's manifest carries the
// annotation, unless the pod sets it; the caller's pod is left as it was.
func TestWritePodTolerateMissingPlugins(t *testing.T) {
	for _, tt := range []struct {
		name     string
		tolerate bool
		own      map[string]string
		want     map[string]string
	}{
		{name: "off"},
		{name: "on", tolerate: true, want: map[string]string{deployments.TolerateMissingPlugins: "true"}},
		{name: "the pod's own value", tolerate: true, own: map[string]string{deployments.TolerateMissingPlugins: "false"},
			want: map[string]string{deployments.TolerateMissingPlugins: "false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sb := &Sandbox{opts: Options{TolerateMissingPlugins: tt.tolerate}, kubelet: &kubelet{staticPods: dir}}
			pod := BusyboxPod("web")
			pod.Annotations = tt.own
			require.NoError(t, sb.WritePod(pod))
			assert.Equal(t, tt.own, pod.Annotations, "the caller's pod")
			data, err := os.ReadFile(filepath.Join(dir, "web.yaml"))
			require.NoError(t, err)
			written, err := DecodePod(data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, written.Annotations)
		})
	}
}
