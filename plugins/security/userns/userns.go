// Package userns enforces the user-namespace policy: a container of a pod
// that policy says must run in a user namespace (the Kubernetes
// hostUsers: false) and has none is refused. NRI cannot create uid/gid
// mappings, so the plugin can only refuse, never add one.
package userns

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// userType is the OCI type of a user namespace.
const userType = "user"

// Has reports whether the container runs in a user namespace: its own OCI
// namespaces list one, or, for a runtime that does not pass a container's
// namespaces, its pod's sandbox does.
func Has(pod *api.PodSandbox, ctr *api.Container) bool {
	namespaces := ctr.GetLinux().GetNamespaces()
	if namespaces == nil {
		namespaces = pod.GetLinux().GetNamespaces()
	}
	for _, ns := range namespaces {
		if ns.GetType() == userType {
			return true
		}
	}
	return false
}

// Check returns an error saying why the container may not run when policy
// requires a user namespace for its pod (by namespace, or by the pod's
// runtime handler) and it has none.
func Check(policy config.UserNamespaces, namespace string, pod *api.PodSandbox, ctr *api.Container) error {
	why, required := policy.Required(namespace, pod.GetRuntimeHandler())
	if !required || Has(pod, ctr) {
		return nil
	}
	return fmt.Errorf("%s, and the pod runs in the host's user namespace: set spec.hostUsers: false", why)
}
