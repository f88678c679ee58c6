package config

import (
	"fmt"
	"slices"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

// HostNamespace is a namespace a pod may share with the host, by its
// OCI type, with the pod field that asks for it.
type HostNamespace struct {
	Type  string // OCI namespace type: network, pid, ipc
	Field string // the pod spec field: hostNetwork, hostPID, hostIPC
}

// HostNamespaces are the host namespaces a Kubernetes pod can ask for.
var HostNamespaces = []HostNamespace{
	{Type: "network", Field: "hostNetwork"},
	{Type: "pid", Field: "hostPID"},
	{Type: "ipc", Field: "hostIPC"},
}

func hostNamespaceTypes() []string {
	types := make([]string, len(HostNamespaces))
	for i, h := range HostNamespaces {
		types[i] = h.Type
	}
	return types
}

// UserNamespaces is the user-namespace policy: a pod in one of Namespaces,
// or run by one of RuntimeHandlers, must have a user namespace, and may not
// share the host's network, PID or IPC namespace unless AllowHost lists it
// (KEP-127's rule; KEP-5607 lets hostNetwork pods have user namespaces,
// hence "network" may be allowed).
type UserNamespaces struct {
	Namespaces []string `yaml:"namespaces"`
	// RuntimeHandlers are matched against the pod's runtime handler, the
	// handler of its RuntimeClass: that is what NRI carries, not the
	// RuntimeClass name.
	RuntimeHandlers []string `yaml:"runtime-handlers"`
	// AllowHost are the host namespaces (network, pid, ipc) such pods may
	// still share.
	AllowHost []string `yaml:"allow-host-namespaces"`
}

func (u UserNamespaces) check(handlers []string) error {
	for _, ns := range u.Namespaces {
		if err := k8s.CheckNamespace("user-namespaces.namespaces", ns); err != nil {
			return err
		}
	}
	for _, h := range u.RuntimeHandlers {
		if err := declaredHandler(handlers)("user-namespaces.runtime-handlers", h); err != nil {
			return err
		}
	}
	for _, t := range u.AllowHost {
		if !slices.Contains(hostNamespaceTypes(), t) {
			return fmt.Errorf("user-namespaces.allow-host-namespaces: %s: expected one of %s", quote.Value(t), listOrNone(hostNamespaceTypes()))
		}
	}
	return nil
}

// Required says why a pod must have a user namespace; ok is false when it
// need not.
func (u UserNamespaces) Required(scope Scope) (why string, ok bool) {
	if scope.RuntimeHandler != "" && slices.Contains(u.RuntimeHandlers, scope.RuntimeHandler) {
		return fmt.Sprintf("runtime handler %q requires a user namespace (hostUsers: false)", scope.RuntimeHandler), true
	}
	if slices.Contains(u.Namespaces, scope.Namespace) {
		return fmt.Sprintf("namespace %q requires a user namespace (hostUsers: false)", scope.Namespace), true
	}
	return "", false
}

// HostAllowed reports whether pods that need a user namespace may share the
// host's namespace of type nsType.
func (u UserNamespaces) HostAllowed(nsType string) bool { return slices.Contains(u.AllowHost, nsType) }
