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
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
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
					Want: fmt.Sprintf("containers that are not sidecars, but %s is also in %s", quote.Value(m), Sidecars)}
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
	if err := unknownKeys(podAnnotations, sidecars); err != nil {
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
	raw, matched, _, _ := a.Lookup(key)
	seen := map[string]bool{}
	for _, n := range list {
		if !k8s.IsDNSLabel(n) {
			return nil, true, &k8s.AnnotationError{Key: matched, Value: raw,
				Want: fmt.Sprintf("container names (lowercase letters, digits and '-', at most 63), but %s is not one", quote.Value(n))}
		}
		if seen[n] {
			return nil, true, &k8s.AnnotationError{Key: matched, Value: raw,
				Want: fmt.Sprintf("distinct container names, but %s appears twice", quote.Value(n))}
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

// domain is what the plugin owns: every key in it is one of the keys above.
const domain = "sidecar-order.nri-suite.io"

var (
	podKeys     = []string{Sidecars, Mains, StopAfterMains, HoldTimeout, StopGrace}
	sidecarKeys = []string{Ready, ReadyTimeout, OnTimeout}
)

// unknownKeys refuses, in key order so that the error is the same every
// time, a key of the plugin's domain that can never apply: almost certainly
// a typo, which silently ignored would leave a sidecar with the default
// readiness or timeout. Those are a key that is none of the plugin's (a
// misspelt readiness.sidecar-order.nri-suite.io), a container key of a
// pod-level key, and a container key for a name not listed in Sidecars (the
// list is the pod's, so that one is knowable). What k8s.Annotations refuses
// of each key's forms it refuses as the keys are read.
func unknownKeys(podAnnotations map[string]string, sidecars []string) error {
	for _, key := range slices.Sorted(maps.Keys(podAnnotations)) {
		if host, _, _ := strings.Cut(key, "/"); host != domain && !strings.HasSuffix(host, "."+domain) {
			continue
		}
		refuse := func(want string) error {
			return &k8s.AnnotationError{Key: key, Value: podAnnotations[key], Want: want}
		}
		base, name, isContainer := cutContainer(key)
		switch {
		case slices.Contains(sidecarKeys, base):
			if isContainer && !slices.Contains(sidecars, name) {
				return refuse(fmt.Sprintf("a key for a sidecar listed in %s (%s), but %s is not listed",
					Sidecars, strings.Join(sidecars, ","), quote.Value(name)))
			}
		case slices.Contains(podKeys, base):
			if isContainer {
				return refuse(fmt.Sprintf("%s or %s/pod: the key is for the whole pod", base, base))
			}
		default:
			return refuse(fmt.Sprintf("one of the plugin's keys: %s, or %s with /pod or /container.<sidecar>",
				strings.Join(podKeys, ", "), strings.Join(sidecarKeys, ", ")))
		}
	}
	return nil
}

// cutContainer splits <base>/container.<name>; any other key is its own base
// without its /pod form.
func cutContainer(key string) (base, name string, isContainer bool) {
	if i := strings.LastIndex(key, "/container."); i >= 0 {
		return key[:i], key[i+len("/container."):], true
	}
	return strings.TrimSuffix(key, "/pod"), "", false
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
