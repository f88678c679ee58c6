package inventory

import (
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContainerFromNRI(t *testing.T) {
	pod := &api.PodSandbox{Id: "sb", Name: "web", Namespace: "shop", Uid: "u1",
		Labels: map[string]string{"io.kubernetes.pod.name": "web-node1"}}
	for _, tc := range []struct {
		name                   string
		ctr                    *api.Container
		wantImage              string
		wantStart, wantCreated time.Time
	}{
		{"NRI image and start", &api.Container{Id: "c", Name: "app", Image: &api.Image{Name: "busybox:1"},
			StartedAt: 1_700_000_000_000_000_000, CreatedAt: 1_600_000_000_000_000_000}, "busybox:1", time.Unix(1_700_000_000, 0), time.Unix(1_600_000_000, 0)},
		{"annotation image, created only", &api.Container{Id: "c", Name: "app",
			Annotations: map[string]string{"io.kubernetes.cri.image-name": "registry/app:2"},
			CreatedAt:   1_600_000_000_000_000_000}, "registry/app:2", time.Unix(1_600_000_000, 0), time.Unix(1_600_000_000, 0)},
		{"started only", &api.Container{Id: "c", Name: "app", StartedAt: 1_700_000_000_000_000_000}, "", time.Unix(1_700_000_000, 0), time.Time{}},
		{"neither", &api.Container{Id: "c", Name: "app"}, "", time.Time{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ContainerFromNRI(pod, tc.ctr)
			assert.Equal(t, tc.wantImage, c.Image)
			assert.True(t, tc.wantStart.Equal(c.Started), "started %s, want %s", c.Started, tc.wantStart)
			assert.True(t, tc.wantCreated.Equal(c.Created), "created %s, want %s", c.Created, tc.wantCreated)
		})
	}
	assert.Equal(t, "web-node1", PodFromNRI(pod).Name, "the kubelet's label wins over NRI's name")
}

func TestEventsAndSynchronize(t *testing.T) {
	inv := New()
	pod := &api.PodSandbox{Id: "sb", Name: "web", Namespace: "shop"}
	inv.SetPod(pod)
	inv.SetContainer(pod, &api.Container{Id: "b", PodSandboxId: "sb", Name: "b"})
	inv.SetContainer(pod, &api.Container{Id: "a", PodSandboxId: "sb", Name: "a"})
	inv.SetRunning("a", true)
	snap := inv.Snapshot()
	require.Len(t, snap, 1)
	require.Len(t, snap[0].Containers, 2)
	assert.Equal(t, []bool{true, false}, []bool{snap[0].Containers[0].Running, snap[0].Containers[1].Running}, "sorted by name: a runs, b does not")

	inv.RemoveContainer("b")
	assert.Len(t, inv.Snapshot()[0].Containers, 1)

	// The sandbox's process until StopPodSandbox, and its cgroup.
	inv.SetPod(&api.PodSandbox{Id: "sb", Name: "web", Namespace: "shop", Pid: 4242,
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu1", CgroupsPath: "/kubepods/podu1/sb"}})
	assert.Equal(t, uint32(4242), inv.Snapshot()[0].Pid)
	assert.Equal(t, "/kubepods/podu1/sb", inv.Snapshot()[0].SandboxCgroupsPath)
	inv.StopPod("sb")
	assert.Zero(t, inv.Snapshot()[0].Pid, "a stopped sandbox's pid is forgotten")
	assert.Len(t, inv.Snapshot()[0].Containers, 1, "stopping the sandbox keeps the pod")
	inv.StopPod("unknown") // no pod: nothing to do
	inv.RemovePod("sb")
	assert.Empty(t, inv.Snapshot())

	other := &api.PodSandbox{Id: "sb2", Name: "db", Namespace: "shop"}
	inv.SetContainer(pod, &api.Container{Id: "stale", PodSandboxId: "sb", Name: "stale"})
	inv.Replace([]*api.PodSandbox{other}, []*api.Container{{Id: "x", PodSandboxId: "sb2", Name: "x", State: api.ContainerState_CONTAINER_RUNNING}})
	snap = inv.Snapshot()
	require.Len(t, snap, 1, "Synchronize replaces everything")
	assert.Equal(t, "db", snap[0].Name)
	require.Len(t, snap[0].Containers, 1)
	assert.True(t, snap[0].Containers[0].Running, "a running container from Synchronize is read at once")
}
