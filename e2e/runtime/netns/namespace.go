package netns

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Prefix starts the name of every namespace this package creates, so that
// Sweep can find what a crashed run left and nothing else.
const Prefix = "nri-cluster-"

// RunDir is where `ip netns add` bind-mounts named namespaces; the first
// one on a host makes it, as a mount of itself.
const RunDir = "/run/netns"

// Config is the node's side of the namespace.
type Config struct {
	// Interface is the name of the node's interface (e.g. "node0"), which
	// carries Address: the node IP that the API server advertises and the
	// kubelet reports, since without a default route neither can pick one.
	// Its veth peer, Interface+"-peer", is inside too.
	Interface string
	// Address is the node IP with its prefix length, e.g. 198.18.0.2/24.
	Address *net.IPNet
	// Routes go out of Interface: the cluster's Service range, so that a
	// process on the node's network (a host-network pod, as a node's
	// agents are) reaches a Service's address, which kube-proxy translates
	// on the way out; without a route the kernel refuses to send before
	// kube-proxy's rules see the packet.
	Routes []*net.IPNet
}

// Namespace is a named network namespace; Close deletes it.
type Namespace struct {
	name string
	path string

	mu     sync.Mutex
	closed bool
}

// nodeSysctls are the per-namespace settings a node needs: the CNI bridge
// plugin forwards between pods and wants ip_forward on.
var nodeSysctls = map[string]string{
	"net/ipv4/ip_forward": "1",
}

// Create makes the network namespace name (which must start with Prefix)
// with lo up, cfg's interface and address up, cfg's routes and no default
// route, and nodeSysctls set. On failure nothing of it is left.
//
// The node's interface is one end of a veth pair whose other end is inside
// too, without an address: what is sent on it ends there. A dummy interface
// would do the same alone, but kernels built without CONFIG_DUMMY have none,
// while veth is what the CNI bridge plugin gives every pod, so a host that
// can run the cluster has it.
//
// It uses `ip netns add` rather than unshare and a bind mount of its own:
// iproute2 already makes /run/netns a shared mount, so that the namespace's
// bind mount is seen from other mount namespaces too, and the namespace is
// then one that `ip netns list` and `ip -n` know; unshare would also cost a
// locked thread that is never given back to Go.
func Create(name string, cfg Config) (*Namespace, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("creating network namespace: %w", err)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	if err := ip("netns", "add", name); err != nil {
		return nil, fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	n := &Namespace{name: name, path: filepath.Join(RunDir, name)}
	if err := n.setUp(cfg); err != nil {
		return nil, errors.Join(fmt.Errorf("setting up network namespace %s: %w", name, err), n.Close())
	}
	return n, nil
}

func (n *Namespace) setUp(cfg Config) error {
	peer := cfg.Interface + "-peer"
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", cfg.Interface, "type", "veth", "peer", "name", peer},
		{"addr", "add", cfg.Address.String(), "dev", cfg.Interface},
		// Up at both ends, for carrier: the interface looks like a node's NIC.
		{"link", "set", peer, "up"},
		{"link", "set", cfg.Interface, "up"},
	} {
		if err := ip(append([]string{"-n", n.name}, args...)...); err != nil {
			return err
		}
	}
	for _, route := range cfg.Routes {
		if err := ip("-n", n.name, "route", "add", route.String(), "dev", cfg.Interface); err != nil {
			return err
		}
	}
	// /proc/sys/net shows the namespace of the thread that opens it.
	return n.inside(func() error {
		for key, value := range nodeSysctls {
			if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
				return fmt.Errorf("setting %s: %w", strings.ReplaceAll(key, "/", "."), err)
			}
		}
		return nil
	})
}

// Name is the namespace's name, as `ip netns` knows it.
func (n *Namespace) Name() string { return n.name }

// Path is the namespace's bind mount, /run/netns/<name>.
func (n *Namespace) Path() string { return n.path }

// Close deletes the namespace; its interfaces go with it once no
// process is left inside (a process inside keeps it alive, unnamed), so stop
// those first. Closing again, or after Sweep, does nothing.
func (n *Namespace) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if err := remove(n.name); err != nil {
		return fmt.Errorf("deleting network namespace %s: %w", n.name, err)
	}
	n.closed = true
	return nil
}

// remove deletes the named namespace unless it is already gone.
func remove(name string) error {
	if _, err := os.Lstat(filepath.Join(RunDir, name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return ip("netns", "delete", name)
}

func checkName(name string) error {
	if !strings.HasPrefix(name, Prefix) || name == Prefix || strings.ContainsRune(name, '/') {
		return fmt.Errorf("name %q: want %s followed by a name without a slash", name, Prefix)
	}
	return nil
}

func (cfg Config) check() error {
	if cfg.Interface == "" || cfg.Address == nil {
		return errors.New("config needs an interface and an address")
	}
	// net.ParseCIDR's *IPNet holds the network, not the host: catch it here
	// rather than as a node with the wrong IP.
	if ones, bits := cfg.Address.Mask.Size(); ones < bits-1 && cfg.Address.IP.Equal(cfg.Address.IP.Mask(cfg.Address.Mask)) {
		return fmt.Errorf("address %s is the network's own address, not a host's", cfg.Address)
	}
	return nil
}

// ip runs iproute2's ip, with its output in the error.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
