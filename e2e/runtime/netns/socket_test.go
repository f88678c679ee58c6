package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveHTTP serves "inside" on ln until the test ends.
func serveHTTP(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "inside")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// A server that Listen made inside answers Dial from inside (as an
// http.Transport's DialContext), on loopback and on the node address, and
// is not on the host's loopback.
func TestListenDial(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ns := newNamespace(t, uniqueName(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: ns.Dial}}
	defer client.CloseIdleConnections()

	for _, addr := range []string{"127.0.0.1:0", "198.18.0.2:0"} {
		ln, err := ns.Listen("tcp", addr)
		require.NoError(t, err)
		serveHTTP(t, ln)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, addr)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "inside", string(body))
	}

	ln, err := ns.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveHTTP(t, ln)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	// The same port is free on the host's loopback, and the host's own
	// server there answers the host: the namespace's listener is not on it.
	// (The host's server stays open while it is asked: a closed port could
	// be taken at once by any other test listening on port 0.)
	hostLn, err := net.Listen("tcp", "127.0.0.1:"+port)
	require.NoError(t, err, "the namespace's listener is on the host's loopback")
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "host")
	})}
	go func() { _ = hostSrv.Serve(hostLn) }()
	defer hostSrv.Close()
	hostClient := &http.Client{Transport: &http.Transport{}}
	defer hostClient.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/", nil)
	require.NoError(t, err)
	resp, err := hostClient.Do(req)
	require.NoError(t, err, "dial from the host")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "host", string(body), "the host's loopback reached the namespace's server")

	_, err = ns.Dial(ctx, "tcp", "127.0.0.1:1")
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial inside to a closed port: %v", err)
}

// Names and networks other than TCP and UDP are refused before any socket
// exists (no root needed).
func TestDialListenRefuse(t *testing.T) {
	ns := &Namespace{name: Prefix + "none", path: "/run/netns/" + Prefix + "none"}
	ctx := context.Background()
	_, err := ns.Dial(ctx, "tcp", "localhost:6443")
	assert.EqualError(t, err, `dialing in network namespace nri-cluster-none: address "localhost:6443": the host must be an IP address, not a name`)
	_, err = ns.Dial(ctx, "unix", "/run/x.sock")
	assert.EqualError(t, err, `dialing in network namespace nri-cluster-none: network "unix": want tcp or udp`)
	_, err = ns.Listen("tcp", "localhost:0")
	assert.ErrorContains(t, err, "listening in network namespace nri-cluster-none: ")
	_, err = ns.Listen("tcp", "127.0.0.1")
	assert.ErrorContains(t, err, "missing port in address")
}
