package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func endpoints() Endpoints {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "answer", Help: "The answer."})
	g.Set(42)
	reg.MustRegister(g)
	return Endpoints{CAdvisor: textWriter("answer 42\n"), Resource: reg, Suite: reg, Pods: func() any { return map[string]int{"pods": 1} }}
}

type textWriter string

func (s textWriter) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, string(s))
	return err
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts, endpoints(), logrus.NewEntry(logrus.New()))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func get(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServesTheEndpoints(t *testing.T) {
	s := start(t, Options{Addr: "127.0.0.1:0"})
	for path, want := range map[string]string{
		"/metrics/cadvisor": "answer 42", "/metrics/resource": "answer 42", "/metrics": "answer 42",
		"/stats/pods": `"pods": 1`, "/healthz": "ok",
	} {
		code, body := get(t, http.DefaultClient, "http://"+s.Addr()+path, "")
		assert.Equal(t, http.StatusOK, code, path)
		assert.Contains(t, body, want, path)
	}
}

func TestBearerToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	s := start(t, Options{Addr: "127.0.0.1:0", TokenFile: tokenFile})
	url := "http://" + s.Addr() + "/metrics/cadvisor"
	for token, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, "s3cret": http.StatusOK} {
		code, _ := get(t, http.DefaultClient, url, token)
		assert.Equal(t, want, code, "token %q", token)
	}
	code, _ := get(t, http.DefaultClient, "http://"+s.Addr()+"/healthz", "")
	assert.Equal(t, http.StatusOK, code, "health needs no token")
}

func TestClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	serverCert, serverKey := ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.pem, 0o644))
	s := start(t, Options{Addr: "127.0.0.1:0", TLSCert: serverCert, TLSKey: serverKey, ClientCA: caFile})
	url := "https://" + s.Addr() + "/metrics/resource"

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	_, err := anonymous.Get(url)
	assert.Error(t, err, "a client without a certificate is refused")

	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	require.NoError(t, err)
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	code, body := get(t, withCert, url, "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "answer 42")
}

func TestRefusesUnsafeOptions(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("t"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	fifo := filepath.Join(dir, "token.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"cert without key", Options{Addr: "127.0.0.1:0", TLSCert: "/c.pem"}, "expected both or neither"},
		{"client CA without TLS", Options{Addr: "127.0.0.1:0", ClientCA: "/ca.pem"}, "need TLS"},
		{"relative cert", Options{Addr: "127.0.0.1:0", TLSCert: "c.pem", TLSKey: "/c.key"}, `--stats-tls-cert: "c.pem": expected an absolute path`},
		{"unclean token file", Options{Addr: "127.0.0.1:0", TokenFile: "/etc/x/../token"}, `--stats-token-file: "/etc/x/../token": expected a clean absolute path, such as /etc/token`},
		{"token in the clear off loopback", Options{Addr: "0.0.0.0:0", TokenFile: tokenFile}, "needs TLS"},
		{"empty token", Options{Addr: "127.0.0.1:0", TokenFile: empty}, "is empty"},
		{"missing key pair", Options{Addr: "127.0.0.1:0", TLSCert: filepath.Join(dir, "no.pem"), TLSKey: filepath.Join(dir, "no.key")}, "loading --stats-tls-cert: reading " + filepath.Join(dir, "no.pem")},
		{"token file a FIFO", Options{Addr: "127.0.0.1:0", TokenFile: fifo}, "reading " + fifo + ": it is a named pipe (FIFO): not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(tc.opts, endpoints(), logrus.NewEntry(logrus.New()))
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for 127.0.0.1 and its key; it returns their paths.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certPath, keyPath
}
