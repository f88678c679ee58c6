package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/deployments"
)

func TestParseContainers(t *testing.T) {
	out := []byte(`{"containers":[{"id":"abc","podSandboxId":"pod1","metadata":{"name":"main","attempt":2},
	  "image":{"image":"sha256:1"},"imageRef":"sha256:1","state":"CONTAINER_RUNNING","createdAt":"1",
	  "labels":{"io.kubernetes.pod.name":"web-nri-sandbox","io.kubernetes.pod.namespace":"demo",
	            "io.kubernetes.pod.uid":"u1","io.kubernetes.container.name":"main"},
	  "annotations":{"io.kubernetes.container.hash":"h"}}]}`)
	got, err := parseContainers(out)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, Container{
		ID: "abc", PodSandboxID: "pod1", Name: "main", Pod: "web-nri-sandbox", Namespace: "demo", PodUID: "u1",
		State: ContainerRunning, Attempt: 2,
		Labels: map[string]string{LabelPodName: "web-nri-sandbox", LabelPodNamespace: "demo",
			LabelPodUID: "u1", LabelContainerName: "main"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "h"},
	}, got[0])

	none, err := parseContainers([]byte(`{"containers":[]}`))
	require.NoError(t, err)
	assert.Empty(t, none)

	_, err = parseContainers([]byte("crictl: not json"))
	assert.ErrorContains(t, err, "decoding crictl ps output")
}

// A kubelet stops every pod it did not create, so a CRI of a node with a
// kubelet refuses to run pods; without one, the request reaches crictl.
func TestRunPodSandboxRefusedWithKubelet(t *testing.T) {
	tests := []struct {
		name         string
		kubeletOwned bool
		refused      bool
	}{
		{name: "kubelet on the node", kubeletOwned: true, refused: true},
		{name: "no kubelet", kubeletOwned: false, refused: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cri, err := newCRI(filepath.Join(dir, "no-crictl"), "unix:///nonexistent.sock", dir, "", tt.kubeletOwned, false)
			require.NoError(t, err)
			_, err = cri.RunPodSandbox(context.Background(), map[string]any{"metadata": map[string]any{"name": "p"}})
			require.Error(t, err, "crictl does not exist, so the call fails either way")
			assert.Equal(t, tt.refused, errors.Is(err, errKubeletOwnsPods), "refusal in %v", err)
			assert.ErrorContains(t, err, "running pod sandbox")
		})
	}
}

// With Options.TolerateMissingPlugins every pod config crictl gets carries
// the annotation, next to the config's own, which wins over it; without,
// the config is as given.
func TestPodConfigTolerateMissingPlugins(t *testing.T) {
	key := deployments.TolerateMissingPlugins
	tests := []struct {
		name     string
		tolerate bool
		config   map[string]any
		want     map[string]any
	}{
		{name: "off", config: map[string]any{"annotations": map[string]any{"a": "b"}}, want: map[string]any{"a": "b"}},
		{name: "no annotations", tolerate: true, config: map[string]any{"metadata": map[string]any{"name": "p"}},
			want: map[string]any{key: "true"}},
		{name: "null annotations", tolerate: true, config: map[string]any{"annotations": nil}, want: map[string]any{key: "true"}},
		{name: "beside others", tolerate: true, config: map[string]any{"annotations": map[string]string{"a": "b"}},
			want: map[string]any{"a": "b", key: "true"}},
		{name: "the pod's own value", tolerate: true, config: map[string]any{"annotations": map[string]string{key: "false"}},
			want: map[string]any{key: "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cri, err := newCRI("crictl", "unix:///nonexistent.sock", dir, "", false, tt.tolerate)
			require.NoError(t, err)
			path, err := cri.writePodConfig(tt.config)
			require.NoError(t, err)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(data, &got))
			assert.Equal(t, tt.want, got["annotations"])
		})
	}
	_, err := withAnnotation([]string{"not", "an", "object"}, key, "true")
	assert.ErrorContains(t, err, `config ["not","an","object"]: expected a JSON object`)
}
