package netns

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoOnce accepts one connection on ln, reads it to EOF and replies
// "echo: " and what it read, then closes: a reply after EOF is only seen
// if the half-close went through.
func echoOnce(t *testing.T, ln net.Listener) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		in, err := io.ReadAll(c)
		if err == nil {
			_, err = c.Write(append([]byte("echo: "), in...))
		}
		done <- err
	}()
	return done
}

// holdOpen accepts one connection on ln, says when a first byte came, and
// then reads until the connection ends, and says how.
func holdOpen(t *testing.T, ln net.Listener) (got <-chan struct{}, ended <-chan error) {
	t.Helper()
	gotc, endc := make(chan struct{}), make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(gotc)
			endc <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Read(make([]byte, 1))
		close(gotc)
		if err == nil {
			_, err = io.Copy(io.Discard, c)
		}
		endc <- err
	}()
	return gotc, endc
}

func listenInside(t *testing.T, ns *Namespace) net.Listener {
	t.Helper()
	ln, err := ns.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func forward(t *testing.T, ns *Namespace, nsAddr string) *Forwarder {
	t.Helper()
	f, err := ns.Forward("127.0.0.1:0", nsAddr)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.Close()) })
	return f
}

func dialHost(t *testing.T, addr net.Addr) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	return c.(*net.TCPConn)
}

// A connection to the forwarder on the host's loopback reaches the server
// inside, both ways, and a half-close passes through.
func TestForward(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ns := newNamespace(t, uniqueName(t, ""))
	ln := listenInside(t, ns)
	served := echoOnce(t, ln)
	f := forward(t, ns, ln.Addr().String())
	assert.True(t, f.Addr().(*net.TCPAddr).IP.IsLoopback())

	c := dialHost(t, f.Addr())
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	reply, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Equal(t, "echo: hello", string(reply))
	require.NoError(t, <-served)
}

// Close ends the connections being relayed and the listener, and returns
// after its goroutines; a connection to nothing inside is closed at once.
func TestForwardClose(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ns := newNamespace(t, uniqueName(t, ""))

	idle := forward(t, ns, "127.0.0.1:1")
	n, err := dialHost(t, idle.Addr()).Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "a connection to a closed port inside")

	ln := listenInside(t, ns)
	got, ended := holdOpen(t, ln)
	f := forward(t, ns, ln.Addr().String())
	c := dialHost(t, f.Addr())
	_, err = c.Write([]byte("x"))
	require.NoError(t, err)
	<-got // relayed: the connection inside exists

	require.NoError(t, f.Close())
	_, err = io.ReadAll(c)
	assert.NoError(t, err, "the host side ends (EOF) on Close")
	assert.NoError(t, <-ended, "the side inside ends (EOF) on Close")
	_, err = net.Dial("tcp", f.Addr().String())
	assert.Error(t, err, "the forwarder still listens after Close")
	assert.NoError(t, f.Close(), "a second Close")
}

// Only a loopback IP is accepted on the host side, and only an IP inside
// (no root needed: nothing listens before the checks).
func TestForwardRefuses(t *testing.T) {
	ns := &Namespace{name: Prefix + "none", path: "/run/netns/" + Prefix + "none"}
	for _, host := range []string{"0.0.0.0:0", ":0", "[::]:0", "localhost:0", "198.18.0.2:0", "192.0.2.1:8080"} {
		_, err := ns.Forward(host, "127.0.0.1:6443")
		assert.EqualError(t, err, `forwarding to network namespace nri-cluster-none: host address "`+host+`": want a loopback IP address, such as 127.0.0.1:0`)
	}
	_, err := ns.Forward("127.0.0.1:0", "localhost:6443")
	assert.ErrorContains(t, err, "the host must be an IP address")
}
