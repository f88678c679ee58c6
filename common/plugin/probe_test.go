package plugin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			w.Write([]byte("ready\n"))
			return
		}
		http.Error(w, `not ready: configure plugin x: unknown key "bogus"`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "ready", args: []string{srv.URL + "/ready"}, wantCode: 0, wantOut: "ready\n"},
		{name: "not ready prints why", args: []string{srv.URL + "/readyz"}, wantCode: 1,
			wantOut: "not ready: configure plugin x: unknown key \"bogus\"\n"},
		{name: "nobody listens", args: []string{closed.URL + "/readyz"}, wantCode: 1, wantOut: "connection refused"},
		{name: "no URL", args: nil, wantCode: 2, wantOut: "usage: nri-<plugin> probe URL\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			assert.Equal(t, tc.wantCode, probe(tc.args, &out))
			assert.Contains(t, out.String(), tc.wantOut)
		})
	}
}
