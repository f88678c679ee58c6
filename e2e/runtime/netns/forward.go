package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
)

// Forwarder relays TCP connections from the host's loopback to an address
// inside a namespace; Close stops it.
type Forwarder struct {
	ns     *Namespace
	nsAddr string
	ln     net.Listener
	ctx    context.Context // ends dials in progress on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Forward listens on hostAddr, a loopback address of the host (e.g.
// "127.0.0.1:0"), and relays each connection to nsAddr inside the namespace
// (e.g. "127.0.0.1:6443"), so that kubectl on the host reaches the API
// server. Any other host address is refused: the forwarder would open the
// cluster to the network.
func (n *Namespace) Forward(hostAddr, nsAddr string) (*Forwarder, error) {
	if err := checkLoopback(hostAddr); err != nil {
		return nil, fmt.Errorf("forwarding to network namespace %s: %w", n.name, err)
	}
	if err := checkAddr("tcp", nsAddr); err != nil {
		return nil, fmt.Errorf("forwarding to network namespace %s: %w", n.name, err)
	}
	ln, err := net.Listen("tcp", hostAddr)
	if err != nil {
		return nil, fmt.Errorf("forwarding to network namespace %s: %w", n.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{ns: n, nsAddr: nsAddr, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func checkLoopback(hostAddr string) error {
	host, _, err := net.SplitHostPort(hostAddr)
	if err != nil {
		return err
	}
	if addr, err := netip.ParseAddr(host); err != nil || !addr.IsLoopback() {
		return fmt.Errorf("host address %q: want a loopback IP address, such as 127.0.0.1:0", hostAddr)
	}
	return nil
}

// Addr is the host address the forwarder listens on.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Close stops listening, closes the connections being relayed and returns
// once every goroutine of the forwarder has ended.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.cancel()
	err := f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		// Accept fails once Close closed the listener (or when the process
		// is out of descriptors, and relaying cannot go on anyway).
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.relay(c)
	}
}

// relay copies both ways between a host connection and a new one inside the
// namespace. When one side ends its writes, the other side's writes end too
// (half-close), so a client that shuts down its writing still reads the
// whole reply.
func (f *Forwarder) relay(client net.Conn) {
	defer f.wg.Done()
	defer client.Close()
	if !f.track(client) {
		return
	}
	defer f.untrack(client)
	upstream, err := f.ns.Dial(f.ctx, "tcp", f.nsAddr)
	if err != nil {
		return // the client sees its connection closed, as if refused
	}
	defer upstream.Close()
	if !f.track(upstream) {
		return
	}
	defer f.untrack(upstream)

	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); pipe(upstream, client) }()
	go func() { defer copies.Done(); pipe(client, upstream) }()
	copies.Wait()
}

// pipe copies src to dst, then half-closes dst; on an error (a reset, or
// Close) it closes both, so that the other direction ends too. Both ends are
// TCP: the listener's and Dial's.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil {
		err = dst.(*net.TCPConn).CloseWrite()
	}
	if err != nil {
		dst.Close()
		src.Close()
	}
}

// track registers c for Close; it is false once the forwarder is closed.
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}
