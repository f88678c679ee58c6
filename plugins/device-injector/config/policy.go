package config

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/nri-suite/nri-suite/common/quote"
)

// ErrDenied is wrapped by every refusal of the policy.
var ErrDenied = errors.New("denied by policy")

// Rule is what the pods of one namespace may ask for: path.Match patterns
// on a CDI name's "vendor/class", on a device node's host path and on a
// mount's host source. Safe default: every CDI device, no host device path
// and no host mount, since those reach anything on the host.
type Rule struct {
	CDI          []string
	DevicePaths  []string
	MountSources []string
}

// Policy is the default rule and the rules of the namespaces that have one.
type Policy struct {
	Default    Rule
	Namespaces map[string]Rule
}

// For returns the rule of namespace.
func (p Policy) For(namespace string) Rule {
	if r, ok := p.Namespaces[namespace]; ok {
		return r
	}
	return p.Default
}

// AllowCDI checks a fully qualified CDI name (vendor.com/class=name).
func (r Rule) AllowCDI(namespace, name string) error {
	vendor, class, _, err := parser.ParseQualifiedName(name)
	if err != nil {
		return fmt.Errorf("check CDI device %s: %w", quote.Value(name), quote.Error(err))
	}
	return allow(namespace, "CDI device "+quote.Bare(name), vendor+"/"+class, r.CDI, "policy.cdi")
}

// AllowDevicePath checks the host path of a device node.
func (r Rule) AllowDevicePath(namespace, hostPath string) error {
	return allow(namespace, "device "+quote.Bare(hostPath), hostPath, r.DevicePaths, "policy.device-paths")
}

// AllowMountSource checks the host source of a mount.
func (r Rule) AllowMountSource(namespace, source string) error {
	return allow(namespace, "mount source "+quote.Bare(source), source, r.MountSources, "policy.mount-sources")
}

func allow(namespace, what, subject string, patterns []string, key string) error {
	for _, pat := range patterns {
		// Patterns were checked at load: Match cannot fail here.
		if ok, _ := path.Match(pat, subject); ok {
			return nil
		}
	}
	allowed := "nothing"
	if len(patterns) > 0 {
		allowed = strings.Join(patterns, ", ")
	}
	return fmt.Errorf("%w: %s in namespace %s: %s allows %s", ErrDenied, what, namespace, key, allowed)
}
