// Package runtime runs a real Kubernetes node for end-to-end tests of NRI
// plugins: a container runtime (containerd or CRI-O) with runc, NRI and CDI
// on private sockets and directories, and a standalone kubelet that runs
// static pods from a manifest directory. Tests that make pods through raw
// CRI run without the kubelet (Options.NoKubelet): a kubelet stops every pod
// it did not create. With Options.Cluster the node joins a control plane of
// its own (etcd, kube-apiserver, kube-controller-manager, kube-scheduler;
// cluster.go, controlplane.go), kube-proxy gives its pods the cluster's
// Services, and everything runs in a network namespace
// the sandbox creates (package netns), with certificates from package pki.
//
// External plugins (Sandbox.StartPlugin) each get a directory in the run dir,
// <run dir>/plugins/<idx>-<name>, for their log, their configuration and,
// through PluginDir in PluginSpec.Args, whatever state they keep; they share
// <run dir>/shared as the node's shared state (--shared-dir), so that no
// plugin writes to the host's /run/nri-suite. With Options.Launch set to
// LaunchByRuntime, StartPlugin lays a plugin out as `make install` does and
// restarts the runtime, which launches it pre-registered: without flags, so
// it uses the host's /run/nri-suite and logs to /var/log/nri-suite, both
// recorded and removed like the kubelet's host directories (Variants runs a
// plugin's scenario both ways).
//
// Everything a sandbox starts lives under one run directory and one cgroup
// root, so that teardown can find it again by PID, mount point and cgroup,
// even after a crashed run (see SweepStale). Host-wide effects of the
// kubelet (sysctls, /var/log/containers, /var/lib/kubelet/device-plugins,
// /run/mount), and a temporary cgroup v1 hugetlb hierarchy for CRI-O, are
// recorded before it starts and undone afterwards; a host lock keeps two
// sandboxes on one machine from undoing each other's changes.
//
// The kubelet gets its own cgroup root, /nri-sandbox-<id> (pods live in
// /nri-sandbox-<id>/kubepods/...), so that a sandbox's cgroups are found by
// its run dir's name and never mixed with another kubelet's.
//
// The binaries and images come from the cache that tools/install.sh fills
// ($NRI_SUITE_CACHE, default /var/cache/nri-suite). Tests call NewForTest,
// which skips without root or without the cache, and fails instead when CI=true.
package runtime
