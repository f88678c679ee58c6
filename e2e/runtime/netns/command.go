package netns

// Command returns an argv that runs argv inside the namespace.
//
// nsenter with only --net enters the network namespace and execs argv in
// place, so the PID the caller starts is argv's own and the mount namespace
// is the caller's. `ip netns exec` is not used: it unshares the mount
// namespace and remounts /sys, and the cluster's components must share
// mounts (volumes, cgroups, sockets) with the host and with each other.
func (n *Namespace) Command(argv []string) []string {
	return append([]string{"nsenter", "--net=" + n.path, "--"}, argv...)
}
