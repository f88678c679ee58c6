// Package annotations reads a pod's sidecar-order annotations into the spec
// that the plugin hands to the helpers (coord.Pod).
//
// Keys follow the suite's convention (<what>.nri-suite.io/container.<name> >
// <what>.nri-suite.io/pod > <what>.nri-suite.io), where <name> is a sidecar's
// name for the per-sidecar keys, so that one pod-level value can serve every
// sidecar and one sidecar can override it:
//
//	sidecar-order.nri-suite.io/sidecars: "proxy,log-agent"   start order
//	sidecar-order.nri-suite.io/mains: "app"                  optional
//	ready.sidecar-order.nri-suite.io/container.proxy: "tcp:127.0.0.1:15000"
//	ready-timeout.sidecar-order.nri-suite.io/container.proxy: "30s"
//	on-timeout.sidecar-order.nri-suite.io/container.proxy: "fail"
//	stop-after-mains.sidecar-order.nri-suite.io: "true"
//	hold-timeout.sidecar-order.nri-suite.io: "20s"
//	stop-grace.sidecar-order.nri-suite.io: "5s"
package annotations

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/coord"
)

// Keys. Sidecars and Mains are exact pod-level keys; the others are prefixes
// looked up with the suite's precedence.
const (
	Sidecars       = "sidecar-order.nri-suite.io/sidecars"
	Mains          = "sidecar-order.nri-suite.io/mains"
	Ready          = "ready.sidecar-order.nri-suite.io"
	ReadyTimeout   = "ready-timeout.sidecar-order.nri-suite.io"
	OnTimeout      = "on-timeout.sidecar-order.nri-suite.io"
	StopAfterMains = "stop-after-mains.sidecar-order.nri-suite.io"
	HoldTimeout    = "hold-timeout.sidecar-order.nri-suite.io"
	StopGrace      = "stop-grace.sidecar-order.nri-suite.io"
)

// Defaults of the optional keys.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultOnTimeout    = coord.OnTimeoutStart
	DefaultHoldTimeout  = 20 * time.Second
	DefaultStopGrace    = 5 * time.Second
)

// containerName is what Kubernetes accepts as a container name (a DNS label).
var containerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Parse returns the pod's spec, or nil when the pod has no sidecars
// annotation (the plugin leaves such pods alone). An error names the key,
// the value and what was expected.
func Parse(podAnnotations map[string]string) (*coord.Pod, error) {
	pod := k8s.NewAnnotations(podAnnotations, "")
	sidecars, ok, err := names(pod, Sidecars)
	if err != nil || !ok {
		return nil, err
	}
	if len(sidecars) == 0 {
		return nil, &k8s.AnnotationError{Key: Sidecars, Value: podAnnotations[Sidecars],
			Want: "a comma-separated list of one or more sidecar container names"}
	}
	mains, _, err := names(pod, Mains)
	if err != nil {
		return nil, err
	}
	for _, m := range mains {
		for _, s := range sidecars {
			if m == s {
				return nil, &k8s.AnnotationError{Key: Mains, Value: podAnnotations[Mains],
					Want: fmt.Sprintf("containers that are not sidecars, but %q is also in %s", m, Sidecars)}
			}
		}
	}

	p := &coord.Pod{Mains: mains, StopAfterMains: true,
		HoldTimeout: coord.Duration(DefaultHoldTimeout), StopGrace: coord.Duration(DefaultStopGrace)}
	if v, ok, err := pod.Bool(StopAfterMains); err != nil {
		return nil, err
	} else if ok {
		p.StopAfterMains = v
	}
	if err := duration(pod, HoldTimeout, &p.HoldTimeout); err != nil {
		return nil, err
	}
	if err := duration(pod, StopGrace, &p.StopGrace); err != nil {
		return nil, err
	}
	for _, name := range sidecars {
		s, err := parseSidecar(k8s.NewAnnotations(podAnnotations, name), name)
		if err != nil {
			return nil, err
		}
		p.Sidecars = append(p.Sidecars, s)
	}
	if err := unknownSidecarKeys(podAnnotations, sidecars); err != nil {
		return nil, err
	}
	return p, nil
}

// names parses a list of distinct container names.
func names(a k8s.Annotations, key string) ([]string, bool, error) {
	list, ok, err := a.List(key)
	if err != nil || !ok {
		return nil, ok, err
	}
	raw, _, _, _ := a.Lookup(key)
	seen := map[string]bool{}
	for _, n := range list {
		if !containerName.MatchString(n) {
			return nil, true, &k8s.AnnotationError{Key: key, Value: raw,
				Want: fmt.Sprintf("container names (lowercase letters, digits and '-', at most 63), but %q is not one", n)}
		}
		if seen[n] {
			return nil, true, &k8s.AnnotationError{Key: key, Value: raw,
				Want: fmt.Sprintf("distinct container names, but %q appears twice", n)}
		}
		seen[n] = true
	}
	return list, true, nil
}

func duration(a k8s.Annotations, key string, into *coord.Duration) error {
	v, ok, err := a.Duration(key)
	if err != nil {
		return err
	}
	if ok {
		*into = coord.Duration(v)
	}
	return nil
}

func parseSidecar(a k8s.Annotations, name string) (coord.Sidecar, error) {
	s := coord.Sidecar{Name: name, Ready: coord.Readiness{Kind: coord.ReadyProcess},
		Timeout: coord.Duration(DefaultReadyTimeout), OnTimeout: DefaultOnTimeout}
	raw, key, ok, err := a.Lookup(Ready)
	if err != nil {
		return s, err
	}
	if ok {
		r, err := ParseReadiness(raw)
		if err != nil {
			return s, &k8s.AnnotationError{Key: key, Value: raw, Want: err.Error()}
		}
		s.Ready = r
	}
	if err := duration(a, ReadyTimeout, &s.Timeout); err != nil {
		return s, err
	}
	if v, ok, err := a.OneOf(OnTimeout, coord.OnTimeoutStart, coord.OnTimeoutFail); err != nil {
		return s, err
	} else if ok {
		s.OnTimeout = v
	}
	return s, nil
}

// unknownSidecarKeys refuses a per-container key that names no sidecar: it
// is almost certainly a typo, and silently ignoring it would leave a sidecar
// with the default readiness.
func unknownSidecarKeys(podAnnotations map[string]string, sidecars []string) error {
	for key, value := range podAnnotations {
		for _, prefix := range []string{Ready, ReadyTimeout, OnTimeout} {
			name, ok := strings.CutPrefix(key, prefix+"/container.")
			if !ok {
				continue
			}
			known := false
			for _, s := range sidecars {
				known = known || s == name
			}
			if !known {
				return &k8s.AnnotationError{Key: key, Value: value,
					Want: fmt.Sprintf("a key for a sidecar listed in %s (%s), but %q is not listed", Sidecars, strings.Join(sidecars, ","), name)}
			}
		}
	}
	return nil
}

// readinessForms is what ParseReadiness accepts, for error messages.
const readinessForms = `one of "process", "file:<absolute path>", "tcp:<host>:<port>" or "exec:<absolute path> [args...]"`

// ParseReadiness parses a readiness spec: "process", "file:/run/ready",
// "tcp:127.0.0.1:15000" or "exec:/bin/check arg". An error says what was
// expected.
func ParseReadiness(s string) (coord.Readiness, error) {
	s = strings.TrimSpace(s)
	kind, rest, hasRest := strings.Cut(s, ":")
	switch kind {
	case coord.ReadyProcess:
		if hasRest {
			return coord.Readiness{}, fmt.Errorf(`%s ("process" takes no argument)`, readinessForms)
		}
		return coord.Readiness{Kind: kind}, nil
	case coord.ReadyFile:
		if !path.IsAbs(rest) || strings.ContainsAny(rest, " \t\n\x00") {
			return coord.Readiness{}, fmt.Errorf("%s (file needs an absolute path without spaces)", readinessForms)
		}
		return coord.Readiness{Kind: kind, Target: path.Clean(rest)}, nil
	case coord.ReadyTCP:
		host, port, err := net.SplitHostPort(rest)
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || host == "" || perr != nil || n == 0 || strings.ContainsAny(rest, " \t\n\x00") {
			return coord.Readiness{}, fmt.Errorf("%s (tcp needs host:port with a port from 1 to 65535)", readinessForms)
		}
		return coord.Readiness{Kind: kind, Target: net.JoinHostPort(host, port)}, nil
	case coord.ReadyExec:
		argv := strings.Fields(rest)
		if len(argv) == 0 || !path.IsAbs(argv[0]) || strings.ContainsRune(rest, 0) {
			return coord.Readiness{}, fmt.Errorf("%s (exec needs the absolute path of a program in the sidecar's image; there is no shell)", readinessForms)
		}
		return coord.Readiness{Kind: kind, Target: argv[0], Args: argv[1:]}, nil
	}
	return coord.Readiness{}, fmt.Errorf("%s", readinessForms)
}
