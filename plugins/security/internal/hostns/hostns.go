// Package hostns tells which of the host's namespaces a container shares.
// The runtimes say it differently: CRI-O leaves a host namespace out of the
// container's namespace list, containerd lists the pod sandbox's namespace
// by path, which for a hostNetwork pod is the host's (measured on
// containerd v2.4.2 and CRI-O v1.34.0). So a namespace is the host's when
// it is missing from the list, or when its path is the same nsfs inode as
// the host's.
package hostns

import (
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"
)

// Host tells whether a namespace path is one of the host's.
type Host interface {
	IsHost(nsType, path string) (bool, error)
}

// Shared is one of the host's namespaces a container shares, or may share.
type Shared struct {
	Type string
	// Why says how it was told: missing from the list, or a path that is
	// the host's or cannot be checked.
	Why string
	// Err is set when the path could not be checked: the caller treats
	// the namespace as the host's (fail closed) and says why.
	Err error
}

func (s Shared) String() string { return fmt.Sprintf("%s (%s)", s.Type, s.Why) }

// errNoNamespaces: a container always has a mount namespace of its own, so
// an empty list says that the runtime passed none, not that it shares all.
var errNoNamespaces = errors.New("the runtime passed no namespaces for the container")

// Of returns those of types (OCI namespace types: network, pid, ipc) that
// the container with namespaces shares with the host.
func Of(namespaces []*api.LinuxNamespace, types []string, host Host) []Shared {
	var out []Shared
	for _, typ := range types {
		ns := find(namespaces, typ)
		switch {
		case len(namespaces) == 0:
			out = append(out, Shared{Type: typ, Why: "cannot tell: " + errNoNamespaces.Error(), Err: errNoNamespaces})
		case ns == nil:
			out = append(out, Shared{Type: typ, Why: "no namespace of its own"})
		case ns.GetPath() != "":
			isHost, err := host.IsHost(typ, ns.GetPath())
			if err != nil {
				out = append(out, Shared{Type: typ, Why: fmt.Sprintf("cannot tell whether %s is the host's: %v", ns.GetPath(), err), Err: err})
			} else if isHost {
				out = append(out, Shared{Type: typ, Why: "joins the host's at " + ns.GetPath()})
			}
		}
	}
	return out
}

func find(namespaces []*api.LinuxNamespace, typ string) *api.LinuxNamespace {
	for _, ns := range namespaces {
		if ns.GetType() == typ {
			return ns
		}
	}
	return nil
}
