// Package profile chooses the seccomp profile of a container being created:
// a named profile when the pod's annotations ask for one, the runtime
// default when the container would otherwise run unconfined (unless policy
// exempts its pod), nothing when the runtime already confines it, and what
// seccomp.privileged says for a privileged container. It is pure: building
// the profile is the seccomp store's job.
package profile

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// AnnotationKey selects a named profile:
// seccomp.nri-suite.io/container.<name> beats seccomp.nri-suite.io/pod beats
// seccomp.nri-suite.io.
const AnnotationKey = "seccomp.nri-suite.io"

// Choice is what to do about one container's seccomp profile.
type Choice struct {
	// Apply is false when the container keeps what the runtime gave it.
	Apply bool
	// Profile is the named profile, "" for the runtime default.
	Profile string
	// Annotation is the key that named Profile.
	Annotation string
	// Exempt is true when policy lets the container run unconfined.
	Exempt bool
	// Complain applies the profile with the log action instead of errors.
	Complain bool
	// Reason says why, for the decision's log line; it is "privileged"
	// for a privileged container left unconfined by seccomp.privileged.
	Reason string
}

// ReasonPrivileged is the Reason of a privileged container left as the
// runtimes leave it.
const ReasonPrivileged = "privileged"

// Choose decides for the container ctr of pod, named id, in scope;
// privileged says whether the runtime made it privileged (package
// privileged). A present but empty annotation, one naming a profile its
// namespace may not name, and a privileged container where policy refuses
// them are errors.
//
// The order: a privileged container where seccomp.privileged is refuse is
// refused; a profile named by annotation is applied; a privileged container
// is left unconfined unless seccomp.privileged is profile (the runtimes
// confine no privileged container, whatever it asked for, so it is never
// "already confined"); a container the runtime confines keeps its profile;
// an exempt pod stays unconfined; everything else gets the default.
func Choose(cfg config.Seccomp, scope config.Scope, id k8s.Identity, pod *api.PodSandbox, ctr *api.Container, privileged bool) (Choice, error) {
	complain := cfg.Complain.Matches(scope)
	onPrivileged := cfg.Privileged.For(scope)
	if privileged && onPrivileged == config.PrivilegedRefuse {
		return Choice{}, fmt.Errorf("the container is privileged, and seccomp.privileged is refuse for %s", describe(scope))
	}
	value, key, named, err := k8s.NewAnnotations(pod.GetAnnotations(), id.Container).Lookup(AnnotationKey)
	if err != nil {
		return Choice{}, err
	}
	if named {
		name := strings.TrimSpace(value)
		switch {
		case name == "":
			return Choice{}, &k8s.AnnotationError{Key: key, Value: value, Want: "the name of a profile in the profile directory"}
		case cfg.ProfileDir == "":
			return Choice{}, &k8s.AnnotationError{Key: key, Value: value,
				Want: "no profile name: the plugin has no seccomp.profile-dir to find it in"}
		case !cfg.MayName(scope.Namespace, name):
			return Choice{}, &k8s.AnnotationError{Key: key, Value: value,
				Want: fmt.Sprintf("a profile that seccomp.namespace-profiles lets namespace %s name", quote.Value(scope.Namespace))}
		}
		return Choice{Apply: true, Profile: name, Annotation: key, Complain: complain, Reason: "named by annotation " + key}, nil
	}
	if privileged {
		if onPrivileged == config.PrivilegedUnconfined {
			return Choice{Exempt: true, Reason: ReasonPrivileged}, nil
		}
		return Choice{Apply: true, Complain: complain, Reason: "privileged, and seccomp.privileged is profile"}, nil
	}
	if current := Confinement(ctr); current != "" {
		return Choice{Reason: "already confined: " + current}, nil
	}
	if cfg.Exempt.Matches(scope) {
		return Choice{Exempt: true, Reason: "exempt by seccomp.exempt"}, nil
	}
	return Choice{Apply: true, Complain: complain, Reason: "would run unconfined"}, nil
}

// describe names a scope for a message: its runtime handler, if any, and
// its namespace.
func describe(scope config.Scope) string {
	if scope.RuntimeHandler != "" {
		return fmt.Sprintf("runtime handler %q in namespace %q", scope.RuntimeHandler, scope.Namespace)
	}
	return fmt.Sprintf("namespace %q", scope.Namespace)
}

// Confinement describes the seccomp confinement the runtime gives ctr, ""
// when it gives none: no OCI seccomp policy and a profile (from the kubelet's
// CRI request) that is unconfined or absent. A runtime that passes neither
// field (older NRI) shows every container as unconfined.
func Confinement(ctr *api.Container) string {
	lnx := ctr.GetLinux()
	if p := lnx.GetSeccompPolicy(); p != nil {
		return fmt.Sprintf("OCI seccomp policy with default action %s", p.GetDefaultAction())
	}
	switch prof := lnx.GetSeccompProfile(); prof.GetProfileType() {
	case api.SecurityProfile_RUNTIME_DEFAULT:
		if prof != nil {
			return "profile RuntimeDefault"
		}
	case api.SecurityProfile_LOCALHOST:
		return "profile Localhost " + prof.GetLocalhostRef()
	}
	return ""
}
