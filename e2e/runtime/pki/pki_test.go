package pki

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/keyutil"
)

var testSpec = Spec{
	NodeName: "node-1",
	NodeIP:   net.ParseIP("192.0.2.10"),
	APIServerIPs: []net.IP{
		net.ParseIP("127.0.0.1"), net.ParseIP("192.0.2.10"), net.ParseIP("10.96.0.1"),
	},
	APIServerURL: "https://192.0.2.10:6443",
}

func generate(t *testing.T) (string, *Files) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	files, err := Generate(dir, testSpec)
	require.NoError(t, err)
	return dir, files
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(data)
	require.NotNil(t, block, "no PEM block")
	require.Equal(t, "CERTIFICATE", block.Type)
	require.Empty(t, rest, "more than one PEM block")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func poolOf(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	return pool
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want, info.Mode().Perm(), "mode of %s", path)
}

func ipStrings(ips []net.IP) []string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return s
}

func TestIssue(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	caCert := parseCert(t, ca.CertPEM())
	assert.True(t, caCert.IsCA)
	assert.Equal(t, "test-ca", caCert.Subject.CommonName)
	assert.NotZero(t, caCert.KeyUsage&x509.KeyUsageCertSign)
	_, err = tls.X509KeyPair(ca.CertPEM(), ca.KeyPEM())
	assert.NoError(t, err, "CA key does not match its certificate")
	other, err := NewCA("test-ca")
	require.NoError(t, err)

	tests := []struct {
		name  string
		leaf  Leaf
		want  []x509.ExtKeyUsage
		wrong []x509.ExtKeyUsage // a usage the certificate must not verify for
	}{{
		name: "client",
		leaf: Leaf{CommonName: "alice", Organizations: []string{"team-a", "team-b"}, Usage: Client},
		want: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, wrong: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, {
		name: "server",
		leaf: Leaf{CommonName: "web", DNSNames: []string{"web.test"}, IPs: []net.IP{net.ParseIP("127.0.0.2"), net.ParseIP("::1")}, Usage: Server},
		want: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, wrong: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, {
		name:  "both",
		leaf:  Leaf{CommonName: "peer", DNSNames: []string{"peer.test"}, Usage: Client | Server},
		want:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		wrong: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}}
	serials := map[string]bool{caCert.SerialNumber.String(): true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(tt.leaf)
			require.NoError(t, err)
			_, err = tls.X509KeyPair(certPEM, keyPEM)
			require.NoError(t, err, "key does not match certificate")
			cert := parseCert(t, certPEM)

			assert.False(t, cert.IsCA)
			assert.Equal(t, tt.leaf.CommonName, cert.Subject.CommonName)
			assert.Equal(t, tt.leaf.Organizations, cert.Subject.Organization)
			assert.Equal(t, tt.leaf.DNSNames, cert.DNSNames)
			assert.Equal(t, ipStrings(tt.leaf.IPs), ipStrings(cert.IPAddresses))
			assert.ElementsMatch(t, tt.want, cert.ExtKeyUsage)
			assert.Equal(t, x509.KeyUsageDigitalSignature, cert.KeyUsage)
			assert.LessOrEqual(t, cert.SerialNumber.BitLen(), 128)
			assert.False(t, serials[cert.SerialNumber.String()], "serial number used twice")
			serials[cert.SerialNumber.String()] = true
			assert.WithinDuration(t, time.Now().Add(leafValidity), cert.NotAfter, time.Minute)
			assert.True(t, cert.NotBefore.Before(time.Now().Add(-backdate+time.Minute)))

			for _, usage := range tt.want {
				_, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(t, ca.CertPEM()), KeyUsages: []x509.ExtKeyUsage{usage}})
				assert.NoError(t, err, "usage %v", usage)
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: poolOf(t, ca.CertPEM()), KeyUsages: tt.wrong})
			assert.Error(t, err, "verifies for a usage it was not issued for")
			_, err = cert.Verify(x509.VerifyOptions{Roots: poolOf(t, other.CertPEM()), KeyUsages: tt.want})
			assert.Error(t, err, "verifies against another CA of the same name")
		})
	}
}

func TestIssueRefusesNoUsage(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	_, _, err = ca.Issue(Leaf{CommonName: "nobody"})
	assert.ErrorContains(t, err, `"nobody"`)
}

func TestGenerateCertificates(t *testing.T) {
	_, files := generate(t)
	caPEM := readFile(t, files.CACert)
	frontProxyCAPEM := readFile(t, files.FrontProxyCACert)

	for _, c := range []struct{ name, cert, key string }{
		{"kubernetes", files.CACert, files.CAKey},
		{"front-proxy-ca", files.FrontProxyCACert, files.FrontProxyCAKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			certPEM := readFile(t, c.cert)
			cert := parseCert(t, certPEM)
			assert.True(t, cert.IsCA)
			assert.Equal(t, c.name, cert.Subject.CommonName)
			_, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(t, certPEM)})
			assert.NoError(t, err)
			_, err = tls.X509KeyPair(certPEM, readFile(t, c.key))
			assert.NoError(t, err, "key does not match certificate")
			assertMode(t, c.cert, 0o644)
			assertMode(t, c.key, 0o600)
		})
	}
	assert.NotEqual(t, caPEM, frontProxyCAPEM, "the front-proxy CA is the cluster CA")

	tests := []struct {
		name      string
		cert, key string
		ca, other []byte // the CA that signed it, and one that did not
		usage     x509.ExtKeyUsage
		cn        string
		orgs      []string
		dnsNames  []string
		ips       []string
	}{{
		name: "front-proxy-client", cert: files.FrontProxyClientCert, key: files.FrontProxyClientKey,
		ca: frontProxyCAPEM, other: caPEM, usage: x509.ExtKeyUsageClientAuth,
		cn: "front-proxy-client",
	}, {
		name: "apiserver", cert: files.APIServerCert, key: files.APIServerKey,
		ca: caPEM, other: frontProxyCAPEM, usage: x509.ExtKeyUsageServerAuth,
		cn: "kube-apiserver",
		dnsNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", "localhost"},
		ips: []string{"127.0.0.1", "192.0.2.10", "10.96.0.1"},
	}, {
		name: "apiserver-kubelet-client", cert: files.APIServerKubeletClientCert, key: files.APIServerKubeletClientKey,
		ca: caPEM, other: frontProxyCAPEM, usage: x509.ExtKeyUsageClientAuth,
		cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"},
	}, {
		name: "kubelet", cert: files.KubeletCert, key: files.KubeletKey,
		ca: caPEM, other: frontProxyCAPEM, usage: x509.ExtKeyUsageServerAuth,
		cn: "node-1", dnsNames: []string{"node-1"}, ips: []string{"192.0.2.10", "127.0.0.1"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certPEM := readFile(t, tt.cert)
			cert := parseCert(t, certPEM)
			assert.Equal(t, tt.cn, cert.Subject.CommonName)
			assert.Equal(t, tt.orgs, cert.Subject.Organization)
			assert.Equal(t, tt.dnsNames, cert.DNSNames)
			assert.Equal(t, tt.ips, ipStrings(cert.IPAddresses))
			assert.Equal(t, []x509.ExtKeyUsage{tt.usage}, cert.ExtKeyUsage)

			opts := x509.VerifyOptions{Roots: poolOf(t, tt.ca), KeyUsages: []x509.ExtKeyUsage{tt.usage}}
			_, err := cert.Verify(opts)
			assert.NoError(t, err)
			// A server certificate is checked by the name or address the
			// client dialed.
			for _, name := range append(tt.dnsNames, tt.ips...) {
				opts.DNSName = name
				_, err := cert.Verify(opts)
				assert.NoError(t, err, "name %s", name)
			}
			if tt.usage == x509.ExtKeyUsageServerAuth {
				opts.DNSName = "elsewhere.test"
				_, err := cert.Verify(opts)
				assert.Error(t, err, "verifies for a name it does not have")
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: poolOf(t, tt.other), KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			assert.Error(t, err, "verifies against a CA that did not sign it")

			_, err = tls.X509KeyPair(certPEM, readFile(t, tt.key))
			assert.NoError(t, err, "key does not match certificate")
			_, err = tls.X509KeyPair(certPEM, readFile(t, files.CAKey))
			assert.Error(t, err, "the CA key matches the certificate")
			assertMode(t, tt.cert, 0o644)
			assertMode(t, tt.key, 0o600)
		})
	}
}

// The service-account keys are read as kube-apiserver and
// kube-controller-manager read them, with client-go's keyutil.
func TestGenerateServiceAccountKeys(t *testing.T) {
	_, files := generate(t)
	key, err := keyutil.PrivateKeyFromFile(files.ServiceAccountKey)
	require.NoError(t, err)
	rsaKey, ok := key.(*rsa.PrivateKey)
	require.True(t, ok, "sa.key holds a %T", key)
	assert.Equal(t, 2048, rsaKey.N.BitLen())
	pubs, err := keyutil.PublicKeysFromFile(files.ServiceAccountPub)
	require.NoError(t, err)
	require.Len(t, pubs, 1)
	assert.True(t, rsaKey.PublicKey.Equal(pubs[0]), "sa.pub is not the public key of sa.key")
	assert.NotContains(t, string(readFile(t, files.ServiceAccountPub)), "PRIVATE")
	assertMode(t, files.ServiceAccountKey, 0o600)
	assertMode(t, files.ServiceAccountPub, 0o644)
}

func TestGenerateKubeconfigs(t *testing.T) {
	_, files := generate(t)
	caPEM := readFile(t, files.CACert)
	tests := []struct {
		name, path string
		cn         string
		orgs       []string
	}{
		{"admin", files.AdminKubeconfig, "kubernetes-admin", []string{"system:masters"}},
		{"controller-manager", files.ControllerManagerKubeconfig, "system:kube-controller-manager", nil},
		{"scheduler", files.SchedulerKubeconfig, "system:kube-scheduler", nil},
		{"kubelet", files.KubeletKubeconfig, "system:node:node-1", []string{"system:nodes"}},
		{"kube-proxy", files.KubeProxyKubeconfig, "system:kube-proxy", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config, err := clientcmd.LoadFromFile(tt.path)
			require.NoError(t, err)
			require.NoError(t, clientcmd.Validate(*config))
			restConfig, err := clientcmd.BuildConfigFromFlags("", tt.path)
			require.NoError(t, err)

			assert.Equal(t, testSpec.APIServerURL, restConfig.Host)
			tlsConfig := restConfig.TLSClientConfig
			assert.Empty(t, tlsConfig.CAFile+tlsConfig.CertFile+tlsConfig.KeyFile, "refers to files instead of embedding them")
			assert.Equal(t, caPEM, tlsConfig.CAData)
			_, err = tls.X509KeyPair(tlsConfig.CertData, tlsConfig.KeyData)
			require.NoError(t, err, "key does not match certificate")

			cert := parseCert(t, tlsConfig.CertData)
			assert.Equal(t, tt.cn, cert.Subject.CommonName)
			assert.Equal(t, tt.orgs, cert.Subject.Organization)
			_, err = cert.Verify(x509.VerifyOptions{Roots: poolOf(t, tlsConfig.CAData), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			assert.NoError(t, err)
			_, err = cert.Verify(x509.VerifyOptions{Roots: poolOf(t, tlsConfig.CAData), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			assert.Error(t, err, "a client certificate verifies as a server's")
			assertMode(t, tt.path, 0o600)
		})
	}
}

// Every path in Files is set, lies in the directory, and the directory holds
// nothing else.
func TestGenerateFiles(t *testing.T) {
	dir, files := generate(t)
	v := reflect.ValueOf(*files)
	var paths []string
	for i := range v.NumField() {
		path := v.Field(i).String()
		require.NotEmpty(t, path, "Files.%s", v.Type().Field(i).Name)
		assert.Equal(t, dir, filepath.Dir(path), "Files.%s", v.Type().Field(i).Name)
		paths = append(paths, filepath.Base(path))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, paths, names)
}

// An existing file gets the mode of what is written over it: a key that was
// world-readable is not left so.
func TestGenerateOverwritesModes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "ca.key")
	require.NoError(t, os.WriteFile(key, []byte("old"), 0o644))
	require.NoError(t, os.Chmod(key, 0o666))
	files, err := Generate(dir, testSpec)
	require.NoError(t, err)
	assertMode(t, files.CAKey, 0o600)
	assert.NotEqual(t, "old", string(readFile(t, files.CAKey)))
}

func TestGenerateErrors(t *testing.T) {
	withSpec := func(change func(*Spec)) Spec {
		s := testSpec
		change(&s)
		return s
	}
	tests := []struct {
		name  string
		spec  Spec
		setup func(t *testing.T, dir string)
		want  string
	}{
		{name: "no node name", spec: withSpec(func(s *Spec) { s.NodeName = "" }), want: "no node name"},
		{name: "no node IP", spec: withSpec(func(s *Spec) { s.NodeIP = nil }), want: "no node IP"},
		{name: "no server URL", spec: withSpec(func(s *Spec) { s.APIServerURL = "" }), want: "server URL"},
		{name: "plain HTTP", spec: withSpec(func(s *Spec) { s.APIServerURL = "http://127.0.0.1:8080" }), want: `"http://127.0.0.1:8080"`},
		{
			name: "unwritable file", spec: testSpec,
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, "apiserver.key"), 0o755))
			},
			want: "apiserver.key",
		},
		{
			name: "directory is a file", spec: testSpec,
			setup: func(t *testing.T, dir string) { require.NoError(t, os.WriteFile(dir, nil, 0o644)) },
			want:  "pki: not a directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pki")
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			files, err := Generate(dir, tt.spec)
			assert.Nil(t, files)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// The host side of a test reaches kube-apiserver through a forwarded
// loopback port: a kubeconfig written for that port carries the admin's
// credentials, and a server with the apiserver's certificate that requires
// client certificates from the cluster CA takes them.
func TestAdminKubeconfigReachesAPIServer(t *testing.T) {
	dir, files := generate(t)
	serving, err := tls.LoadX509KeyPair(files.APIServerCert, files.APIServerKey)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject := r.TLS.PeerCertificates[0].Subject
		io.WriteString(w, subject.CommonName+" "+strings.Join(subject.Organization, ","))
	}))
	// On 127.0.0.1 for sure, an address of the serving certificate, where
	// httptest would take [::1] when it has no IPv4 loopback.
	srv.Listener.Close()
	srv.Listener, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    poolOf(t, readFile(t, files.CACert)),
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	t.Cleanup(srv.Close)

	hostKubeconfig := filepath.Join(dir, "host.kubeconfig")
	require.NoError(t, files.WriteAdminKubeconfig(hostKubeconfig, srv.URL))
	assertMode(t, hostKubeconfig, 0o600)
	admin, err := clientcmd.BuildConfigFromFlags("", hostKubeconfig)
	require.NoError(t, err)
	assert.Equal(t, srv.URL, admin.Host)

	get := func(config *rest.Config) (string, error) {
		config.Timeout = 10 * time.Second
		client, err := rest.HTTPClientFor(config)
		require.NoError(t, err)
		resp, err := client.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	body, err := get(admin)
	require.NoError(t, err)
	assert.Equal(t, "kubernetes-admin system:masters", body)

	// The server refuses a client without a certificate, and one whose
	// certificate another CA signed.
	anonymous := rest.CopyConfig(admin)
	anonymous.CertData, anonymous.KeyData = nil, nil
	_, err = get(anonymous)
	assert.Error(t, err)
	frontProxy := rest.CopyConfig(admin)
	frontProxy.CertData = readFile(t, files.FrontProxyClientCert)
	frontProxy.KeyData = readFile(t, files.FrontProxyClientKey)
	_, err = get(frontProxy)
	assert.Error(t, err)
}

func TestWriteKubeconfigRefusesPlainHTTP(t *testing.T) {
	_, files := generate(t)
	path := filepath.Join(t.TempDir(), "host.kubeconfig")
	err := files.WriteAdminKubeconfig(path, "http://127.0.0.1:8080")
	assert.ErrorContains(t, err, path)
	assert.NoFileExists(t, path)
}

// LoadCA gives back the CA Generate wrote, which then issues certificates
// that verify against it; it refuses a key of another certificate.
func TestLoadCA(t *testing.T) {
	_, files := generate(t)
	ca, err := LoadCA(files.CACert, files.CAKey)
	require.NoError(t, err)
	certPEM, _, err := ca.Issue(Leaf{CommonName: "nri-stats", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: Server})
	require.NoError(t, err)
	_, err = parseCert(t, certPEM).Verify(x509.VerifyOptions{Roots: poolOf(t, readFile(t, files.CACert)),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.NoError(t, err)

	_, err = LoadCA(files.CACert, files.FrontProxyCAKey)
	assert.ErrorContains(t, err, "is not its ECDSA key")
	_, err = LoadCA(files.CACert, filepath.Join(t.TempDir(), "missing.key"))
	assert.ErrorContains(t, err, "missing.key")
}
