package deploy_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// upgradeTag is the image tag `helm upgrade` moves the release to: the same
// binaries as the chart's appVersion, under another reference, so that
// every DaemonSet rolls.
const upgradeTag = "0.1.0-upgrade"

// helmLifecycle upgrades the release (a new image tag and a changed plugin
// configuration), rolls it back and uninstalls it, with a workload running
// throughout: its containers keep their CPUs, memory nodes, seccomp filter
// and device at every step, and every pod created while the DaemonSets
// roll is either handled by the plugins or refused with a plugin's reason
// first (the kubelet retries a refused container), never left unhandled.
// The plugins keep their node state through the roll, and take it with
// them at the uninstall, but for what the running workload still uses.
func helmLifecycle(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, chart string) {
	before := startWorkload(ctx, t, sb)
	require.Contains(t, before["life-web/app"].Inside, "deploy-null", "the workload has its device to keep")
	placements, err := state.PlacementRecords(state.DefaultDir)
	require.NoError(t, err)

	t.Run("upgrade", func(t *testing.T) {
		rolled := whileCreatingPods(ctx, t, sb, func() {
			out, err := sb.Helm(ctx, "upgrade", release, chart, "--namespace", release, "--reuse-values",
				"--set", "image.tag="+upgradeTag, "--set", "plugins.stats.config.cache=2s", "--wait", "--timeout", "3m")
			require.NoError(t, err, "helm upgrade: %s", out)
		})
		requireImageTag(ctx, t, sb, upgradeTag)
		config, err := sb.Client().CoreV1().ConfigMaps(release).Get(ctx, release+"-stats", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Contains(t, config.Data["config.yaml"], "cache: 2s", "the changed configuration reached the plugin's ConfigMap")
		waitConnected(ctx, t, sb)
		assert.Equal(t, before, containerStates(ctx, t, sb, lifecycleNamespace), "the running workload kept everything through the roll")
		for key, c := range running(ctx, t, sb, lifecycleNamespace) {
			_, found, err := placements.Read(c.ID)
			require.NoError(t, err)
			assert.True(t, found, "container %s's placement record survives the roll: a rolling plugin keeps its node state", key)
		}
		checkRolledPods(ctx, t, sb, rolled)
	})
	t.Run("rollback", func(t *testing.T) {
		out, err := sb.Helm(ctx, "rollback", release, "1", "--namespace", release, "--wait", "--timeout", "3m")
		require.NoError(t, err, "helm rollback: %s", out)
		requireImageTag(ctx, t, sb, "0.1.0")
		waitConnected(ctx, t, sb)
		assert.Equal(t, before, containerStates(ctx, t, sb, lifecycleNamespace), "the running workload kept everything through the rollback")
	})
	t.Run("uninstall", func(t *testing.T) {
		out, err := sb.Helm(ctx, "uninstall", release, "--namespace", release, "--wait", "--timeout", "3m")
		require.NoError(t, err, "helm uninstall: %s", out)
		err = poll(ctx, func() error {
			pods, err := sb.Client().CoreV1().Pods(release).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d plugin pods are left, the first %s", len(pods.Items), pods.Items[0].Name)
			}
			return nil
		})
		require.NoError(t, err, "the plugins' pods go")
		assert.Equal(t, before, containerStates(ctx, t, sb, lifecycleNamespace), "the running workload is untouched by the uninstall")
		// What stays: the coordination directory of the running pod with
		// sidecars, which its helpers use; the empty directories the
		// plugins' pods mounted.
		web, err := sb.Client().CoreV1().Pods(lifecycleNamespace).Get(ctx, "life-web", metav1.GetOptions{})
		require.NoError(t, err)
		inUse := filepath.Join(state.DefaultDir, "sidecar-order", string(web.UID))
		var left []string
		require.NoError(t, filepath.WalkDir(state.DefaultDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(path, inUse+"/") {
				return err
			}
			left = append(left, path)
			return nil
		}))
		assert.Empty(t, left, "the plugins' node state is gone")
		assert.DirExists(t, inUse, "the coordination directory of a running pod stays")
		assert.NoFileExists(t, filepath.Join(sb.Dir(), "sidecar-helper", "nri-sidecar-helper"), "sidecar-order's helper is gone from the host")
		node, err := sb.Client().CoreV1().Nodes().Get(ctx, sb.NodeName(), metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range node.Status.Conditions {
			assert.NotEqual(t, conditionType, string(c.Type), "device-injector takes its node condition with it")
		}
	})
}

// lifecycleNamespace holds the lifecycle's workload, so that its
// containers are read apart from the pods made during the roll.
const lifecycleNamespace = "lifecycle"

// startWorkload runs, in lifecycleNamespace, a pod with a CDI device and a
// sidecar on the shared pool and, where the runtime runs Guaranteed pods,
// one with an exclusive CPU, and returns their containers' states.
func startWorkload(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) map[string]containerState {
	_, err := sb.Client().CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lifecycleNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	shared := sandbox.BusyboxPod("life-web", "app", "log-shipper")
	shared.Namespace = lifecycleNamespace
	shared.Annotations = map[string]string{
		"cdi-devices.nri-suite.io/container.app": device,
		"sidecar-order.nri-suite.io/sidecars":    "log-shipper",
	}
	pods := []*corev1.Pod{shared}
	exclusive := sandbox.BusyboxPod("life-db")
	exclusive.Namespace = lifecycleNamespace
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	exclusive.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	if sb.CannotRun(exclusive) == "" {
		pods = append(pods, exclusive)
	}
	for _, pod := range pods {
		writePod(ctx, t, sb, pod)
		for _, c := range pod.Spec.Containers {
			_, err := sb.WaitContainer(ctx, pod.Name, c.Name)
			require.NoError(t, err)
		}
	}
	return containerStates(ctx, t, sb, lifecycleNamespace)
}

// whileCreatingPods runs roll and, until it returns, creates a pod asking
// for the CDI device every second; it returns their names.
func whileCreatingPods(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, roll func()) []string {
	var (
		names []string
		wg    sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			pod := sandbox.BusyboxPod(fmt.Sprintf("roll-%d", i))
			pod.Annotations = map[string]string{"cdi-devices.nri-suite.io": device}
			if err := sb.WritePod(pod); err != nil {
				t.Errorf("creating pod during the roll: %v", err)
				return
			}
			names = append(names, pod.Name)
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
		}
	})
	roll()
	close(done)
	wg.Wait()
	return names
}

// checkRolledPods checks each pod created during the roll: its container
// runs in the end and, if it was refused on the way, every refusal named a
// plugin's reason. Without its device it was left unhandled. On containerd,
// security's rule annotated-plugins refuses such a pod while
// device-injector is away, but NRI still counts a plugin as there during
// the first request after its connection closed (containerd/nri#316), so
// one creation per departure of device-injector can pass without it: the
// upgrade replaces device-injector once, so at most one pod may miss its
// device. CRI-O v1.34's NRI validates nothing, so there nothing refuses
// them, and the pods are only counted.
func checkRolledPods(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, names []string) {
	refused, unhandled := 0, []string{}
	for _, name := range names {
		c, err := sb.WaitContainer(ctx, name, "main")
		if !assert.NoError(t, err, "pod %s created during the roll runs in the end", name) {
			continue
		}
		if _, err := sb.CRI().Exec(ctx, c.ID, "test", "-c", "/dev/deploy-null"); err != nil {
			unhandled = append(unhandled, name)
		}
		if sb.Runtime().Name() == "containerd" {
			assert.NotEmpty(t, placedCPUs(ctx, t, c.ID), "pod %s created during the roll is placed", name)
		}
		events, err := sb.Client().CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=Failed"})
		require.NoError(t, err)
		for _, e := range events.Items {
			refused++
			t.Logf("pod %s was refused during the roll: %s", name, e.Message)
			assert.Regexp(t, `NRI|plugin`, e.Message, "a refusal names the plugin's reason")
		}
	}
	t.Logf("%d pods created during the roll, %d refusals on the way, created without the device: %v", len(names), refused, unhandled)
	if sb.Runtime().Name() == "containerd" {
		assert.LessOrEqual(t, len(unhandled), 1, "pods created without their device while device-injector rolled: %v", unhandled)
	}
	for _, name := range names {
		require.NoError(t, sb.RemovePod(ctx, name))
	}
}

// requireImageTag waits until every plugin pod of the release runs the
// image tag.
func requireImageTag(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, tag string) {
	err := poll(ctx, func() error {
		pods, err := sb.Client().CoreV1().Pods(release).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != len(plugins) {
			return fmt.Errorf("%d plugin pods, expected %d", len(pods.Items), len(plugins))
		}
		for _, pod := range pods.Items {
			image := pod.Spec.Containers[0].Image
			if !strings.HasSuffix(image, ":"+tag) || pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s runs %s (%s), expected tag %s", pod.Name, image, sandbox.PodNotReady(&pod), tag)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
