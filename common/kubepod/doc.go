// Package kubepod turns a kubelet-style Pod manifest into what a container
// runtime sees of it: the CRI sandbox and container configurations the
// kubelet computes (QoS class, cgroup parent, CPU shares and quota, memory
// limit, OOM score adjustment, hugepage limits, labels, annotations, start
// order) and the OCI specs and NRI objects that containerd's CRI plugin builds
// from them.
//
// The same manifests run as static pods on a real node, so a harness test and
// a real-node test of one scenario start from one file. The package has no
// test-only dependencies; a plugin's offline simulator may use it as well.
package kubepod
