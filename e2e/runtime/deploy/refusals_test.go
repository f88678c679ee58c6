package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// refusalNamespace holds the pods the plugins refuse.
const refusalNamespace = "refusals"

// The CDI device the refusals scenario makes Unhealthy: /dev/null under
// numbers it does not have, so that device-injector's health check finds it
// different from its spec on every host.
const (
	brokenDevice = "nri-suite.io/refusal=broken"
	brokenSpec   = `cdiVersion: 0.6.0
kind: nri-suite.io/refusal
devices:
  - name: broken
    containerEdits:
      deviceNodes:
        - {path: /dev/refusal-broken, hostPath: /dev/null, type: c, major: 1, minor: 99}
`
)

// refusals checks that a pod a plugin refuses says why where its user
// looks: the kubelet's Failed event of the pod, which carries the runtime's
// error and in it the plugin's, read through the API and in `kubectl
// describe pod`. One refusal per plugin that refuses: topology-aware
// cannot meet require-isolated on a node without isolated CPUs,
// device-injector refuses an Unhealthy device, and security, configured
// through the chart's values (upgraded, then rolled back), refuses a pod
// without a user namespace where one is required and, on containerd, a
// seccomp profile the pod names that its profile directory does not have.
func refusals(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	createNamespace(ctx, t, sb, refusalNamespace)

	t.Run("topology-aware", func(t *testing.T) {
		isolated, err := os.ReadFile("/sys/devices/system/cpu/isolated")
		require.NoError(t, err)
		if strings.TrimSpace(string(isolated)) != "" {
			t.Skipf("the host isolates CPUs %s: require-isolated can be met", isolated)
		}
		requireRefused(ctx, t, sb, refusedPod("isolated", map[string]string{"cpu.nri-suite.io": "require-isolated"}),
			`topology-aware: insufficient CPUs: container refusals/isolated/main: 1 CPU requested from the isolated CPUs `+
				`by annotation cpu.nri-suite.io="require-isolated", but the node isolates no CPUs`)
	})
	t.Run("device-injector", func(t *testing.T) {
		spec := filepath.Join(sb.CDISpecDir(), "refusal.yaml")
		require.NoError(t, os.WriteFile(spec, []byte(brokenSpec), 0o644))
		defer os.Remove(spec)
		// An Unknown device passes: the pod comes once the check ran.
		health, err := state.DeviceHealthRecords(state.DefaultDir)
		require.NoError(t, err)
		require.NoError(t, poll(ctx, func() error {
			set, found, err := health.Read(state.DeviceHealthKey)
			if err != nil || !found {
				return fmt.Errorf("device health: found %v, error %v", found, err)
			}
			if h := set.Devices[brokenDevice]; h.Health != state.HealthUnhealthy {
				return fmt.Errorf("device %s is %q", brokenDevice, h.Health)
			}
			return nil
		}))
		requireRefused(ctx, t, sb, refusedPod("unhealthy", map[string]string{"cdi-devices.nri-suite.io": brokenDevice}),
			`device-injector: container refusals/unhealthy/main: annotation cdi-devices.nri-suite.io="`+brokenDevice+`": `+
				`unhealthy device `+brokenDevice+`: device node /dev/null is c 1:3, the spec says c 1:99`)
	})
	t.Run("security", func(t *testing.T) {
		// Both need configuration: a profile directory (empty) and a
		// namespace whose pods must have user namespaces.
		profiles := t.TempDir()
		const tenants = "tenants"
		createNamespace(ctx, t, sb, tenants)
		helmUpgrade(ctx, t, sb, "--set", "plugins.security.profileDir="+profiles,
			"--set", "plugins.security.config.seccomp.profile-dir="+profiles,
			"--set", "plugins.security.config.user-namespaces.namespaces={"+tenants+"}")
		defer helmRollback(ctx, t, sb)
		t.Run("user namespace", func(t *testing.T) {
			pod := refusedPod("userns", nil)
			pod.Namespace = tenants
			requireRefused(ctx, t, sb, pod, `security rule user-namespace refused container `+tenants+`/userns/main: `+
				`namespace "`+tenants+`" requires a user namespace (hostUsers: false), and the pod runs in the host's user namespace: `+
				`set spec.hostUsers: false`)
		})
		t.Run("missing seccomp profile", func(t *testing.T) {
			if sb.Runtime().Name() == "crio" {
				t.Skip("CRI-O v1.34's NRI drops seccomp policies: the rule audits there unless configured to enforce")
			}
			requireRefused(ctx, t, sb, refusedPod("profile", map[string]string{"seccomp.nri-suite.io": "missing.json"}),
				`security rule seccomp refused container `+refusalNamespace+`/profile/main: `,
				`annotation seccomp.nri-suite.io="missing.json": want a valid profile in `+profiles)
		})
	})
}

// refusedPod is a pod of the refusals namespace on the pod network (a host
// network would add its own reasons to security's).
func refusedPod(name string, annotations map[string]string) *corev1.Pod {
	pod := sandbox.BusyboxPod(name)
	pod.Namespace, pod.Annotations, pod.Spec.HostNetwork = refusalNamespace, annotations, false
	return pod
}

// requireRefused creates pod and requires that its creation is refused with
// a Failed event naming every want, and the refusing plugin's own NRIRefused
// event naming them too, seen through the API and in `kubectl describe
// pod`, and that its container waits in CreateContainerError (the STATUS of
// `kubectl get pods`) with the same message; the pod is removed when t ends.
func requireRefused(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod *corev1.Pod, want ...string) {
	writePod(ctx, t, sb, pod)
	requireEvent(ctx, t, sb, pod.Namespace, pod.Name, "Failed", want...)
	requireEvent(ctx, t, sb, pod.Namespace, pod.Name, plugin.ReasonRefused, want...)
	require.NoError(t, poll(ctx, func() error {
		current, err := sb.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(current.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s/%s has no container status yet", pod.Namespace, pod.Name)
		}
		for _, s := range current.Status.ContainerStatuses {
			if w := s.State.Waiting; w == nil || w.Reason != "CreateContainerError" || !containsAll(w.Message, want) {
				return fmt.Errorf("container %s of pod %s/%s is %+v", s.Name, pod.Namespace, pod.Name, s.State)
			}
		}
		return nil
	}))
}

// requireEvent waits for a Warning event of the pod namespace/name (its
// current UID) with reason whose message names every want, and requires
// `kubectl describe pod` to show them too.
func requireEvent(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, namespace, name, reason string, want ...string) {
	var message string
	err := poll(ctx, func() error {
		pod, err := sb.Client().CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		selector := fields.Set{"involvedObject.uid": string(pod.UID), "reason": reason}.String()
		events, err := sb.Client().CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && containsAll(e.Message, want) {
				message = e.Message
				return nil
			}
		}
		return fmt.Errorf("no %s event of pod %s/%s names %q yet (events: %v)", reason, namespace, name, want, messages(events.Items))
	})
	require.NoError(t, err)
	t.Logf("the user sees: %s: %s", reason, message)

	describe, err := sb.Kubectl(ctx, "describe", "pod", "--namespace", namespace, name)
	require.NoError(t, err)
	for _, w := range want {
		assert.Contains(t, string(describe), w, "kubectl describe pod %s/%s", namespace, name)
	}
}

func messages(events []corev1.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Reason + ": " + e.Message
	}
	return out
}

// createNamespace creates a namespace through the API and deletes it when
// the test ends.
func createNamespace(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := sb.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, sb.Client().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}))
	})
}

// helmUpgrade upgrades the release with the chart of this checkout and
// args, keeping the values it has, and waits until every plugin is back,
// connected and ready.
func helmUpgrade(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, args ...string) {
	out, err := sb.Helm(ctx, append([]string{"upgrade", release, filepath.Join(repoRoot(t), "deployments/helm/nri-suite"),
		"--namespace", release, "--reuse-values", "--wait", "--timeout", "2m"}, args...)...)
	require.NoError(t, err, "helm upgrade: %s", out)
	waitConnected(ctx, t, sb)
}

// helmRollback rolls the release back to the revision before the last, as
// helmUpgrade waits.
func helmRollback(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	out, err := sb.Helm(ctx, "rollback", release, "--namespace", release, "--wait", "--timeout", "2m")
	require.NoError(t, err, "helm rollback: %s", out)
	waitConnected(ctx, t, sb)
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
