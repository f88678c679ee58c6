package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The kubelet's configuration as real-runtime.md prescribes it for these
// hosts, key by key.
func TestKubeletConfig(t *testing.T) {
	data, err := kubeletConfig(kubeletSettings{Dir: "/run/sb/kubelet", Endpoint: "unix:///run/sb/c.sock",
		CgroupRoot: "/nri-sandbox-1", NodeName: "n", NodeIP: "192.0.2.2", Port: 10250, HealthzPort: 10248})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, yaml.Unmarshal(data, &got))
	want := map[string]any{
		"kind":                        "KubeletConfiguration",
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  "/nri-sandbox-1",
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"staticPodPath":               "/run/sb/kubelet/manifests",
		"fileCheckFrequency":          "1s",
		"containerRuntimeEndpoint":    "unix:///run/sb/c.sock",
		"address":                     "127.0.0.1",
		"port":                        float64(10250),
		"readOnlyPort":                float64(0),
		"healthzBindAddress":          "127.0.0.1",
		"healthzPort":                 float64(10248),
		"authentication":              map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"resolvConf":                  "",
		"podLogsDir":                  "/run/sb/kubelet/pod-logs",
		"volumePluginDir":             "/run/sb/kubelet/volume-plugins",
		"imageGCHighThresholdPercent": float64(100),
		"evictionHard":                map[string]any{"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		"oomScoreAdj":                 float64(0),
		"cpuManagerPolicy":            "none",
		"memoryManagerPolicy":         "None",
	}
	assert.Equal(t, want, got)
}

func TestKubeletArgs(t *testing.T) {
	args := kubeletArgs("/cache/bin/kubelet", "/run/sb/kubelet/config.yaml",
		kubeletSettings{Dir: "/run/sb/kubelet", NodeName: "n", NodeIP: "192.0.2.2"})
	assert.Equal(t, []string{"/cache/bin/kubelet", "--config", "/run/sb/kubelet/config.yaml",
		"--root-dir", "/run/sb/kubelet/root", "--cert-dir", "/run/sb/kubelet/pki",
		"--hostname-override", "n", "--node-ip", "192.0.2.2", "--v", "2"}, args)
	assert.NotContains(t, args, "--kubeconfig", "standalone: no API server")
}
