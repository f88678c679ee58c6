package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dial connects to addr from inside the namespace, e.g. to 127.0.0.1:6443
// there. It fits http.Transport.DialContext.
func (n *Namespace) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := checkAddr(network, addr); err != nil {
		return nil, fmt.Errorf("dialing in network namespace %s: %w", n.name, err)
	}
	var conn net.Conn
	err := n.inside(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s in network namespace %s: %w", addr, n.name, err)
	}
	return conn, nil
}

// Listen listens on addr inside the namespace.
func (n *Namespace) Listen(network, addr string) (net.Listener, error) {
	if err := checkAddr(network, addr); err != nil {
		return nil, fmt.Errorf("listening in network namespace %s: %w", n.name, err)
	}
	var ln net.Listener
	err := n.inside(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in network namespace %s: %w", addr, n.name, err)
	}
	return ln, nil
}

// checkAddr accepts TCP and UDP addresses whose host is empty or an IP: a
// name would be resolved by the Go resolver on other threads, in the host's
// namespace, so the lookup itself would leave.
func checkAddr(network, addr string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return fmt.Errorf("network %q: want tcp or udp", network)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("address %q: the host must be an IP address, not a name", addr)
	}
	return nil
}

// inside runs fn on an OS thread switched into the namespace; a socket fn
// creates stays in the namespace after the thread switches back.
//
// fn runs on a goroutine of its own, so that a thread that fails to switch
// back, and stays locked, ends with that goroutine rather than running the
// caller, or any other goroutine, in the wrong namespace.
func (n *Namespace) inside(fn func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- n.onThread(fn) }()
	return <-errc
}

func (n *Namespace) onThread(fn func() error) error {
	target, err := unix.Open(n.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", n.path, err)
	}
	defer unix.Close(target)
	runtime.LockOSThread()
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening the thread's own network namespace: %w", err)
	}
	defer unix.Close(own)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the namespace: %w", err)
	}
	fnErr := fn()
	if err := unix.Setns(own, unix.CLONE_NEWNET); err != nil {
		// Still locked: Go ends the thread when the goroutine returns.
		return errors.Join(fnErr, fmt.Errorf("switching the thread back to its own network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}
