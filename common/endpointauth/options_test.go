package endpointauth

import (
	"flag"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestCheck(t *testing.T) {
	tls := Options{TLSCert: "/c.pem", TLSKey: "/c.key"}
	withCA, withToken := tls, tls
	withCA.ClientCA, withToken.TokenFile = "/ca.pem", "/token"
	for _, tc := range []struct {
		name string
		opts Options
		addr string
		want string // "" for no error
	}{
		{"plain on loopback", Options{}, "127.0.0.1:9191", ""},
		{"plain on localhost", Options{}, "localhost:9191", ""},
		{"plain on IPv6 loopback", Options{}, "[::1]:9191", ""},
		{"static token on loopback", Options{TokenFile: "/token"}, "127.0.0.1:9191", ""},
		{"plain off loopback", Options{}, "0.0.0.0:9191", "--stats-addr 0.0.0.0:9191 is not loopback: off loopback the endpoints need HTTPS and authentication, expected --stats-auth=webhook"},
		{"token in the clear off loopback", Options{TokenFile: "/token"}, "198.18.0.2:9191", "is not loopback"},
		{"HTTPS without authentication off loopback", tls, ":9191", "is not loopback"},
		{"HTTPS and client certificates off loopback", withCA, ":9191", ""},
		{"HTTPS and a static token off loopback", withToken, "0.0.0.0:9191", ""},
		{"webhook off loopback", Options{Auth: AuthWebhook}, "0.0.0.0:9191", ""},
		{"an address without a port", Options{}, "127.0.0.1", "is not loopback"},
		{"certificate without key", Options{TLSCert: "/c.pem"}, "127.0.0.1:9191", `--stats-tls-cert "/c.pem" and --stats-tls-key "": expected both or neither`},
		{"client CA without TLS", Options{ClientCA: "/ca.pem"}, "127.0.0.1:9191", "--stats-client-ca /ca.pem: client certificates need HTTPS"},
		{"static token with webhook", Options{TokenFile: "/token", Auth: AuthWebhook}, "127.0.0.1:9191", "--stats-token-file /token with --stats-auth=webhook: expected one of them"},
		{"unknown mode", Options{Auth: "always"}, "127.0.0.1:9191", `--stats-auth "always": expected none or webhook`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Listener = "stats"
			if tc.opts.Auth == "" {
				tc.opts.Auth = AuthNone
			}
			err := tc.opts.Check(tc.addr)
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	o := Options{Listener: "http"}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--http-tls-cert=/c", "--http-tls-key=/k", "--http-client-ca=/ca", "--http-auth=webhook"}))
	assert.Equal(t, Options{Listener: "http", TLSCert: "/c", TLSKey: "/k", ClientCA: "/ca", Auth: AuthWebhook}, o)
	assert.Equal(t, map[string]string{"--http-tls-cert": "/c", "--http-tls-key": "/k", "--http-client-ca": "/ca"}, o.Paths())
}

// The kubelet's table (pkg/kubelet/server/auth.go, GetRequestAttributes):
// the subresources a request may be allowed by, in the order asked.
func TestNodeAttributes(t *testing.T) {
	for path, want := range map[string][]string{
		"/metrics":          {"metrics"},
		"/metrics/cadvisor": {"metrics"},
		"/metrics/resource": {"metrics"},
		"/metricsx":         {"proxy"},
		"/stats":            {"stats"},
		"/stats/pods":       {"stats"},
		"/stats/summary":    {"stats"},
		"/healthz":          {"healthz", "proxy"},
		"/healthz/ping":     {"healthz", "proxy"},
		"/pods":             {"pods", "proxy"},
		"/allocatedPods":    {"pods", "proxy"},
		"/runningpods/":     {"pods", "proxy"},
		"/configz":          {"configz", "proxy"},
		"/logs/syslog":      {"log"},
		"/checkpoint/x":     {"checkpoint"},
		"/statusz":          {"statusz"},
		"/flagz":            {"configz"},
		"/":                 {"proxy"},
		"/other":            {"proxy"},
	} {
		r, err := http.NewRequest(http.MethodGet, "https://node:9191"+path, nil)
		require.NoError(t, err)
		attrs := nodeAttributes("node-1", &user.DefaultInfo{Name: "u"}, r)
		var got []string
		for _, a := range attrs {
			got = append(got, a.GetSubresource())
			assert.Equal(t, "get", a.GetVerb())
			assert.Equal(t, "nodes", a.GetResource())
			assert.Equal(t, "node-1", a.GetName())
			assert.Equal(t, "v1", a.GetAPIVersion())
			assert.Empty(t, a.GetAPIGroup()+a.GetNamespace())
			assert.True(t, a.IsResourceRequest())
		}
		assert.Equal(t, want, got, path)
	}
	for method, verb := range map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch",
		http.MethodDelete: "delete", http.MethodHead: ""} {
		r, err := http.NewRequest(method, "https://node:9191/metrics", nil)
		require.NoError(t, err)
		assert.Equal(t, verb, nodeAttributes("n", &user.DefaultInfo{}, r)[0].GetVerb(), method)
	}
}

// Any path and method of a request maps to at least one subresource of the
// node, the last of which is the kubelet's coarse one, without a panic.
func FuzzNodeAttributes(f *testing.F) {
	for _, seed := range []string{"/metrics", "/metrics/", "/stats", "/stats/pods", "/healthz/x", "/", "", "/runningpods", "//metrics"} {
		f.Add(http.MethodGet, seed)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path}}
		attrs := nodeAttributes("node-1", &user.DefaultInfo{Name: "u"}, r)
		if len(attrs) == 0 || len(attrs) > 2 {
			t.Fatalf("%s %q: %d attributes", method, path, len(attrs))
		}
		last := attrs[len(attrs)-1].GetSubresource()
		if !slices.Contains([]string{"stats", "metrics", "log", "checkpoint", "statusz", "configz", "proxy"}, last) {
			t.Fatalf("%s %q: last subresource %q", method, path, last)
		}
	})
}
