package pki

import (
	"fmt"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The one cluster, user and context of every kubeconfig written here.
const kubeconfigName = "default"

// WriteKubeconfig writes a kubeconfig for serverURL that embeds the CA that
// verifies the server and the client's certificate and key (all PEM), so
// that it stands alone wherever it is copied.
func WriteKubeconfig(path, serverURL string, ca, cert, key []byte) error {
	return writeKubeconfig(path, serverURL, ca, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
}

// WriteTokenKubeconfig is WriteKubeconfig for a client that authenticates
// with a bearer token, such as a service account's.
func WriteTokenKubeconfig(path, serverURL string, ca []byte, token string) error {
	return writeKubeconfig(path, serverURL, ca, &clientcmdapi.AuthInfo{Token: token})
}

func writeKubeconfig(path, serverURL string, ca []byte, user *clientcmdapi.AuthInfo) error {
	if err := checkServerURL(serverURL); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	config := clientcmdapi.NewConfig()
	config.Clusters[kubeconfigName] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: ca}
	config.AuthInfos[kubeconfigName] = user
	config.Contexts[kubeconfigName] = &clientcmdapi.Context{Cluster: kubeconfigName, AuthInfo: kubeconfigName}
	config.CurrentContext = kubeconfigName
	data, err := clientcmd.Write(*config)
	if err != nil {
		return fmt.Errorf("encode kubeconfig %s: %w", path, err)
	}
	return writeFile(path, data, keyMode)
}

// WriteAdminKubeconfig writes a kubeconfig with the admin's credentials for
// another server URL than the cluster's own, such as a loopback port that
// is forwarded to kube-apiserver for the host side of a test.
func (f *Files) WriteAdminKubeconfig(path, serverURL string) error {
	admin, err := clientcmd.BuildConfigFromFlags("", f.AdminKubeconfig)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.AdminKubeconfig, err)
	}
	return WriteKubeconfig(path, serverURL, admin.CAData, admin.CertData, admin.KeyData)
}

// checkServerURL refuses a server URL the certificates cannot serve: the
// client certificates authenticate only over TLS.
func checkServerURL(serverURL string) error {
	u, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("server URL: %w", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server URL %q: not https://host[:port]", serverURL)
	}
	return nil
}
