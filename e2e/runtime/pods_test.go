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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestCheckPod(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "valid", yaml: validPod},
		{name: "IfNotPresent is local too", yaml: replace(validPod, "Never", "IfNotPresent")},
		{name: "pod network", yaml: replace(validPod, "hostNetwork: true", "hostNetwork: false"),
			wantErr: "pod ok: spec.hostNetwork is false, expected true (the sandbox has no CNI)"},
		{name: "pulls", yaml: replace(validPod, "imagePullPolicy: Never", "imagePullPolicy: Always"),
			wantErr: `pod ok: container main: imagePullPolicy is "Always", expected Never or IfNotPresent`},
		{name: "default pull policy", yaml: replace(validPod, "      imagePullPolicy: Never\n", ""),
			wantErr: `container main: imagePullPolicy is "", expected Never or IfNotPresent`},
		{name: "init container pulls", yaml: validPod + "  initContainers:\n    - name: init\n      image: x\n",
			wantErr: `container init: imagePullPolicy is ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := kubepod.Parse([]byte(tt.yaml))
			require.NoError(t, err)
			err = CheckPod(pod)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
	// What kubepod.Parse refuses already, for pods made in code.
	assert.ErrorContains(t, CheckPod(&corev1.Pod{}), "metadata.name is empty, expected a name")
	assert.ErrorContains(t, CheckPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.PodSpec{HostNetwork: true}}),
		"pod empty: spec.containers is empty, expected at least one container")
}

// replace changes the first old in s; a row whose old is missing stays
// valid and fails on its expected error.
func replace(s, old, new string) string { return strings.Replace(s, old, new, 1) }

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
			written, err := kubepod.Parse(data)
			require.NoError(t, err)
			assert.Equal(t, tt.want, written.Annotations)
		})
	}
}
