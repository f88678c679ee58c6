// Package profile chooses the seccomp profile of a container being created:
// a named profile when the pod's annotations ask for one, the runtime
// default when the container would otherwise run unconfined (unless policy
// exempts its pod), nothing when the runtime already confines it. It is
// pure: building the profile is the seccomp store's job.
package profile

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
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
	// Reason says why, for the decision's log line.
	Reason string
}

// Choose decides for the container ctr of pod, named id. A present but
// empty annotation is an error naming the key.
func Choose(cfg config.SeccompFile, id k8s.Identity, pod *api.PodSandbox, ctr *api.Container) (Choice, error) {
	complain := cfg.Complain.Matches(id.Namespace, id.Pod)
	value, key, named := k8s.NewAnnotations(pod.GetAnnotations(), id.Container).Lookup(AnnotationKey)
	if named {
		name := strings.TrimSpace(value)
		if name == "" {
			return Choice{}, &k8s.AnnotationError{Key: key, Value: value, Want: "the name of a profile in the profile directory"}
		}
		if cfg.ProfileDir == "" {
			return Choice{}, &k8s.AnnotationError{Key: key, Value: value,
				Want: "no profile name: the plugin has no seccomp.profile-dir to find it in"}
		}
		return Choice{Apply: true, Profile: name, Annotation: key, Complain: complain, Reason: "named by annotation " + key}, nil
	}
	if current := Confinement(ctr); current != "" {
		return Choice{Reason: "already confined: " + current}, nil
	}
	if cfg.Exempt.Matches(id.Namespace, id.Pod) {
		return Choice{Exempt: true, Reason: "exempt by seccomp.exempt"}, nil
	}
	return Choice{Apply: true, Complain: complain, Reason: "would run unconfined"}, nil
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
