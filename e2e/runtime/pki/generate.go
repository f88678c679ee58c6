package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// FrontProxyClientName is the front proxy's client certificate's name, which
// the API server must be told to accept (--requestheader-allowed-names).
const FrontProxyClientName = "front-proxy-client"

const (
	certMode = 0o644
	// Private keys, and kubeconfigs since they embed one.
	keyMode = 0o600
)

// Spec is what the certificates must name.
type Spec struct {
	NodeName string
	NodeIP   net.IP
	// APIServerIPs are the addresses clients reach kube-apiserver at, e.g.
	// 127.0.0.1, the node IP and the first service IP (the one of
	// kubernetes.default, which pods use).
	APIServerIPs []net.IP
	// APIServerURL is the server of every kubeconfig Generate writes, as the
	// cluster's components reach kube-apiserver (https://...).
	APIServerURL string
}

// Files holds the path of every file Generate writes, all in its directory.
type Files struct {
	// The cluster CA: it signs the serving and client certificates below,
	// and kube-controller-manager signs the cluster's CSRs with it.
	CACert, CAKey string
	// The front-proxy CA and its one client, with which kube-apiserver
	// authenticates to aggregated API servers (--requestheader-client-ca-file,
	// --proxy-client-cert-file).
	FrontProxyCACert, FrontProxyCAKey         string
	FrontProxyClientCert, FrontProxyClientKey string
	// kube-apiserver's serving certificate.
	APIServerCert, APIServerKey string
	// kube-apiserver's client certificate towards the kubelet
	// (--kubelet-client-certificate).
	APIServerKubeletClientCert, APIServerKubeletClientKey string
	// The kubelet's serving certificate (tlsCertFile, tlsPrivateKeyFile).
	KubeletCert, KubeletKey string
	// kube-controller-manager's and kube-scheduler's serving certificates
	// (--tls-cert-file), on loopback: their health is checked with the CA.
	ControllerManagerCert, ControllerManagerKey string
	SchedulerCert, SchedulerKey                 string
	// The service-account token key pair: ServiceAccountKey signs
	// (--service-account-signing-key-file, --service-account-private-key-file),
	// ServiceAccountPub verifies (--service-account-key-file).
	ServiceAccountKey, ServiceAccountPub string

	AdminKubeconfig             string
	ControllerManagerKubeconfig string
	SchedulerKubeconfig         string
	KubeletKubeconfig           string
	KubeProxyKubeconfig         string
}

// Generate makes fresh CAs, certificates, keys and kubeconfigs for spec and
// writes them into dir, which it creates if need be. Files that are already
// there are overwritten.
func Generate(dir string, spec Spec) (*Files, error) {
	if spec.NodeName == "" {
		return nil, errors.New("spec: no node name")
	}
	if spec.NodeIP == nil {
		return nil, errors.New("spec: no node IP")
	}
	if err := checkServerURL(spec.APIServerURL); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create PKI directory: %w", err)
	}

	path := func(name string) string { return filepath.Join(dir, name) }
	f := &Files{
		CACert:                      path("ca.crt"),
		CAKey:                       path("ca.key"),
		FrontProxyCACert:            path("front-proxy-ca.crt"),
		FrontProxyCAKey:             path("front-proxy-ca.key"),
		FrontProxyClientCert:        path("front-proxy-client.crt"),
		FrontProxyClientKey:         path("front-proxy-client.key"),
		APIServerCert:               path("apiserver.crt"),
		APIServerKey:                path("apiserver.key"),
		APIServerKubeletClientCert:  path("apiserver-kubelet-client.crt"),
		APIServerKubeletClientKey:   path("apiserver-kubelet-client.key"),
		KubeletCert:                 path("kubelet.crt"),
		KubeletKey:                  path("kubelet.key"),
		ControllerManagerCert:       path("controller-manager.crt"),
		ControllerManagerKey:        path("controller-manager.key"),
		SchedulerCert:               path("scheduler.crt"),
		SchedulerKey:                path("scheduler.key"),
		ServiceAccountKey:           path("sa.key"),
		ServiceAccountPub:           path("sa.pub"),
		AdminKubeconfig:             path("admin.kubeconfig"),
		ControllerManagerKubeconfig: path("controller-manager.kubeconfig"),
		SchedulerKubeconfig:         path("scheduler.kubeconfig"),
		KubeletKubeconfig:           path("kubelet.kubeconfig"),
		KubeProxyKubeconfig:         path("kube-proxy.kubeconfig"),
	}

	ca, err := NewCA("kubernetes")
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := NewCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if err := writePair(f.CACert, f.CAKey, ca.CertPEM(), ca.KeyPEM()); err != nil {
		return nil, err
	}
	if err := writePair(f.FrontProxyCACert, f.FrontProxyCAKey, frontProxyCA.CertPEM(), frontProxyCA.KeyPEM()); err != nil {
		return nil, err
	}

	certs := []struct {
		ca        *CA
		leaf      Leaf
		cert, key string
	}{
		{frontProxyCA, Leaf{CommonName: FrontProxyClientName, Usage: Client},
			f.FrontProxyClientCert, f.FrontProxyClientKey},
		// Pods reach kube-apiserver by the kubernetes service's names and
		// first IP, the node's components and the host by the other IPs.
		{ca, Leaf{
			CommonName: "kube-apiserver",
			DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local", "localhost"},
			IPs:   spec.APIServerIPs,
			Usage: Server,
		}, f.APIServerCert, f.APIServerKey},
		// system:masters, so that the kubelet's webhook authorization lets
		// kube-apiserver at logs, exec and metrics without an RBAC binding.
		{ca, Leaf{CommonName: "kube-apiserver-kubelet-client", Organizations: []string{"system:masters"}, Usage: Client},
			f.APIServerKubeletClientCert, f.APIServerKubeletClientKey},
		// kube-apiserver dials the kubelet at the node IP and verifies it
		// with the cluster CA (--kubelet-certificate-authority); tests on the
		// node itself dial loopback.
		{ca, Leaf{
			CommonName: spec.NodeName,
			DNSNames:   []string{spec.NodeName},
			IPs:        []net.IP{spec.NodeIP, net.IPv4(127, 0, 0, 1)},
			Usage:      Server,
		}, f.KubeletCert, f.KubeletKey},
		{ca, Leaf{CommonName: "kube-controller-manager", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: Server},
			f.ControllerManagerCert, f.ControllerManagerKey},
		{ca, Leaf{CommonName: "kube-scheduler", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: Server},
			f.SchedulerCert, f.SchedulerKey},
	}
	for _, c := range certs {
		certPEM, keyPEM, err := c.ca.Issue(c.leaf)
		if err != nil {
			return nil, fmt.Errorf("issue %s: %w", c.cert, err)
		}
		if err := writePair(c.cert, c.key, certPEM, keyPEM); err != nil {
			return nil, err
		}
	}

	if err := writeServiceAccountKeys(f.ServiceAccountKey, f.ServiceAccountPub); err != nil {
		return nil, err
	}

	kubeconfigs := []struct {
		path string
		user Leaf
	}{
		{f.AdminKubeconfig, Leaf{CommonName: "kubernetes-admin", Organizations: []string{"system:masters"}, Usage: Client}},
		{f.ControllerManagerKubeconfig, Leaf{CommonName: "system:kube-controller-manager", Usage: Client}},
		{f.SchedulerKubeconfig, Leaf{CommonName: "system:kube-scheduler", Usage: Client}},
		{f.KubeletKubeconfig, Leaf{CommonName: "system:node:" + spec.NodeName, Organizations: []string{"system:nodes"}, Usage: Client}},
		// Bound to system:node-proxier by the API server's bootstrap policy.
		{f.KubeProxyKubeconfig, Leaf{CommonName: "system:kube-proxy", Usage: Client}},
	}
	for _, k := range kubeconfigs {
		certPEM, keyPEM, err := ca.Issue(k.user)
		if err != nil {
			return nil, fmt.Errorf("issue client certificate of %s: %w", k.path, err)
		}
		if err := WriteKubeconfig(k.path, spec.APIServerURL, ca.CertPEM(), certPEM, keyPEM); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// writeServiceAccountKeys writes an RSA 2048 key pair. kube-apiserver signs
// tokens with RSA (RS256) or ECDSA keys alike; RSA is what kubeadm makes and
// what every consumer of the cluster's OIDC discovery verifies.
func writeServiceAccountKeys(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", keyPath, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return fmt.Errorf("%s: %w", keyPath, err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode public key for %s: %w", pubPath, err)
	}
	return writePair(pubPath, keyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), keyPEM)
}

// writePair writes a certificate (or public key) readable by all and its
// private key readable by the owner only.
func writePair(certPath, keyPath string, certPEM, keyPEM []byte) error {
	if err := writeFile(certPath, certPEM, certMode); err != nil {
		return err
	}
	return writeFile(keyPath, keyPEM, keyMode)
}

// writeFile sets the mode before it writes, so that a key is never readable
// by others for a moment (an existing file keeps its mode through
// os.WriteFile) and the mode is the same whatever the umask.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
