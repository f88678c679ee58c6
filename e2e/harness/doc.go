// Package harness runs NRI plugins inside an in-process container runtime:
// the runtime side of NRI (github.com/containerd/nri/pkg/adaptation, the code
// containerd runs) on a private socket, driving the real plugin binaries,
// external or pre-registered, with pods converted from kubelet-style
// manifests the way the kubelet and containerd's CRI plugin convert them
// (package common/kubepod).
//
// The runtime keeps every live pod and container with its OCI spec. It
// applies each adjustment and update the plugins return with NRI's own spec
// generator (pkg/runtime-tools/generate, as containerd does), answers
// Synchronize with the live state, and can be restarted on the same socket
// with the same containers. Tests assert on the resulting specs.
//
// A test package that starts plugins needs
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// so that plugin binaries are built once per test binary and removed after.
package harness
