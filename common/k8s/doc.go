// Package k8s describes a container in Kubernetes terms from what NRI passes
// (api.PodSandbox, api.Container, api.LinuxResources), the same way on
// containerd and on CRI-O.
//
// NRI carries no Pod object: the kubelet's intent reaches the runtime only as
// CRI labels, annotations, a cgroup parent and Linux resources. This package
// recovers what the plugins need from those, and says where the recovery is
// an estimate:
//
//   - identity.go: pod name, namespace, uid and container name from the
//     kubelet's io.kubernetes.* labels, with a String and logrus fields form.
//   - qos.go: the pod's QoS class from the kubelet's cgroup naming (cgroupfs
//     and systemd drivers, containerd and CRI-O paths), falling back to the
//     container's resources.
//   - resources.go: CPU request and limit and memory request and limit
//     inverted from cpu shares, CFS quota/period and memory settings.
//   - annotations.go: the suite's annotation precedence
//     (<key>/container.<name> > <key>/pod > <key>), the refusal of values
//     above a size limit and of keys in none of those forms, and typed
//     parsers whose errors name the key, the value (a bounded prefix of it)
//     and what was expected; the domain of a key and whether a key is for
//     a given container.
//   - names.go: RFC 1123 labels, the form of namespace and container names,
//     and subdomains, the form of annotation key prefixes, for the configs
//     that name them.
//   - container.go: all of the above for one container in one call.
//
// Everything here is pure: no I/O, no global state.
package k8s
