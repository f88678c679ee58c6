package harness

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// socketProxy is the runtime's public NRI socket. The adaptation serves on a
// private socket behind it because Adaptation.Stop leaves external plugins'
// connections open (containerd's exit closes them as the process dies); the
// proxy closes them all when the runtime stops, so that plugins see the
// runtime go away exactly as they do when containerd exits.
type socketProxy struct {
	listener net.Listener
	target   string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func listenProxy(public, target string) (*socketProxy, error) {
	os.Remove(public)
	l, err := net.Listen("unix", public)
	if err != nil {
		return nil, fmt.Errorf("listening on the NRI socket %s: %w", public, err)
	}
	p := &socketProxy{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *socketProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		upstream, err := net.Dial("unix", p.target)
		if err != nil {
			conn.Close()
			continue
		}
		if !p.track(conn, upstream) {
			return
		}
		p.wg.Add(2)
		go p.pipe(conn, upstream)
		go p.pipe(upstream, conn)
	}
}

// track registers a connection pair; it refuses once the proxy is closed.
func (p *socketProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies one direction; when either side ends, both are closed, as a
// dead peer would leave them.
func (p *socketProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	if p.conns != nil {
		delete(p.conns, dst)
		delete(p.conns, src)
	}
	p.mu.Unlock()
}

// close stops accepting, drops every connection and waits for the copiers.
func (p *socketProxy) close() {
	p.listener.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
