package deploy_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

const (
	// loadNamespace holds the load's pods.
	loadNamespace = "load"
	// loadPods are the pods running while the plugins crash.
	loadPods = 50
	// The load's Deployments and its Guaranteed pod.
	besteffort, burstable, exclusivePod = "besteffort", "burstable", "exclusive"
)

// pluginCrash runs loadPods small pods, and then kills every plugin in
// turn, in NRI order, in each of killModes: its process with SIGKILL, as a
// crash (the kubelet restarts the container in its pod), and its pod
// through the API, as an eviction or a node drain would (the DaemonSet
// makes a new pod).
// Each time the plugin must come back, register and synchronize (a newer
// Synchronize in its published status, its pod Ready), and no running
// container may move or lose anything: every container's runtime id and
// attempt, its CPUs, memory nodes, seccomp mode, device nodes and device
// cgroup, read inside it before the first kill and after the last, are
// the same, and after each kill no container restarted and every
// placement topology-aware publishes is the same. The load: pods of a
// BestEffort and of a Burstable Deployment, with a CDI device each, and
// one Guaranteed pod with an exclusive CPU where the node can grant one
// (2 CPUs: one exclusive, one left for the shared pool).
func pluginCrash(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	start := time.Now()
	createNamespace(ctx, t, sb, loadNamespace)
	defer removeLoad(ctx, t, sb)
	startLoad(ctx, t, sb)
	require.NoError(t, sandbox.PollUntil(ctx, 5*time.Minute, time.Second, func() error {
		if n := len(running(ctx, t, sb, loadNamespace)); n != loadPods {
			return fmt.Errorf("%d of %d load containers running", n, loadPods)
		}
		return nil
	}))
	t.Logf("%d pods running %s after their creation", loadPods, time.Since(start).Round(time.Millisecond))
	read := time.Now()
	before := containerStates(ctx, t, sb, loadNamespace)
	t.Logf("read %d containers in %s", len(before), time.Since(read).Round(time.Millisecond))
	if c, ok := before[exclusivePod+"/main"]; ok {
		assert.Regexp(t, `(?m)^Cpus_allowed_list:\s+[0-9]+$`, c.Inside, "the Guaranteed pod has an exclusive CPU")
	}
	placements := loadPlacements(ctx, t, sb)

	for _, name := range catalog.Names() {
		t.Run(name, func(t *testing.T) {
			for _, kill := range killModes(sb) {
				t.Run(kill.how, func(t *testing.T) {
					last := lastSynchronize(t, name)
					killed := time.Now()
					kill.kill(ctx, t, sb, name)
					waitSynchronized(ctx, t, sb, name, last)
					t.Logf("%s back, connected and synchronized %s after the kill", name, time.Since(killed).Round(time.Millisecond))
					now := running(ctx, t, sb, loadNamespace)
					for key, c := range before {
						assert.Equal(t, c.ID, now[key].ID, "container %s still runs, as the same container", key)
					}
					assert.Equal(t, placements, loadPlacements(ctx, t, sb), "every placement is as it was")
				})
			}
		})
	}
	assert.Equal(t, before, containerStates(ctx, t, sb, loadNamespace), "every container has what it had")
	pods, err := sb.Client().CoreV1().Pods(loadNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, pod := range pods.Items {
		for _, c := range pod.Status.ContainerStatuses {
			assert.Zero(t, c.RestartCount, "the kubelet restarted container %s of pod %s", c.Name, pod.Name)
		}
	}
	t.Logf("the whole scenario took %s", time.Since(start).Round(time.Millisecond))
}

// killMode is one way a plugin's process goes.
type killMode struct {
	how  string
	kill func(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string)
}

// killModes are the ways the crash scenario kills each plugin on sb's
// runtime: both on the first runtime; on the others only the pod's
// deletion, which the DaemonSet answers, since how the plugin comes back
// (the kubelet restarting its container, or the DaemonSet making a new
// pod) does not depend on the runtime, and what does (NRI's reconnection
// and Synchronize) either way exercises.
func killModes(sb *sandbox.Sandbox) []killMode {
	modes := []killMode{{"SIGKILL", killPluginProcess}, {"pod deleted", deletePluginPod}}
	if sb.Runtime().Name() != sandbox.RuntimeNames()[0] {
		return modes[1:]
	}
	return modes
}

// startLoad creates the load's pods.
func startLoad(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	shared := loadPods
	if runtime.NumCPU() >= 2 {
		exclusive := sandbox.BusyboxPod(exclusivePod)
		exclusive.Namespace = loadNamespace
		one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("32Mi")}
		exclusive.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
		if why := sb.CannotRun(exclusive); why != "" {
			t.Logf("no Guaranteed pod: %s", why)
		} else {
			_, err := sb.Client().CoreV1().Pods(loadNamespace).Create(ctx, exclusive, metav1.CreateOptions{})
			require.NoError(t, err)
			shared--
		}
	}
	small := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	createDeployment(ctx, t, sb, besteffort, shared/2, corev1.ResourceRequirements{})
	createDeployment(ctx, t, sb, burstable, shared-shared/2, small)
}

// createDeployment creates a Deployment of replicas busybox pods in the
// load's namespace, each with the test's CDI device.
func createDeployment(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string, replicas int, res corev1.ResourceRequirements) {
	pod := sandbox.BusyboxPod(name)
	pod.Spec.Containers[0].Resources = res
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: loadNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"cdi-devices.nri-suite.io": device}},
				Spec:       pod.Spec,
			},
		},
	}
	_, err := sb.Client().AppsV1().Deployments(loadNamespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
}

// removeLoad deletes the load and waits until none of its containers runs,
// so that the next scenario starts on an idle node.
func removeLoad(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	start := time.Now()
	for _, name := range []string{besteffort, burstable} {
		assert.NoError(t, sb.Client().AppsV1().Deployments(loadNamespace).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	if err := sb.Client().CoreV1().Pods(loadNamespace).Delete(ctx, exclusivePod, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		assert.NoError(t, err)
	}
	assert.NoError(t, sandbox.PollUntil(ctx, 3*time.Minute, time.Second, func() error {
		if n := len(running(ctx, t, sb, loadNamespace)); n > 0 {
			return fmt.Errorf("%d load containers still running", n)
		}
		return nil
	}))
	t.Logf("the load was gone %s after its deletion", time.Since(start).Round(time.Millisecond))
}

// killPluginProcess kills the plugin's process (its container's init) with
// SIGKILL, by the PID the runtime reports.
func killPluginProcess(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) {
	c, ok := running(ctx, t, sb, release)[pluginPodName(ctx, t, sb, name)+"/"+name]
	require.True(t, ok, "plugin %s's container runs", name)
	info, err := sb.CRI().Inspect(ctx, c.ID)
	require.NoError(t, err)
	require.NotZero(t, info.PID, "the runtime reports the PID of plugin %s", name)
	require.NoError(t, syscall.Kill(info.PID, syscall.SIGKILL))
}

// deletePluginPod deletes the plugin's pod through the API and waits until
// the DaemonSet has made another.
func deletePluginPod(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) {
	old, err := pluginPod(ctx, sb, name)
	require.NoError(t, err)
	require.NoError(t, sb.Client().CoreV1().Pods(release).Delete(ctx, old.Name, metav1.DeleteOptions{}))
	require.NoError(t, poll(ctx, func() error {
		pod, err := pluginPod(ctx, sb, name)
		if err == nil && pod.UID == old.UID {
			err = fmt.Errorf("pod %s of plugin %s is not replaced yet", old.Name, name)
		}
		return err
	}))
}

func pluginPodName(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) string {
	pod, err := pluginPod(ctx, sb, name)
	require.NoError(t, err)
	return pod.Name
}

// lastSynchronize is when plugin name last synchronized, as it published.
func lastSynchronize(t *testing.T, name string) time.Time {
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	st, found, err := statuses.Read(plugins[name].ID())
	require.NoError(t, err)
	require.True(t, found, "plugin %s publishes its status", name)
	return st.LastSynchronize
}

// waitSynchronized waits until plugin name is connected and ready after a
// Synchronize later than last, and its pod is Ready.
func waitSynchronized(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string, last time.Time) {
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	require.NoError(t, sandbox.PollUntil(ctx, 2*time.Minute, 100*time.Millisecond, func() error {
		st, found, err := statuses.Read(plugins[name].ID())
		if err != nil || !found || !st.Connected || !st.Ready || !st.LastSynchronize.After(last) {
			return fmt.Errorf("plugin %s: status %+v (found %v, error %v), synchronized before at %s", name, st, found, err, last)
		}
		pod, err := pluginPod(ctx, sb, name)
		if err == nil && !podReady(&pod) {
			err = fmt.Errorf("pod %s is not Ready", pod.Name)
		}
		return err
	}))
}

// loadPlacements are the placements topology-aware publishes for the load's
// containers, by id.
func loadPlacements(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) map[string]string {
	out := map[string]string{}
	for _, c := range running(ctx, t, sb, loadNamespace) {
		out[c.ID] = placedCPUs(ctx, t, c.ID)
	}
	return out
}
