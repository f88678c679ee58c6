// Package config is the security plugin's YAML configuration: the mode of
// every rule (enforce, audit or off, overridable per namespace), where the
// seccomp profiles are and who is exempt or in complain mode, which pods
// must run in a user namespace, and what the validator lets other plugins
// do. It is decoded strictly (an unknown key is an error naming it) and
// checked at load; errors name the key, the value and what was expected.
// Keys and defaults are documented in the plugin's README.md.
package config

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/security/seccomp"
)

// Rule names one check the plugin makes.
type Rule string

// The rules. The first two act in CreateContainer on the container being
// created; the others judge, in ValidateContainerAdjustment, what the other
// plugins did to it.
const (
	// RuleSeccomp confines containers: the runtime default profile for one
	// that would run unconfined, a named profile when annotated.
	RuleSeccomp Rule = "seccomp"
	// RuleUserNamespace refuses a container without a user namespace in a
	// pod that policy says must have one.
	RuleUserNamespace Rule = "user-namespace"
	// RuleOCIHooks refuses OCI hooks from plugins not allowed to add them.
	RuleOCIHooks Rule = "oci-hooks"
	// RuleSeccompAdjustment refuses a seccomp policy from another plugin
	// that leaves the container unconfined or drops a deny-by-default.
	RuleSeccompAdjustment Rule = "seccomp-adjustment"
	// RuleHostNamespaces refuses namespace adjustments that remove a
	// namespace or join one of the host's.
	RuleHostNamespaces Rule = "host-namespaces"
	// RuleSysctls refuses sysctls outside the safe set.
	RuleSysctls Rule = "sysctls"
	// RuleDevices refuses devices outside the device policy.
	RuleDevices Rule = "devices"
	// RuleRequiredPlugins refuses containers when a required plugin is
	// not connected.
	RuleRequiredPlugins Rule = "required-plugins"
)

// ValidatorRules are the rules that judge other plugins' adjustments.
var ValidatorRules = []Rule{RuleOCIHooks, RuleSeccompAdjustment, RuleHostNamespaces, RuleSysctls,
	RuleDevices, RuleRequiredPlugins}

// Rules lists every rule, in the order the README documents them.
var Rules = append([]Rule{RuleSeccomp, RuleUserNamespace}, ValidatorRules...)

// Mode is what a rule does when it finds something.
type Mode string

const (
	// Enforce acts: confines, or refuses the container.
	Enforce Mode = "enforce"
	// Audit logs one line and counts the decision, and lets it through.
	Audit Mode = "audit"
	// Off skips the rule.
	Off Mode = "off"
)

// SafeSysctls are the sysctls Kubernetes considers safe (namespaced and
// isolated from the host and other pods): the validator allows plugins to set
// them without configuration.
var SafeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ping_group_range",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.tcp_wmem",
}

// File is the YAML document, key by key.
type File struct {
	// Rules sets the mode of each rule; a rule left out is enforced.
	Rules map[string]RuleFile `yaml:"rules"`
	// Seccomp is where profiles are and who gets which.
	Seccomp SeccompFile `yaml:"seccomp"`
	// UserNamespaces says which pods must run in a user namespace.
	UserNamespaces UserNamespaces `yaml:"user-namespaces"`
	// Validator is what other plugins may do.
	Validator ValidatorFile `yaml:"validator"`
}

// RuleFile is one rule's mode and its per-namespace overrides.
type RuleFile struct {
	Mode       string            `yaml:"mode"`
	Namespaces map[string]string `yaml:"namespaces"`
}

// SeccompFile is the seccomp key.
type SeccompFile struct {
	// ProfileDir holds the named profiles (<name>.json); empty: no named
	// profiles, only the runtime default.
	ProfileDir string `yaml:"profile-dir"`
	// Exempt pods keep running unconfined when they ask for it.
	Exempt Selector `yaml:"exempt"`
	// Complain pods get their profile with the log action instead of errors.
	Complain Selector `yaml:"complain"`
	// ExtraRules are merged into every profile the plugin applies; they are
	// checked when the seccomp store is built from them (Configure).
	ExtraRules []seccomp.Rule `yaml:"extra-rules"`
}

// Selector picks pods by namespace or by namespace/name.
type Selector struct {
	Namespaces []string `yaml:"namespaces"`
	Pods       []string `yaml:"pods"`
}

// UserNamespaces is the user-namespace policy: a pod in one of Namespaces,
// or run by one of RuntimeHandlers, must have a user namespace.
type UserNamespaces struct {
	Namespaces []string `yaml:"namespaces"`
	// RuntimeHandlers are matched against the pod's runtime handler, the
	// handler of its RuntimeClass: that is what NRI carries, not the
	// RuntimeClass name.
	RuntimeHandlers []string `yaml:"runtime-handlers"`
}

// ValidatorFile is the validator key.
type ValidatorFile struct {
	// HookPlugins may add OCI hooks (plugin names, without the index).
	HookPlugins []string `yaml:"hook-plugins"`
	// AllowedSysctls are allowed besides SafeSysctls; "prefix.*" allows a
	// subtree.
	AllowedSysctls []string `yaml:"allowed-sysctls"`
	// Devices is the device policy.
	Devices DevicePolicy `yaml:"devices"`
	// RequiredPlugins must be connected for any container to be created
	// (plugin names, without the index).
	RequiredPlugins []string `yaml:"required-plugins"`
}

// DevicePolicy says which devices other plugins may add: path.Match
// patterns matched against a device node's path ("/dev/fuse", "/dev/dri/*")
// or a CDI device name ("vendor.com/gpu=*").
type DevicePolicy struct {
	// Allowed applies to every plugin.
	Allowed []string `yaml:"allowed"`
	// Plugins adds patterns for the named plugins.
	Plugins map[string][]string `yaml:"plugins"`
}

// Config is the checked configuration.
type Config struct {
	modes          map[Rule]ruleModes
	Seccomp        SeccompFile
	UserNamespaces UserNamespaces
	Validator      ValidatorFile
}

type ruleModes struct {
	mode       Mode
	namespaces map[string]Mode
}

// Parse decodes data (from source, for messages) strictly and checks it.
// Empty data is the default configuration: every rule enforced, only the
// runtime default profile, no user-namespace requirement, no hooks, no
// devices, safe sysctls only.
func Parse(data []byte, source string) (*Config, error) {
	var f File
	if err := plugin.DecodeConfig(data, source, &f); err != nil {
		return nil, err
	}
	cfg, err := f.check()
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", source, err)
	}
	return cfg, nil
}

// Default is the configuration of an empty file.
func Default() *Config {
	cfg, _ := File{}.check() // the zero File is valid
	return cfg
}

func (f File) check() (*Config, error) {
	cfg := &Config{
		modes:          map[Rule]ruleModes{},
		Seccomp:        f.Seccomp,
		UserNamespaces: f.UserNamespaces,
		Validator:      f.Validator,
	}
	for _, r := range Rules {
		cfg.modes[r] = ruleModes{mode: Enforce}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Rules)) {
		if !slices.Contains(Rules, Rule(name)) {
			return nil, fmt.Errorf("rules: unknown rule %q: expected one of %s", name, ruleNames())
		}
		rm, err := f.Rules[name].check("rules." + name)
		if err != nil {
			return nil, err
		}
		cfg.modes[Rule(name)] = rm
	}
	for _, check := range []func() error{f.Seccomp.check, f.UserNamespaces.check, f.Validator.check} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func ruleNames() string {
	names := make([]string, len(Rules))
	for i, r := range Rules {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

func parseMode(key, value string) (Mode, error) {
	return plugin.OneOf(key, value, Enforce, Enforce, Audit, Off)
}

func (rf RuleFile) check(key string) (ruleModes, error) {
	mode, err := parseMode(key+".mode", rf.Mode)
	if err != nil {
		return ruleModes{}, err
	}
	rm := ruleModes{mode: mode, namespaces: map[string]Mode{}}
	for _, ns := range slices.Sorted(maps.Keys(rf.Namespaces)) {
		if err := checkNamespace(key+".namespaces", ns); err != nil {
			return ruleModes{}, err
		}
		if rf.Namespaces[ns] == "" {
			return ruleModes{}, fmt.Errorf("%s.namespaces.%s: empty mode: expected one of enforce, audit, off", key, ns)
		}
		if rm.namespaces[ns], err = parseMode(key+".namespaces."+ns, rf.Namespaces[ns]); err != nil {
			return ruleModes{}, err
		}
	}
	return rm, nil
}

func (s SeccompFile) check() error {
	if s.ProfileDir != "" && !filepath.IsAbs(s.ProfileDir) {
		return fmt.Errorf("seccomp.profile-dir: %q: expected an absolute path", s.ProfileDir)
	}
	if err := s.Exempt.check("seccomp.exempt"); err != nil {
		return err
	}
	if err := s.Complain.check("seccomp.complain"); err != nil {
		return err
	}
	// ExtraRules are checked against the node's syscall table by the
	// seccomp store the plugin builds from them.
	return nil
}

func (s Selector) check(key string) error {
	for _, ns := range s.Namespaces {
		if err := checkNamespace(key+".namespaces", ns); err != nil {
			return err
		}
	}
	for _, p := range s.Pods {
		ns, name, ok := strings.Cut(p, "/")
		if !ok || checkNamespace("", ns) != nil || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("%s.pods: %q: expected namespace/name", key, p)
		}
	}
	return nil
}

// Matches reports whether the pod name in namespace is selected.
func (s Selector) Matches(namespace, name string) bool {
	return slices.Contains(s.Namespaces, namespace) || slices.Contains(s.Pods, namespace+"/"+name)
}

func (u UserNamespaces) check() error {
	for _, ns := range u.Namespaces {
		if err := checkNamespace("user-namespaces.namespaces", ns); err != nil {
			return err
		}
	}
	for _, h := range u.RuntimeHandlers {
		if h == "" {
			return fmt.Errorf("user-namespaces.runtime-handlers: empty handler: expected a RuntimeClass handler name")
		}
	}
	return nil
}

func (v ValidatorFile) check() error {
	for key, names := range map[string][]string{
		"validator.hook-plugins": v.HookPlugins, "validator.required-plugins": v.RequiredPlugins,
		"validator.devices.plugins": slices.Collect(maps.Keys(v.Devices.Plugins)),
	} {
		for _, n := range names {
			if err := checkPluginName(key, n); err != nil {
				return err
			}
		}
	}
	for _, s := range v.AllowedSysctls {
		if err := checkSysctlPattern(s); err != nil {
			return err
		}
	}
	patterns := map[string][]string{"validator.devices.allowed": v.Devices.Allowed}
	for name, p := range v.Devices.Plugins {
		patterns["validator.devices.plugins."+name] = p
	}
	for key, list := range patterns {
		for _, p := range list {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return fmt.Errorf("%s: %q: expected a path.Match pattern such as /dev/fuse, /dev/dri/* or vendor.com/gpu=*", key, p)
			}
		}
	}
	return nil
}

// checkNamespace accepts a Kubernetes namespace name (an RFC 1123 label).
func checkNamespace(key, ns string) error {
	ok := ns != "" && len(ns) <= 63 && ns[0] != '-' && ns[len(ns)-1] != '-'
	for _, c := range ns {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	if !ok {
		return fmt.Errorf("%s: %q: expected a Kubernetes namespace name (lowercase letters, digits and '-')", key, ns)
	}
	return nil
}

// checkPluginName accepts an NRI plugin name: it is compared with the name
// part of "NN-name", so it must not carry the index.
func checkPluginName(key, name string) error {
	if name == "" || strings.ContainsAny(name, " /\t\n,") {
		return fmt.Errorf("%s: %q: expected a plugin name such as topology-aware (without its index)", key, name)
	}
	return nil
}

func checkSysctlPattern(s string) error {
	base := strings.TrimSuffix(s, ".*")
	if base == "" || strings.ContainsAny(base, "*/ ") || strings.HasPrefix(base, ".") || strings.HasSuffix(base, ".") {
		return fmt.Errorf("validator.allowed-sysctls: %q: expected a sysctl name such as net.ipv4.tcp_rmem, or a prefix ending in .*", s)
	}
	return nil
}

// Mode is the mode of rule for a pod in namespace.
func (c *Config) Mode(rule Rule, namespace string) Mode {
	rm := c.modes[rule]
	if m, ok := rm.namespaces[namespace]; ok {
		return m
	}
	if rm.mode == "" {
		return Enforce
	}
	return rm.mode
}

// Required says why a pod in namespace run by handler must
// have a user namespace; ok is false when it need not.
func (u UserNamespaces) Required(namespace, handler string) (why string, ok bool) {
	if slices.Contains(u.Namespaces, namespace) {
		return fmt.Sprintf("namespace %q requires a user namespace (hostUsers: false)", namespace), true
	}
	if handler != "" && slices.Contains(u.RuntimeHandlers, handler) {
		return fmt.Sprintf("runtime handler %q requires a user namespace (hostUsers: false)", handler), true
	}
	return "", false
}

// SysctlAllowed reports whether plugins may set the sysctl key.
func (v ValidatorFile) SysctlAllowed(key string) bool {
	if slices.Contains(SafeSysctls, key) {
		return true
	}
	for _, p := range v.AllowedSysctls {
		if p == key || strings.HasSuffix(p, ".*") && strings.HasPrefix(key, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// DeviceAllowed reports whether the plugin named plugin may add the device
// node path or CDI device name.
func (v ValidatorFile) DeviceAllowed(plugin, device string) bool {
	for _, p := range append(slices.Clone(v.Devices.Allowed), v.Devices.Plugins[plugin]...) {
		if ok, _ := path.Match(p, device); ok {
			return true
		}
	}
	return false
}
