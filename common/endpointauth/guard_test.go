package endpointauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
)

const node = "node-1"

// The API server's side of the webhook: a local HTTPS server that answers
// TokenReviews and SubjectAccessReviews from two tables, in front of which
// the real authenticator, authorizer and caches of k8s.io/apiserver run
// over a real client. What a real API server decides (an expired token,
// RBAC) is proven on the cluster sandbox.
type reviews struct {
	mu      sync.Mutex
	tokens  map[string]string   // token -> user name
	allowed map[string][]string // user -> subresources of the node it may get
	tokenN  int
	sarN    int
	asked   []authorizationv1.ResourceAttributes
}

func (rv *reviews) client(t testing.TB) kubernetes.Interface {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var review authenticationv1.TokenReview
		if !decode(w, r, &review) {
			return
		}
		rv.mu.Lock()
		rv.tokenN++
		if name, ok := rv.tokens[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: name}}
		}
		rv.mu.Unlock()
		encode(w, &review)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var review authorizationv1.SubjectAccessReview
		if !decode(w, r, &review) {
			return
		}
		rv.mu.Lock()
		rv.sarN++
		attrs := *review.Spec.ResourceAttributes
		rv.asked = append(rv.asked, attrs)
		for _, sub := range rv.allowed[review.Spec.User] {
			if attrs.Resource == "nodes" && attrs.Name == node && attrs.Subresource == sub && attrs.Verb == "get" {
				review.Status.Allowed = true
			}
		}
		rv.mu.Unlock()
		encode(w, &review)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	require.NoError(t, err)
	return c
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func encode(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (rv *reviews) counts() (int, int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.tokenN, rv.sarN
}

// pair is a certificate and key on disk.
type pair struct{ cert, key string }

func issue(t *testing.T, ca *pki.CA, dir, name string, usage pki.Usage) pair {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: name, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: usage})
	require.NoError(t, err)
	p := pair{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")}
	writeAtomically(t, p.cert, certPEM)
	writeAtomically(t, p.key, keyPEM)
	return p
}

// writeAtomically replaces path by a rename, as a Secret volume's update
// does, so that a reload never reads half a file.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name)
	require.NoError(t, err)
	return ca
}

// serve starts a guarded TLS server of a handler that answers "data" and
// returns its URL and the guard.
func serve(t *testing.T, o Options, c Cluster) (string, *Guard, *Metrics) {
	t.Helper()
	m := NewMetrics("test")
	require.NoError(t, o.Check("127.0.0.1:0"))
	log := logrus.New()
	log.SetLevel(logrus.DebugLevel)
	g, err := New(o, c, m, logrus.NewEntry(log))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.Run(ctx)
	srv := httptest.NewUnstartedServer(g.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "data")
	}), "/healthz"))
	scheme := "http"
	if tlsConfig := g.TLSConfig(); tlsConfig != nil {
		srv.TLS = tlsConfig
		srv.StartTLS()
		scheme = "https"
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return scheme + "://" + srv.Listener.Addr().String(), g, m
}

// client trusts ca and presents the client certificate c, if any.
func client(t *testing.T, ca *pki.CA, c *pair) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca.CertPEM()))
	cfg := &tls.Config{RootCAs: pool}
	if c != nil {
		cert, err := tls.LoadX509KeyPair(c.cert, c.key)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

func get(t testing.TB, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func denied(m *Metrics, code string) float64 {
	return testutil.ToFloat64(m.denied.WithLabelValues("stats", code))
}

// Webhook mode, as the kubelet's: tokens through TokenReview, client
// certificates through the CA, both authorized with SubjectAccessReviews
// on the node's subresources; each refusal is 401 or 403, counted, with no
// data; answers are cached.
func TestWebhook(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "cluster CA"), newCA(t, "another CA")
	serving := issue(t, ca, dir, "serving", pki.Server)
	scraper := issue(t, ca, dir, "scraper", pki.Client)
	stranger := issue(t, other, dir, "stranger", pki.Client)
	caFile := filepath.Join(dir, "ca.crt")
	writeAtomically(t, caFile, ca.CertPEM())

	rv := &reviews{
		tokens: map[string]string{"prometheus-token": "system:serviceaccount:monitoring:prometheus", "norbac-token": "system:serviceaccount:default:nobody"},
		allowed: map[string][]string{"system:serviceaccount:monitoring:prometheus": {"metrics", "stats"},
			"scraper": {"metrics"}},
	}
	url, _, m := serve(t, Options{Listener: "stats", TLSCert: serving.cert, TLSKey: serving.key, ClientCA: caFile, Auth: AuthWebhook},
		Cluster{Client: rv.client(t), NodeName: node})
	anonymous := client(t, ca, nil)

	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		token  string
		want   int
	}{
		{"no token", anonymous, "/metrics/resource", "", http.StatusUnauthorized},
		{"a wrong token", anonymous, "/metrics/resource", "wrong", http.StatusUnauthorized},
		{"a token in the query string", anonymous, "/metrics/resource?access_token=prometheus-token", "", http.StatusUnauthorized},
		{"a valid token without RBAC", anonymous, "/metrics/resource", "norbac-token", http.StatusForbidden},
		{"a client certificate of another CA", client(t, ca, &stranger), "/metrics/resource", "", http.StatusUnauthorized},
		{"an allowed token on a path it is not allowed (nodes/proxy)", anonymous, "/other", "prometheus-token", http.StatusForbidden},
		{"a client certificate without stats", client(t, ca, &scraper), "/stats/pods", "", http.StatusForbidden},
		{"an allowed token", anonymous, "/metrics/resource", "prometheus-token", http.StatusOK},
		{"an allowed token on stats", anonymous, "/stats/pods", "prometheus-token", http.StatusOK},
		{"an allowed client certificate", client(t, ca, &scraper), "/metrics/cadvisor", "", http.StatusOK},
		{"health is public", anonymous, "/healthz", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code401, code403 := denied(m, "401"), denied(m, "403")
			code, body := get(t, tc.client, url+tc.path, tc.token)
			assert.Equal(t, tc.want, code, body)
			switch tc.want {
			case http.StatusOK:
				assert.Equal(t, "data", body)
			case http.StatusUnauthorized:
				assert.NotContains(t, body, "data")
				assert.Equal(t, code401+1, denied(m, "401"), "counted")
			case http.StatusForbidden:
				assert.NotContains(t, body, "data")
				assert.Contains(t, body, "Forbidden (user=")
				assert.Equal(t, code403+1, denied(m, "403"), "counted")
			}
		})
	}

	// The SubjectAccessReviews asked what the kubelet asks.
	rv.mu.Lock()
	assert.Contains(t, rv.asked, authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "metrics", Name: node})
	assert.Contains(t, rv.asked, authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "proxy", Name: node})
	rv.mu.Unlock()

	// Cached: the same token on the same path asks the API server nothing.
	tokens, sars := rv.counts()
	for range 3 {
		code, _ := get(t, anonymous, url+"/metrics/resource", "prometheus-token")
		require.Equal(t, http.StatusOK, code)
	}
	tokens2, sars2 := rv.counts()
	assert.Equal(t, tokens, tokens2, "TokenReviews cached")
	assert.Equal(t, sars, sars2, "SubjectAccessReviews cached")
}

// Without TLS files, webhook mode serves HTTPS with a self-signed
// certificate, as the kubelet does.
func TestWebhookSelfSigned(t *testing.T) {
	rv := &reviews{tokens: map[string]string{"t": "u"}, allowed: map[string][]string{"u": {"metrics"}}}
	url, _, _ := serve(t, Options{Listener: "stats", Auth: AuthWebhook}, Cluster{Client: rv.client(t), NodeName: node})
	require.True(t, strings.HasPrefix(url, "https://"), url)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the point
	code, body := get(t, insecure, url+"/metrics", "t")
	assert.Equal(t, http.StatusOK, code, body)
	resp, err := insecure.Get(url + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Contains(t, resp.TLS.PeerCertificates[0].DNSNames, node, "the certificate names the node")
}

// Without the API server: a client certificate of the CA, or the static
// token, is enough.
func TestWithoutAPIServer(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "CA"), newCA(t, "other")
	serving := issue(t, ca, dir, "serving", pki.Server)
	good, bad := issue(t, ca, dir, "good", pki.Client), issue(t, other, dir, "bad", pki.Client)
	caFile := filepath.Join(dir, "ca.crt")
	writeAtomically(t, caFile, ca.CertPEM())
	url, _, m := serve(t, Options{Listener: "stats", TLSCert: serving.cert, TLSKey: serving.key, ClientCA: caFile, Auth: AuthNone}, Cluster{})
	code, body := get(t, client(t, ca, &good), url+"/metrics", "")
	assert.Equal(t, http.StatusOK, code, body)
	for name, c := range map[string]*http.Client{"no certificate": client(t, ca, nil), "another CA": client(t, ca, &bad)} {
		code, body := get(t, c, url+"/metrics", "")
		assert.Equal(t, http.StatusUnauthorized, code, "%s: %s", name, body)
	}
	assert.Equal(t, 2.0, denied(m, "401"))

	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	url, _, m = serve(t, Options{Listener: "stats", TokenFile: tokenFile, Auth: AuthNone}, Cluster{})
	for token, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, "s3cret": http.StatusOK} {
		code, _ := get(t, http.DefaultClient, url+"/metrics", token)
		assert.Equal(t, want, code, "token %q", token)
	}
	assert.Equal(t, 2.0, denied(m, "401"))
}

// A replaced certificate, key or CA is served from the next handshake on,
// without a restart.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newCA(t, "first CA"), newCA(t, "second CA")
	serving := issue(t, ca1, dir, "serving", pki.Server)
	c2 := issue(t, ca2, dir, "client2", pki.Client)
	caFile := filepath.Join(dir, "ca.crt")
	writeAtomically(t, caFile, ca1.CertPEM())
	url, _, _ := serve(t, Options{Listener: "stats", TLSCert: serving.cert, TLSKey: serving.key, ClientCA: caFile}, Cluster{})

	code, _ := get(t, client(t, ca1, &c2), url+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, code, "a client of the second CA before it is trusted")

	// The second CA signs the new serving certificate and the clients.
	issue(t, ca2, dir, "serving", pki.Server)
	writeAtomically(t, caFile, ca2.CertPEM())
	assert.Eventually(t, func() bool {
		resp, err := client(t, ca2, &c2).Get(url + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the new certificate and CA are used")
}

// New names the flag and the file of what it cannot load.
func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "CA")
	serving := issue(t, ca, dir, "serving", pki.Server)
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not PEM"), 0o600))
	fifo := filepath.Join(dir, "fifo.pem")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name    string
		opts    Options
		cluster Cluster
		want    string
	}{
		{"missing certificate", Options{TLSCert: missing, TLSKey: serving.key}, Cluster{}, "loading --stats-tls-cert: reading " + missing},
		{"broken certificate", Options{TLSCert: garbage, TLSKey: serving.key}, Cluster{},
			"loading --stats-tls-cert " + garbage + " and --stats-tls-key " + serving.key + ": tls: failed to find any PEM data"},
		{"key of another certificate", Options{TLSCert: serving.cert, TLSKey: issue(t, ca, dir, "other", pki.Server).key}, Cluster{},
			"loading --stats-tls-cert " + serving.cert},
		{"CA a FIFO", Options{TLSCert: serving.cert, TLSKey: serving.key, ClientCA: fifo}, Cluster{},
			"loading --stats-client-ca: reading " + fifo + ": it is a named pipe (FIFO): not a regular file"},
		{"broken CA", Options{TLSCert: serving.cert, TLSKey: serving.key, ClientCA: garbage}, Cluster{}, "loading --stats-client-ca " + garbage},
		{"empty token", Options{TokenFile: empty}, Cluster{}, "--stats-token-file " + empty + " is empty"},
		{"webhook without the node", Options{Auth: AuthWebhook}, Cluster{Client: (&reviews{}).client(t)}, "the node's name is empty, expected --node-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Listener = "stats"
			if tc.opts.Auth == "" {
				tc.opts.Auth = AuthNone
			}
			require.NoError(t, tc.opts.Check("127.0.0.1:9191"))
			_, err := New(tc.opts, tc.cluster, NewMetrics("test"), logrus.NewEntry(logrus.New()))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// BenchmarkScrape is a scrape of a /metrics/resource of 1,000 containers
// over HTTPS without authentication, and with webhook authentication whose
// TokenReview and SubjectAccessReview answers are cached, as they are
// after the first scrape: on a new connection each time (a TLS handshake
// each, as a scraper whose idle connection was closed) and on a kept one.
func BenchmarkScrape(b *testing.B) {
	dir := b.TempDir()
	ca, err := pki.NewCA("CA")
	require.NoError(b, err)
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "serving", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.Server})
	require.NoError(b, err)
	serving := pair{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")}
	require.NoError(b, os.WriteFile(serving.cert, certPEM, 0o600))
	require.NoError(b, os.WriteFile(serving.key, keyPEM, 0o600))
	var body strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&body, "container_cpu_usage_seconds_total{container=\"c\",namespace=\"default\",pod=\"pod-%d\"} 12.345 1733130000000\n", i)
		fmt.Fprintf(&body, "container_memory_working_set_bytes{container=\"c\",namespace=\"default\",pod=\"pod-%d\"} 1.2345678e+07 1733130000000\n", i)
		fmt.Fprintf(&body, "container_start_time_seconds{container=\"c\",namespace=\"default\",pod=\"pod-%d\"} 1.733e+09 1733130000000\n", i)
	}
	payload := body.String()
	rv := &reviews{tokens: map[string]string{"t": "scraper"}, allowed: map[string][]string{"scraper": {"metrics"}}}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	type benchCase struct {
		name      string
		opts      Options
		token     string
		keepAlive bool
	}
	var cases []benchCase
	for _, keep := range []bool{false, true} {
		conn := "/new-connection"
		if keep {
			conn = "/kept-connection"
		}
		cases = append(cases,
			benchCase{"unauthenticated" + conn, Options{Listener: "stats", TLSCert: serving.cert, TLSKey: serving.key}, "", keep},
			benchCase{"webhook-cached" + conn, Options{Listener: "stats", TLSCert: serving.cert, TLSKey: serving.key, Auth: AuthWebhook}, "t", keep})
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			g, err := New(bc.opts, Cluster{Client: rv.client(b), NodeName: node}, NewMetrics("bench"), logrus.NewEntry(logrus.New()))
			require.NoError(b, err)
			srv := httptest.NewUnstartedServer(g.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, payload)
			})))
			srv.TLS = g.TLSConfig()
			srv.StartTLS()
			defer srv.Close()
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: !bc.keepAlive}}
			scrape := func() {
				code, got := get(b, c, srv.URL+"/metrics/resource", bc.token)
				if code != http.StatusOK || len(got) != len(payload) {
					b.Fatalf("%d, %d bytes", code, len(got))
				}
			}
			scrape() // the reviews, then cached
			tokens, sars := rv.counts()
			b.ResetTimer()
			for b.Loop() {
				scrape()
			}
			b.StopTimer()
			if t2, s2 := rv.counts(); t2 != tokens || s2 != sars {
				b.Fatalf("the API server was asked during the loop: %d TokenReviews, %d SubjectAccessReviews", t2-tokens, s2-sars)
			}
		})
	}
}
