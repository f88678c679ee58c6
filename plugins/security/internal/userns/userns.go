// Package userns enforces the user-namespace policy: a container of a pod
// that policy says must run in a user namespace (the Kubernetes
// hostUsers: false) and has none is refused, and so is one that shares the
// host's network, PID or IPC namespace (KEP-127: a user namespace that
// shares those with the host isolates little) unless the policy allows that
// one. NRI cannot create uid/gid mappings, so the plugin can only refuse,
// never add one.
package userns

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/security/config"
	"github.com/nri-suite/nri-suite/plugins/security/internal/hostns"
)

// userType is the OCI type of a user namespace.
const userType = "user"

// namespacesOf are the container's OCI namespaces or, for a runtime that
// does not pass a container's, its pod sandbox's.
func namespacesOf(pod *api.PodSandbox, ctr *api.Container) []*api.LinuxNamespace {
	if namespaces := ctr.GetLinux().GetNamespaces(); namespaces != nil {
		return namespaces
	}
	return pod.GetLinux().GetNamespaces()
}

// Has reports whether the container runs in a user namespace.
func Has(pod *api.PodSandbox, ctr *api.Container) bool {
	for _, ns := range namespacesOf(pod, ctr) {
		if ns.GetType() == userType {
			return true
		}
	}
	return false
}

// Check returns an error saying why the container may not run when policy
// requires a user namespace for its pod (by namespace, or by the pod's
// runtime handler) and it has none, or shares a host namespace that policy
// does not allow; host tells the host's namespaces.
func Check(policy config.UserNamespaces, scope config.Scope, pod *api.PodSandbox, ctr *api.Container, host hostns.Host) error {
	why, required := policy.Required(scope)
	if !required {
		return nil
	}
	if !Has(pod, ctr) {
		return fmt.Errorf("%s, and the pod runs in the host's user namespace: set spec.hostUsers: false", why)
	}
	var fields []string
	for _, h := range config.HostNamespaces {
		if policy.HostAllowed(h.Type) {
			continue
		}
		for _, s := range hostns.Of(namespacesOf(pod, ctr), []string{h.Type}, host) {
			fields = append(fields, fmt.Sprintf("%s: true (%s namespace: %s)", h.Field, h.Type, s.Why))
		}
	}
	if len(fields) > 0 {
		return fmt.Errorf("%s, and a pod with one may not share the host's namespaces: %s "+
			"(user-namespaces.allow-host-namespaces lists those that may be shared)", why, strings.Join(fields, ", "))
	}
	return nil
}
