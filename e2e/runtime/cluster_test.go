package runtime

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/deployments"
)

// TestCluster brings up the cluster sandbox and checks what the cluster
// layer relies on: the node registered and Ready, a pod off the host
// network scheduled through the API with an address of the pod range and
// reaching the API server at its Service (kube-proxy), kubectl on the host
// reaching the API server and, through it, the kubelet (exec and logs), and
// nothing left on the host afterwards.
func TestCluster(t *testing.T) {
	for _, rt := range RuntimeNames() {
		t.Run(rt, func(t *testing.T) { testCluster(t, rt) })
	}
}

func testCluster(t *testing.T, rt string) {
	RequireClusterPrereqs(t, rt)
	ctx := TestContext(t)
	sb := NewForTest(t, Options{Runtime: rt, Cluster: true})
	client := sb.Client()

	node, err := client.CoreV1().Nodes().Get(ctx, sb.NodeName(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: clusterNodeAddr.IP.String()})

	pod := BusyboxPod("web")
	pod.Spec.HostNetwork = false
	// No plugin runs here, and the shipped drop-in waits for security.
	pod.Annotations = map[string]string{deployments.TolerateMissingPlugins: "true"}
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "echo hello from web; trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"}
	_, err = client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	running, err := sb.WaitPodRunning(ctx, "default", "web")
	require.NoError(t, err)
	_, podNet, err := net.ParseCIDR(clusterPodCIDR)
	require.NoError(t, err)
	assert.True(t, podNet.Contains(net.ParseIP(running.Status.PodIP)), "pod IP %s in %s", running.Status.PodIP, clusterPodCIDR)

	out, err := sb.Kubectl(ctx, "exec", "web", "--", "cat", "/proc/self/net/route")
	require.NoError(t, err, "kubectl exec: %s", out)
	assert.Contains(t, string(out), "eth0", "the pod has its own interface")
	// In-cluster clients reach the API server at the kubernetes Service,
	// which only kube-proxy's rules route: Go's TLS server answers a plain
	// HTTP request with a message of its own.
	out, err = sb.Kubectl(ctx, "exec", "web", "--", "sh", "-c",
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"`)
	require.NoError(t, err, "reaching the kubernetes Service from a pod: %s", out)
	assert.Contains(t, string(out), "Client sent an HTTP request to an HTTPS server", "the API server answered through its Service")
	out, err = sb.Kubectl(ctx, "logs", "web")
	require.NoError(t, err, "kubectl logs: %s", out)
	assert.Equal(t, "hello from web", strings.TrimSpace(string(out)))
}

func TestPodNotReady(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	assert.Equal(t, "", PodNotReady(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready}}}))
	assert.Equal(t, "not scheduled", PodNotReady(&corev1.Pod{}))
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "CreateContainerError", Message: "plugin 40-security refused it"}}},
			{Name: "done", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		}}}
	assert.Equal(t, "Pending, container init exited 1: Error, container app waiting: CreateContainerError plugin 40-security refused it",
		PodNotReady(pending))
}
