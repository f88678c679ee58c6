package runtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"text/template"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
)

// metricsServerPort is where metrics-server serves the aggregated API, on
// the node's address in the cluster's network namespace.
const metricsServerPort = 4443

// MetricsServerOptions say where metrics-server reads the nodes' resource
// metrics.
type MetricsServerOptions struct {
	// KubeletPort is the port of every node's /metrics/resource
	// (metrics-server's --kubelet-port): the kubelet's 10250, or nri-stats'
	// to have nri-stats feed `kubectl top` in the kubelet's place.
	KubeletPort int
	// KubeletCAFile verifies the serving certificate there; "" skips the
	// verification (--kubelet-insecure-tls), for a self-signed one.
	KubeletCAFile string
}

// metricsServerManifest is metrics-server's objects as its own manifests
// have them, for a process outside the cluster: its service account, with
// the rights to read nodes' and pods' metrics and to delegate
// authentication and authorization, and the aggregated API behind a
// Service without a selector whose EndpointSlice names the node's address
// (the API server, with --enable-aggregator-routing, dials the endpoint).
var metricsServerManifest = template.Must(template.New("metrics-server").Parse(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: metrics-server, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:metrics-server"}
rules:
  - {apiGroups: [""], resources: [nodes/metrics], verbs: [get]}
  - {apiGroups: [""], resources: [pods, nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:metrics-server"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:metrics-server"}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "metrics-server:system:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: metrics-server-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec:
  ports: [{name: https, port: 443, targetPort: {{.Port}}, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {kubernetes.io/service-name: metrics-server, endpointslice.kubernetes.io/managed-by: nri-sandbox}
addressType: IPv4
endpoints: [{addresses: ["{{.Address}}"], conditions: {ready: true}}]
ports: [{name: https, port: {{.Port}}, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: metrics-server, namespace: kube-system, port: 443}
  caBundle: {{.CABundle}}
`))

// metricsServerDNSName is the name the API server verifies metrics-server's
// certificate for: its Service's.
const metricsServerDNSName = "metrics-server.kube-system.svc"

// StartMetricsServer runs metrics-server v0.8.0 (install.sh) as a process
// in the cluster's network namespace, as the control plane runs, with a
// token of its own service account, and returns once the API server
// serves its metrics API (metrics.k8s.io, which `kubectl top` reads; the
// first figures follow two scrapes later). It stops with the sandbox.
func (s *Sandbox) StartMetricsServer(ctx context.Context, o MetricsServerOptions) error {
	c := s.cluster
	if c == nil {
		return errors.New("starting metrics-server: the sandbox is not a cluster (Options.Cluster)")
	}
	dir := filepath.Join(s.dir, "metrics-server")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	ca, err := pki.LoadCA(c.files.CACert, c.files.CAKey)
	if err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "metrics-server", DNSNames: []string{metricsServerDNSName},
		IPs: []net.IP{clusterNodeAddr.IP}, Usage: pki.Server})
	if err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("starting metrics-server: %w", err)
		}
	}
	var manifest bytes.Buffer
	if err := metricsServerManifest.Execute(&manifest, map[string]any{"Address": clusterNodeAddr.IP.String(), "Port": metricsServerPort,
		"CABundle": base64.StdEncoding.EncodeToString(ca.CertPEM())}); err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	manifestFile := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(manifestFile, manifest.Bytes(), 0o644); err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	if _, err := s.Kubectl(ctx, "apply", "-f", manifestFile); err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	kubeconfig, err := c.serviceAccountKubeconfig(ctx, dir, "kube-system", "metrics-server")
	if err != nil {
		return fmt.Errorf("starting metrics-server: %w", err)
	}
	argv := []string{s.opts.Cache.Bin("metrics-server"),
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--bind-address", clusterNodeAddr.IP.String(), "--secure-port", strconv.Itoa(metricsServerPort),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--kubelet-port", strconv.Itoa(o.KubeletPort), "--kubelet-preferred-address-types", "InternalIP",
		// The shortest resolution it takes, so that CPU figures come 10 s
		// apart; a scrape must fit in 90% of it.
		"--metric-resolution", "10s", "--kubelet-request-timeout", "5s",
	}
	if o.KubeletCAFile != "" {
		argv = append(argv, "--kubelet-certificate-authority", o.KubeletCAFile)
	} else {
		argv = append(argv, "--kubelet-insecure-tls")
	}
	comp := &component{health: fmt.Sprintf("https://%s/livez", net.JoinHostPort(clusterNodeAddr.IP.String(), strconv.Itoa(metricsServerPort))),
		cmd: command{name: "metrics-server", argv: argv, netns: c.ns.Path(), logPath: filepath.Join(dir, "metrics-server.log")}}
	c.control.components = append(c.control.components, comp)
	if err := c.control.start(ctx, comp); err != nil {
		return err
	}
	// The API server's view: the APIService is Available once it reaches
	// metrics-server through the Service's endpoint.
	return comp.process.waitFor(ctx, "the metrics API (APIService v1beta1.metrics.k8s.io)", func(ctx context.Context) error {
		_, err := c.client.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1").DoRaw(ctx)
		return err
	})
}

// serviceAccountKubeconfig writes a kubeconfig for the cluster's API server
// inside its network namespace with a token of service account
// namespace/name, valid for an hour, and returns its path.
func (c *cluster) serviceAccountKubeconfig(ctx context.Context, dir, namespace, name string) (string, error) {
	expiry := int64(time.Hour / time.Second)
	token, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of service account %s/%s: %w", namespace, name, err)
	}
	caPEM, err := os.ReadFile(c.files.CACert)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := pki.WriteTokenKubeconfig(path, "https://127.0.0.1:"+strconv.Itoa(apiServerPort), caPEM, token.Status.Token); err != nil {
		return "", err
	}
	return path, nil
}
