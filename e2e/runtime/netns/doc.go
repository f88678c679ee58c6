// Package netns gives a test cluster a private network namespace: etcd,
// kube-apiserver, containerd, the kubelet and the pods run inside it (through
// Command), so that no cluster traffic leaves loopback or the namespace. The
// namespace has lo, an interface with the node's address (a veth pair
// with both ends inside) and no default route, so that an address outside
// it is unreachable rather than reached.
//
// Test code in the host namespace talks to the cluster through Dial and
// Listen, which make their sockets inside the namespace, and kubectl through
// Forward, which relays connections from the host's loopback.
//
// Namespaces are named Prefix+something and kept where iproute2 keeps them
// (/run/netns), so that `ip netns list` and `ip -n` see them and Sweep finds
// those a crashed run left.
package netns
