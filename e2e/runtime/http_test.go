package runtime

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("body"))
	}))
	defer srv.Close()

	body, err := HTTPGet(context.Background(), srv.URL+"/ok")
	require.NoError(t, err)
	assert.Equal(t, "body", string(body))

	_, err = HTTPGet(context.Background(), srv.URL+"/missing")
	assert.EqualError(t, err, srv.URL+"/missing answered 404 Not Found: no such page")
}

func TestKubeletGetWithoutKubelet(t *testing.T) {
	_, err := (&Sandbox{}).KubeletGet(context.Background(), "/pods")
	assert.EqualError(t, err, "GET /pods of the kubelet: the sandbox runs none")
}
