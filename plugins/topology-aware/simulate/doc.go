// Package simulate is the `nri-topology-aware simulate` subcommand: it runs a
// workload (pods created, resized and deleted, plugin restarts) through the
// plugin's own path on any machine's topology and reports where every
// container would run and why, so that operators can plan capacity and
// check a configuration before they deploy it.
//
// The path is the plugin's: pod manifests are converted as the kubelet and
// containerd convert them (common/kubepod: QoS class, shares, quota, cgroup
// parent, labels, annotations), the NRI objects are described to the policy
// as the plugin describes them (annotations, hugepages, devices located in
// sysfs), and the policy places them (Allocate, Resize, Release, and Snapshot
// + Restore for a restart). After every step the policy's invariants are
// checked and every container must run where the policy placed it.
package simulate
