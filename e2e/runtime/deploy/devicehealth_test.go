package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// The device the device-health scenario breaks and mends: a node of its
// own, made as /dev/null's twin (c 1:3), that the scenario removes and
// makes again.
const (
	healthNamespace = "device-health"
	healthDevice    = "nri-suite.io/health=twin"
	healthNode      = "/dev/nri-suite-health-twin"
	healthSpec      = `cdiVersion: 0.6.0
kind: nri-suite.io/health
devices:
  - name: twin
    containerEdits:
      deviceNodes:
        - {path: /dev/twin, hostPath: ` + healthNode + `, type: c, major: 1, minor: 3}
`
	conditionType = "NRIDevicesHealthy"
)

// deviceHealth checks that device health reaches the API: a pod uses a
// device, the device's node goes away, and the pod gets a DeviceUnhealthy
// Event naming the device and the failed check while the node's
// NRIDevicesHealthy condition turns False naming it; the node comes back,
// and the pod gets DeviceRecovered and the condition turns True. The time
// from each change on the host to the Event and to the condition is logged
// for docs/benchmarks.md, never asserted (device-injector checks every 2 s
// by default: that is most of it).
func deviceHealth(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	makeNode(t)
	t.Cleanup(func() { _ = os.Remove(healthNode) })
	spec := filepath.Join(sb.CDISpecDir(), "health.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(healthSpec), 0o644))
	t.Cleanup(func() { _ = os.Remove(spec) })
	createNamespace(ctx, t, sb, healthNamespace)

	pod := sandbox.BusyboxPod("user")
	pod.Namespace, pod.Spec.HostNetwork = healthNamespace, false
	pod.Annotations = map[string]string{"cdi-devices.nri-suite.io": healthDevice}
	// The device must be Healthy (checked) for the pod to be let in.
	requireCondition(ctx, t, sb, corev1.ConditionTrue, "")
	_, err := sb.Client().CoreV1().Pods(healthNamespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	running, err := sb.WaitPodRunning(ctx, healthNamespace, pod.Name)
	require.NoError(t, err)

	broken := time.Now()
	require.NoError(t, os.Remove(healthNode))
	event, condition := seen(ctx, t, sb, running, broken, "DeviceUnhealthy", corev1.EventTypeWarning,
		"device "+healthDevice+" is Unhealthy: device node "+healthNode+" is missing",
		corev1.ConditionFalse, healthDevice+" is Unhealthy: device node "+healthNode+" is missing")
	t.Logf("device broken: DeviceUnhealthy Event after %s, %s=False after %s", event, conditionType, condition)

	mended := time.Now()
	makeNode(t)
	event, condition = seen(ctx, t, sb, running, mended, "DeviceRecovered", corev1.EventTypeNormal,
		"device "+healthDevice+" is Healthy again", corev1.ConditionTrue, "")
	t.Logf("device mended: DeviceRecovered Event after %s, %s=True after %s", event, conditionType, condition)
}

// seen waits, at once, for the Event (reason, eventType, a message
// containing wantEvent) on pod and for the node's condition (status, a
// message containing wantCondition), and returns how long after since each
// was first seen.
func seen(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod *corev1.Pod, since time.Time, reason, eventType, wantEvent string,
	status corev1.ConditionStatus, wantCondition string) (event, condition time.Duration) {
	var eventErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventErr = waitHealthEvent(ctx, sb, pod, reason, eventType, wantEvent)
		event = time.Since(since).Round(10 * time.Millisecond)
	}()
	requireCondition(ctx, t, sb, status, wantCondition)
	condition = time.Since(since).Round(10 * time.Millisecond)
	<-done
	require.NoError(t, eventErr)
	return event, condition
}

// makeNode makes the device's node, /dev/null's twin.
func makeNode(t *testing.T) {
	require.NoError(t, unix.Mknod(healthNode, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
}

// waitHealthEvent waits for the Event of reason and type on pod whose
// message contains want.
func waitHealthEvent(ctx context.Context, sb *sandbox.Sandbox, pod *corev1.Pod, reason, eventType, want string) error {
	selector := fields.Set{"involvedObject.uid": string(pod.UID), "reason": reason}.String()
	return poll(ctx, func() error {
		events, err := sb.Client().CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == eventType && e.Source.Component == "nri-device-injector" && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("no %s event of pod %s/%s names %q yet (events: %v)", reason, pod.Namespace, pod.Name, want, messages(events.Items))
	})
}

// requireCondition waits until the node's NRIDevicesHealthy condition has
// status and a message containing want.
func requireCondition(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, status corev1.ConditionStatus, want string) {
	require.NoError(t, poll(ctx, func() error {
		node, err := sb.Client().CoreV1().Nodes().Get(ctx, sb.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == conditionType {
				if c.Status != status || !strings.Contains(c.Message, want) {
					return fmt.Errorf("node %s: %s=%s: %s", node.Name, c.Type, c.Status, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("node %s has no %s condition yet", node.Name, conditionType)
	}))
}
