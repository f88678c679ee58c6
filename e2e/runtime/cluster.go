package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nri-suite/nri-suite/e2e/runtime/netns"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
)

// The cluster's addresses. They all live in the sandbox's network
// namespace, which has no route out: the node's address on a dummy
// interface, the pods' on the CNI bridge, and the service range, which only
// the API server uses. 198.18.0.0/15 is reserved for benchmarks (RFC 2544),
// so it meets no real network; the host's resolver sits in 10.0.0.0/8.
var (
	clusterNodeAddr = net.IPNet{IP: net.IPv4(198, 18, 0, 2), Mask: net.CIDRMask(24, 32)}
	clusterPodCIDR  = "198.18.64.0/24"
	// The first address of the service range is the API server's Service.
	clusterServiceNet  = net.IPNet{IP: net.IPv4(198, 18, 128, 0), Mask: net.CIDRMask(24, 32)}
	clusterServiceCIDR = clusterServiceNet.String()
	clusterServiceIP   = net.IPv4(198, 18, 128, 1)
)

// clusterHostDirs are created whatever the configuration says: containerd's
// CNI library caches results in /var/lib/cni/results, and the first named
// network namespace on a host makes /run/netns (a mount of itself).
var clusterHostDirs = []string{"/var/lib/cni", netns.RunDir}

// clusterNetnsName names a run dir's network namespace after it, so that a
// stale one is found with it (SweepStale).
func clusterNetnsName(runDir string) string {
	return netns.Prefix + strings.TrimPrefix(filepath.Base(runDir), runDirPrefix)
}

// cluster is what Options.Cluster adds to a sandbox: its network
// namespace, credentials, control plane, and the host side's way in.
type cluster struct {
	ns         *netns.Namespace
	files      *pki.Files
	cni        string // CNI dir for the runtime (RuntimeEnv.CNIDir)
	http       *http.Client
	control    *controlPlane
	forward    *netns.Forwarder
	kubeconfig string // for the host: the API server through forward
	client     *kubernetes.Clientset

	mu            sync.Mutex
	podNamespaces map[string]string // pods WritePod created, by name
}

// startCluster makes the network namespace, the certificates and the CNI
// configuration, starts the control plane in the namespace, and opens the
// API server to the host's loopback; the node (runtime, kubelet) follows.
func (s *Sandbox) startCluster(ctx context.Context) error {
	c := &cluster{podNamespaces: map[string]string{}}
	s.cluster = c
	var err error
	if c.ns, err = netns.Create(clusterNetnsName(s.dir), netns.Config{Interface: "node0", Address: &clusterNodeAddr,
		Routes: []*net.IPNet{&clusterServiceNet}}); err != nil {
		return err
	}
	c.files, err = pki.Generate(filepath.Join(s.dir, "pki"), pki.Spec{
		NodeName:     s.opts.NodeName,
		NodeIP:       clusterNodeAddr.IP,
		APIServerIPs: []net.IP{net.IPv4(127, 0, 0, 1), clusterNodeAddr.IP, clusterServiceIP},
		APIServerURL: "https://127.0.0.1:" + strconv.Itoa(apiServerPort),
	})
	if err != nil {
		return err
	}
	if c.http, err = c.namespaceClient(); err != nil {
		return err
	}
	c.cni = filepath.Join(s.dir, "cni")
	if err := writeCNI(c.cni, s.opts.Cache, clusterPodCIDR); err != nil {
		return err
	}
	c.control, err = startControlPlane(ctx, controlPlaneSettings{
		Dir: filepath.Join(s.dir, "control-plane"), Cache: s.opts.Cache, Files: c.files,
		NodeIP: clusterNodeAddr.IP.String(), ServiceCIDR: clusterServiceCIDR, Netns: c.ns.Path(), HTTP: c.http,
	}, s.log)
	if err != nil {
		return err
	}
	if c.forward, err = c.ns.Forward("127.0.0.1:0", "127.0.0.1:"+strconv.Itoa(apiServerPort)); err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := c.files.WriteAdminKubeconfig(c.kubeconfig, "https://"+c.forward.Addr().String()); err != nil {
		return err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the cluster's kubeconfig %s: %w", c.kubeconfig, err)
	}
	if c.client, err = kubernetes.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("making the cluster's client: %w", err)
	}
	s.log.WithField("kubeconfig", c.kubeconfig).Info("control plane ready")
	return nil
}

// namespaceClient reaches the namespace's loopback (and node address) with
// the admin kubeconfig's credentials and CA.
func (c *cluster) namespaceClient() (*http.Client, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.files.AdminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the cluster's admin kubeconfig: %w", err)
	}
	tlsConfig, err := rest.TLSConfigFor(restConfig)
	if err != nil {
		return nil, fmt.Errorf("loading the cluster's admin credentials: %w", err)
	}
	return &http.Client{Transport: &http.Transport{DialContext: c.ns.Dial, TLSClientConfig: tlsConfig}}, nil
}

// kubeletCluster is the kubelet's part of the cluster.
func (c *cluster) kubelet() *kubeletCluster {
	return &kubeletCluster{Kubeconfig: c.files.KubeletKubeconfig, ClientCAFile: c.files.CACert,
		TLSCertFile: c.files.KubeletCert, TLSKeyFile: c.files.KubeletKey}
}

// waitNodeReady waits until the node is Ready and schedulable: the node
// lifecycle controller has removed its not-ready taint.
func (c *cluster) waitNodeReady(ctx context.Context, name string) error {
	var last error
	for {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err
		case !nodeReady(node):
			last = fmt.Errorf("node %s is not Ready", name)
		case hasTaint(node, corev1.TaintNodeNotReady):
			last = fmt.Errorf("node %s still has the taint %s", name, corev1.TaintNodeNotReady)
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to be Ready: %w (last: %v)", name, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// close stops the control plane and removes the network namespace; the
// node is gone before.
func (c *cluster) close() error {
	if c == nil {
		return nil
	}
	c.control.stop()
	var errs []error
	if c.forward != nil {
		errs = append(errs, c.forward.Close())
	}
	if c.ns != nil {
		errs = append(errs, c.ns.Close())
	}
	return errors.Join(errs...)
}

// Kubeconfig is the path of a kubeconfig with which the host reaches the
// cluster's API server as its admin; "" without Options.Cluster.
func (s *Sandbox) Kubeconfig() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.kubeconfig
}

// NodeIP is the node's address in the cluster's network namespace (its
// InternalIP, where metrics-server finds the node); nil without
// Options.Cluster.
func (s *Sandbox) NodeIP() net.IP {
	if s.cluster == nil {
		return nil
	}
	return clusterNodeAddr.IP
}

// PKI is the cluster's certificates and keys: its CA (pki.LoadCA issues
// more), the service-account signing key, the admin's credentials; nil
// without Options.Cluster.
func (s *Sandbox) PKI() *pki.Files {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.files
}

// Client is a client of the cluster's API server as its admin; nil without
// Options.Cluster.
func (s *Sandbox) Client() *kubernetes.Clientset {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.client
}

// RestartAPIServer kills the cluster's kube-apiserver with SIGKILL and
// starts it again with the same command, returning once it is ready: what
// is stored in etcd stays, and the clients (kubelet, controllers, Client)
// reconnect by themselves.
func (s *Sandbox) RestartAPIServer(ctx context.Context) error {
	if s.cluster == nil {
		return errors.New("restarting the API server: the sandbox is not a cluster (Options.Cluster)")
	}
	return s.cluster.control.restart(ctx, "kube-apiserver")
}

// WaitPodRunning waits until the cluster's pod namespace/name is Running
// and returns it as last seen.
func (s *Sandbox) WaitPodRunning(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if s.cluster == nil {
		return nil, fmt.Errorf("waiting for pod %s/%s: the sandbox is not a cluster (Options.Cluster)", namespace, name)
	}
	var pod *corev1.Pod
	err := PollUntil(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		var err error
		if pod, err = s.cluster.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s/%s is %s", namespace, name, pod.Status.Phase)
		}
		return nil
	})
	if err != nil {
		return pod, fmt.Errorf("waiting for pod %s/%s to run: %w", namespace, name, err)
	}
	return pod, nil
}

// createPod creates pod through the API server, in its namespace (default
// if unset), remembering where, so that deletePod finds it by name.
func (c *cluster) createPod(pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if _, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.podNamespaces[pod.Name] = pod.Namespace
	return nil
}

// deletePod deletes a pod createPod created.
func (c *cluster) deletePod(ctx context.Context, name string) error {
	c.mu.Lock()
	namespace, ok := c.podNamespaces[name]
	delete(c.podNamespaces, name)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("deleting pod %s: the sandbox did not create it", name)
	}
	pods := c.client.CoreV1().Pods(namespace)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	// Gone from the API too, so that a pod of the same name can follow.
	err := PollUntil(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("pod %s/%s is still terminating", namespace, name)
	})
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// PodNotReady says why pod is not Ready ("" when it is): its phase and
// each container's waiting reason, or its exit code when it failed, as the
// kubelet reported them.
func PodNotReady(pod *corev1.Pod) string {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			return ""
		}
	}
	why := []string{string(pod.Status.Phase)}
	if pod.Status.Phase == "" {
		why[0] = "not scheduled"
	}
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		switch {
		case st.State.Waiting != nil && st.State.Waiting.Reason != "":
			why = append(why, fmt.Sprintf("container %s waiting: %s", st.Name, reasonText(st.State.Waiting.Reason, st.State.Waiting.Message)))
		case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
			why = append(why, fmt.Sprintf("container %s exited %d: %s", st.Name, st.State.Terminated.ExitCode,
				reasonText(st.State.Terminated.Reason, st.State.Terminated.Message)))
		}
	}
	return strings.Join(why, ", ")
}

// reasonText joins the kubelet's reason for a state and its message.
func reasonText(reason, message string) string {
	return strings.TrimSpace(reason + " " + message)
}
