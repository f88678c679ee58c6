package deploy_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// resizeNamespace holds the resize scenario's pods.
const resizeNamespace = "resize"

// resize resizes a Guaranteed pod in place through the API's resize
// subresource, as a user or the VPA does, on this 2-CPU node:
//   - 500m to 1 CPU: it moves from the shared pool to an exclusive CPU, and
//     a shared container (its neighbour) moves off that CPU;
//   - 1 to 2 CPUs: the kubelet admits it (the sandbox's plugins request no
//     CPU), but it would leave the shared pool empty, so topology-aware
//     refuses it: the pod shows PodResizeInProgress with reason Error and
//     the plugin's reason, as does its ResizeError event, and it keeps its
//     CPU;
//   - back to 1 CPU: the condition goes, the CPU is the same;
//   - memory 64Mi to 128Mi and back (restartPolicy NotRequired, the
//     kubelet's rule: a decrease is applied when the usage is below the new
//     limit): the container's memory limit follows, its CPU stays;
//   - back to 500m: shared again, and the neighbour gets the CPU back.
//
// A grant that grows keeping its CPUs (2 to 3) needs more CPUs than this
// node has; the harness shows it (plugins/topology-aware TestResize).
func resize(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	if runtime.NumCPU() != 2 {
		t.Skipf("the steps are for a node of 2 CPUs, this one has %d", runtime.NumCPU())
	}
	createNamespace(ctx, t, sb, resizeNamespace)
	pod := sandbox.BusyboxPod("resized")
	pod.Namespace = resizeNamespace
	pod.Spec.Containers[0].Resources = guaranteed("500m", "64Mi")
	if why := sb.CannotRun(pod); why != "" {
		t.Skip(why)
	}
	neighbour := sandbox.BusyboxPod("neighbour")
	neighbour.Namespace = resizeNamespace
	for _, p := range []*corev1.Pod{pod, neighbour} {
		_, err := sb.Client().CoreV1().Pods(resizeNamespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = sb.WaitPodRunning(ctx, resizeNamespace, p.Name)
		require.NoError(t, err)
	}
	all := cpusInside(ctx, t, sb, neighbour.Name)
	require.Equal(t, 2, all.Size(), "the neighbour has the whole shared pool")
	require.Equal(t, all, cpusInside(ctx, t, sb, pod.Name), "500m: on the shared pool")

	resizeTo(ctx, t, sb, pod.Name, guaranteed("1", "64Mi"))
	exclusive := cpusInside(ctx, t, sb, pod.Name)
	require.Equal(t, 1, exclusive.Size(), "1 CPU: one exclusive CPU")
	assert.Equal(t, all.Difference(exclusive), cpusInside(ctx, t, sb, neighbour.Name), "the neighbour moved off the exclusive CPU")

	t.Run("a resize that cannot fit", func(t *testing.T) {
		pending := requestResize(ctx, t, sb, pod.Name, guaranteed("2", "64Mi"))
		var why corev1.PodCondition
		require.NoError(t, sandbox.PollUntil(ctx, time.Minute, 200*time.Millisecond, func() error {
			p, err := sb.Client().CoreV1().Pods(resizeNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodResizeInProgress && cond.Reason == corev1.PodReasonError {
					why = cond
					return nil
				}
			}
			return fmt.Errorf("no PodResizeInProgress condition with reason Error yet: %+v", p.Status.Conditions)
		}))
		t.Logf("the user sees: %s %s: %s (generation %d)", why.Type, why.Reason, why.Message, pending)
		assert.Contains(t, why.Message, "topology-aware", "the condition names the plugin")
		assert.Contains(t, why.Message, "shared pool", "the condition says why")
		// And the kubelet's ResizeError event, which kubectl describe shows.
		requireEvent(ctx, t, sb, resizeNamespace, pod.Name, "ResizeError", "topology-aware", "shared pool")
		assert.Equal(t, exclusive, cpusInside(ctx, t, sb, pod.Name), "the refused resize leaves the grant intact")
		assert.Equal(t, all.Difference(exclusive), cpusInside(ctx, t, sb, neighbour.Name), "and the neighbour where it was")
		resizeTo(ctx, t, sb, pod.Name, guaranteed("1", "64Mi"))
		assert.Equal(t, exclusive, cpusInside(ctx, t, sb, pod.Name), "back to 1 CPU: the same CPU")
	})
	t.Run("memory", func(t *testing.T) {
		for _, memory := range []string{"128Mi", "64Mi"} {
			resizeTo(ctx, t, sb, pod.Name, guaranteed("1", memory))
			limit, err := sb.ReadCgroup(ctx, containerID(ctx, t, sb, pod.Name), sandbox.MemoryLimit)
			require.NoError(t, err)
			want := resource.MustParse(memory)
			assert.Equal(t, fmt.Sprint(want.Value()), limit, "the container's memory limit")
			assert.Equal(t, exclusive, cpusInside(ctx, t, sb, pod.Name), "a memory resize keeps the CPU")
		}
	})

	resizeTo(ctx, t, sb, pod.Name, guaranteed("500m", "64Mi"))
	assert.Equal(t, all, cpusInside(ctx, t, sb, pod.Name), "500m again: the shared pool")
	assert.Equal(t, all, cpusInside(ctx, t, sb, neighbour.Name), "the neighbour got the CPU back")
}

// guaranteed are equal requests and limits of cpu and memory.
func guaranteed(cpu, memory string) corev1.ResourceRequirements {
	r := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.ResourceRequirements{Requests: r, Limits: r}
}

// requestResize asks for the pod's only container to have res, through
// the resize subresource, and returns the pod's new generation.
func requestResize(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string, res corev1.ResourceRequirements) int64 {
	pods := sb.Client().CoreV1().Pods(resizeNamespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	pod.Spec.Containers[0].Resources = res
	pod, err = pods.UpdateResize(ctx, name, pod, metav1.UpdateOptions{})
	require.NoError(t, err, "resizing pod %s", name)
	return pod.Generation
}

// resizeTo resizes the pod's only container to res and waits until the
// kubelet reports it done: the running container has res, and the pod has
// no resize condition.
func resizeTo(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string, res corev1.ResourceRequirements) {
	generation := requestResize(ctx, t, sb, name, res)
	require.NoError(t, sandbox.PollUntil(ctx, time.Minute, 200*time.Millisecond, func() error {
		pod, err := sb.Client().CoreV1().Pods(resizeNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.ObservedGeneration < generation {
			return fmt.Errorf("the kubelet has not seen generation %d yet", generation)
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodResizePending || cond.Type == corev1.PodResizeInProgress {
				return fmt.Errorf("%s %s: %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].Resources == nil {
			return fmt.Errorf("no resources in the container's status yet")
		}
		got := pod.Status.ContainerStatuses[0].Resources
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if got.Limits.Name(r, resource.DecimalSI).Cmp(res.Limits[r]) != 0 {
				return fmt.Errorf("the container's %s limit is %s, not %s yet", r, got.Limits.Name(r, resource.DecimalSI), res.Limits.Name(r, resource.DecimalSI))
			}
		}
		return nil
	}), "resizing pod %s", name)
}

// containerID is the runtime's id of the pod's running container.
func containerID(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod string) string {
	c, ok := running(ctx, t, sb, resizeNamespace)[pod+"/main"]
	require.True(t, ok, "pod %s has a running container", pod)
	return c.ID
}

// cpusInside are the CPUs the pod's container may run on, read inside it.
func cpusInside(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod string) cpuset.CPUSet {
	status, err := sb.ProcStatus(ctx, containerID(ctx, t, sb, pod))
	require.NoError(t, err)
	cpus, err := cpuset.Parse(strings.TrimSpace(status["Cpus_allowed_list"]))
	require.NoError(t, err)
	return cpus
}
