package k8s

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Pods and containers shaped as containerd and CRI-O pass them for the same
// kubelet pod: Burstable, container "app" requesting 1 CPU (limit 2) and
// limited to 256Mi, with a pod-level and a container-level annotation.
func TestFromNRI(t *testing.T) {
	const mi = 1 << 20
	resources := &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(1024), Quota: api.Int64(200000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(256 * mi)},
	}
	podAnnotations := map[string]string{
		"cpus.nri-suite.io/pod":           "2",
		"cpus.nri-suite.io/container.app": "1",
		"kubernetes.io/config.source":     "file",
	}
	tests := []struct {
		name       string
		pod        *api.PodSandbox
		ctr        *api.Container
		wantSource QOSSource
	}{
		{
			name: "containerd, cgroupfs",
			pod: &api.PodSandbox{
				Id: "sb", Name: "web-0", Namespace: "shop", Uid: testUID,
				Labels: kubeletPodLabels("shop", "web-0", testUID), Annotations: podAnnotations,
				Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/burstable/pod" + testUID},
			},
			ctr: &api.Container{
				Id: "ctr", PodSandboxId: "sb", Name: "app",
				Labels:      kubeletContainerLabels("shop", "web-0", testUID, "app"),
				Annotations: map[string]string{"io.kubernetes.container.hash": "abc"},
				Linux:       &api.LinuxContainer{CgroupsPath: "/kubepods/burstable/pod" + testUID + "/ctr", Resources: resources},
			},
			wantSource: QOSFromCgroupParent,
		},
		{
			name: "CRI-O, systemd, container annotations hold a conflicting copy",
			pod: &api.PodSandbox{
				Id: "sb", Name: "web-0", Namespace: "shop", Uid: testUID,
				Labels: kubeletPodLabels("shop", "web-0", testUID), Annotations: podAnnotations,
				Linux: &api.LinuxPodSandbox{CgroupParent: "kubepods-burstable-pod" + systemdUID + ".slice"},
			},
			ctr: &api.Container{
				Id: "ctr", PodSandboxId: "sb", Name: "app",
				Labels:      kubeletContainerLabels("shop", "web-0", testUID, "app"),
				Annotations: map[string]string{"cpus.nri-suite.io/container.app": "7"},
				Linux:       &api.LinuxContainer{CgroupsPath: "kubepods-burstable-pod" + systemdUID + ".slice:crio:ctr", Resources: resources},
			},
			wantSource: QOSFromCgroupParent,
		},
		{
			name: "no cgroup parent: QoS from the container's path",
			pod: &api.PodSandbox{
				Id: "sb", Name: "web-0", Namespace: "shop", Uid: testUID, Annotations: podAnnotations,
			},
			ctr: &api.Container{
				Id: "ctr", PodSandboxId: "sb", Name: "app",
				Linux: &api.LinuxContainer{CgroupsPath: "kubepods-burstable-pod" + systemdUID + ".slice:cri-containerd:ctr", Resources: resources},
			},
			wantSource: QOSFromCgroupsPath,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := FromNRI(tt.pod, tt.ctr)
			assert.Equal(t, Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "app", PodSandboxID: "sb", ContainerID: "ctr"}, c.Identity)
			assert.Equal(t, QOSBurstable, c.QOS)
			assert.Equal(t, tt.wantSource, c.QOSSource)
			assert.Equal(t, Resources{CPURequest: 1000, CPULimit: 2000, MemoryLimit: 256 * mi}, c.Resources)
			assert.True(t, c.Resources.IsIntegerCPU())

			n, ok, err := c.Annotations.Int("cpus.nri-suite.io", 1, 8)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, int64(1), n, "the pod's container-level annotation, not the container's copy")
		})
	}
}

// The kubelet caps cpu.shares at 256 CPUs; a Guaranteed container's request
// then comes from its quota.
func TestFromNRIRequestAbove256CPUs(t *testing.T) {
	const gi = 1 << 30
	ctr := &api.Container{Id: "ctr", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(maxShares), Quota: api.Int64(30_000_000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(gi)},
	}}}
	for _, parent := range []string{"/kubepods/pod" + testUID, "/kubepods/burstable/pod" + testUID, ""} {
		t.Run("cgroup parent "+parent, func(t *testing.T) {
			c := FromNRI(&api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: parent}}, ctr)
			if c.QOS == QOSGuaranteed {
				assert.Equal(t, Resources{CPURequest: 300000, CPULimit: 300000, MemoryLimit: gi}, c.Resources)
				return
			}
			assert.Equal(t, "/kubepods/burstable/pod"+testUID, parent)
			assert.Equal(t, Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 300000, MemoryLimit: gi}, c.Resources, "a burstable request is only known to be 256 CPUs or more")
		})
	}
}

func TestFromNRINil(t *testing.T) {
	c := FromNRI(nil, nil)
	assert.Equal(t, Identity{}, c.Identity)
	assert.Equal(t, QOSBestEffort, c.QOS)
	assert.Equal(t, QOSFromResources, c.QOSSource)
	_, ok, err := c.Annotations.Bool("any.nri-suite.io")
	assert.False(t, ok)
	assert.NoError(t, err)
}
