package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/endpointauth"
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
	opts.Auth.Listener = Listener
	require.NoError(t, opts.Check())
	s, err := Start(opts, endpointauth.Cluster{}, endpoints(), endpointauth.NewMetrics("test"), logrus.NewEntry(logrus.New()))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServesTheEndpoints(t *testing.T) {
	s := start(t, Options{Addr: "127.0.0.1:0", CAdvisor: true})
	for path, want := range map[string]string{
		"/metrics/cadvisor": "answer 42", "/metrics/resource": "answer 42", "/metrics": "answer 42",
		"/stats/pods": `"pods": 1`, "/healthz": "ok",
	} {
		code, body := get(t, "http://"+s.Addr()+path, "")
		assert.Equal(t, http.StatusOK, code, path)
		assert.Contains(t, body, want, path)
	}
}

// Without /metrics/cadvisor the listener serves the suite's own series and
// the resource metrics, and leaves the cAdvisor-named ones to the kubelet.
func TestWithoutCAdvisor(t *testing.T) {
	s := start(t, Options{Addr: "127.0.0.1:0", CAdvisor: false})
	code, _ := get(t, "http://"+s.Addr()+"/metrics/cadvisor", "")
	assert.Equal(t, http.StatusNotFound, code)
	for _, path := range []string{"/metrics/resource", "/metrics", "/stats/pods"} {
		code, _ := get(t, "http://"+s.Addr()+path, "")
		assert.Equal(t, http.StatusOK, code, path)
	}
}

// The listener's protection is common/endpointauth's (tested there): a
// token guards every endpoint but the health check.
func TestProtected(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	s := start(t, Options{Addr: "127.0.0.1:0", CAdvisor: true, Auth: endpointauth.Options{TokenFile: tokenFile}})
	for _, path := range []string{"/metrics/cadvisor", "/metrics/resource", "/metrics", "/stats/pods"} {
		code, body := get(t, "http://"+s.Addr()+path, "")
		assert.Equal(t, http.StatusUnauthorized, code, path)
		assert.NotContains(t, body, "answer", path)
		code, _ = get(t, "http://"+s.Addr()+path, "s3cret")
		assert.Equal(t, http.StatusOK, code, path)
	}
	code, _ := get(t, "http://"+s.Addr()+"/healthz", "")
	assert.Equal(t, http.StatusOK, code, "health needs no token")
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"disabled", Options{Addr: "", Auth: endpointauth.Options{TLSCert: "relative"}}, ""},
		{"relative cert", Options{Addr: "127.0.0.1:0", Auth: endpointauth.Options{TLSCert: "c.pem", TLSKey: "/c.key"}},
			`--stats-tls-cert: "c.pem": expected an absolute path`},
		{"unclean token file", Options{Addr: "127.0.0.1:0", Auth: endpointauth.Options{TokenFile: "/etc/x/../token"}},
			`--stats-token-file: "/etc/x/../token": expected a clean absolute path, such as /etc/token`},
		{"token in the clear off loopback", Options{Addr: "0.0.0.0:0", Auth: endpointauth.Options{TokenFile: "/var/lib/token"}},
			"--stats-addr 0.0.0.0:0 is not loopback"},
		{"plain off loopback", Options{Addr: ":9191"}, "--stats-addr :9191 is not loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Auth.Listener = Listener
			err := tc.opts.Check()
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.want)
			}
		})
	}
}
