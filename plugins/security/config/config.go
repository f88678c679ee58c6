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
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Rule names one check the plugin makes.
type Rule string

// The rules. The first three act in CreateContainer on the container being
// created; the others judge, in ValidateContainerAdjustment, what the other
// plugins did to it (and, for host-namespaces, what the pod itself asks).
const (
	// RuleSeccomp confines containers: the runtime default profile for one
	// that would run unconfined, a named profile when annotated; and decides
	// about privileged containers (seccomp.privileged).
	RuleSeccomp Rule = "seccomp"
	// RuleTolerateMissingPlugins refuses a pod that opts out of the
	// runtime's required-plugins validator (the annotation
	// k8s.TolerateMissingPluginsAnnotation) where it may not: anywhere but
	// static pods and the namespaces where the rule is off (the suite's own).
	RuleTolerateMissingPlugins Rule = "tolerate-missing-plugins"
	// RuleUserNamespace refuses a container without a user namespace, or
	// sharing the host's network, PID or IPC namespace, in a pod that policy
	// says must have one.
	RuleUserNamespace Rule = "user-namespace"
	// RuleOCIHooks refuses OCI hooks from plugins not allowed to add them.
	RuleOCIHooks Rule = "oci-hooks"
	// RuleSeccompAdjustment refuses a seccomp policy from another plugin
	// that lets through what the runtime default denies.
	RuleSeccompAdjustment Rule = "seccomp-adjustment"
	// RuleHostNamespaces refuses namespace adjustments that remove a
	// namespace or join one of the host's, and pods that ask for the host's.
	RuleHostNamespaces Rule = "host-namespaces"
	// RuleSysctls refuses sysctls outside the safe set.
	RuleSysctls Rule = "sysctls"
	// RuleDevices refuses devices outside the device policy.
	RuleDevices Rule = "devices"
	// RuleDeviceCgroups refuses device-cgroup rules that open devices
	// outside the policy.
	RuleDeviceCgroups Rule = "device-cgroups"
	// RuleMounts refuses mounts of host sources outside the policy and of
	// kernel file systems that reach the host.
	RuleMounts Rule = "mounts"
	// RuleCgroupsPath refuses moving a container out of its pod's cgroup.
	RuleCgroupsPath Rule = "cgroups-path"
	// RuleOOMScoreAdj refuses lowering a container's OOM score adjustment.
	RuleOOMScoreAdj Rule = "oom-score-adj"
	// RuleEnv refuses environment variables that inject code (LD_PRELOAD).
	RuleEnv Rule = "env"
	// RuleRlimits refuses rlimits above their ceiling.
	RuleRlimits Rule = "rlimits"
	// RuleRequiredPlugins refuses containers when a required plugin is
	// not connected.
	RuleRequiredPlugins Rule = "required-plugins"
	// RuleAnnotatedPlugins refuses a container whose pod carries an
	// annotation that a plugin handles (validator.annotation-plugins) while
	// that plugin is not connected: the runtime would create the container
	// without what the annotation asks for.
	RuleAnnotatedPlugins Rule = "annotated-plugins"
	// RulePluginIdentity refuses containers while a plugin registers
	// under the name of one that policy trusts (or of this plugin).
	RulePluginIdentity Rule = "plugin-identity"
)

// ValidatorRules are the rules that judge other plugins' adjustments.
var ValidatorRules = []Rule{RuleOCIHooks, RuleSeccompAdjustment, RuleHostNamespaces, RuleSysctls,
	RuleDevices, RuleDeviceCgroups, RuleMounts, RuleCgroupsPath, RuleOOMScoreAdj, RuleEnv, RuleRlimits,
	RuleRequiredPlugins, RuleAnnotatedPlugins, RulePluginIdentity}

// Rules lists every rule, in the order the README documents them.
var Rules = append([]Rule{RuleSeccomp, RuleUserNamespace, RuleTolerateMissingPlugins}, ValidatorRules...)

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

var modes = vocabulary[Mode]{def: Enforce, allowed: []Mode{Enforce, Audit, Off}}

// File is the YAML document, key by key.
type File struct {
	// RuntimeHandlers declares the node's RuntimeClass handlers that the
	// other keys may name.
	RuntimeHandlers []string `yaml:"runtime-handlers"`
	// Rules sets the mode of each rule; a rule left out is enforced.
	Rules map[string]ScopedFile `yaml:"rules"`
	// Seccomp is where profiles are and who gets which.
	Seccomp SeccompFile `yaml:"seccomp"`
	// UserNamespaces says which pods must run in a user namespace.
	UserNamespaces UserNamespaces `yaml:"user-namespaces"`
	// Validator is what other plugins may do.
	Validator ValidatorFile `yaml:"validator"`
}

// Config is the checked configuration.
type Config struct {
	modes map[Rule]Scoped[Mode]
	// modeSet: the file set the rule's own mode, not only scoped ones.
	modeSet        map[Rule]bool
	Seccomp        Seccomp
	UserNamespaces UserNamespaces
	Validator      ValidatorFile
}

// Parse decodes data (from source, for messages) strictly and checks it.
// Empty data is the default configuration: every rule enforced, privileged
// containers unconfined, only the runtime default profile, no
// user-namespace requirement, no hooks, devices or mounts for other plugins,
// safe sysctls only.
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
	if err := checkHandlers(f.RuntimeHandlers); err != nil {
		return nil, err
	}
	cfg := &Config{modes: map[Rule]Scoped[Mode]{}, modeSet: map[Rule]bool{}, UserNamespaces: f.UserNamespaces, Validator: f.Validator}
	for _, r := range Rules {
		cfg.modes[r] = Scoped[Mode]{Default: Enforce}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Rules)) {
		if !slices.Contains(Rules, Rule(name)) {
			return nil, fmt.Errorf("rules: unknown rule %s: expected one of %s", quote.Value(name), ruleNames())
		}
		m, err := parseScoped(f.Rules[name], "rules."+name, f.RuntimeHandlers, modes)
		if err != nil {
			return nil, err
		}
		cfg.modes[Rule(name)] = m
		cfg.modeSet[Rule(name)] = f.Rules[name].Mode != ""
	}
	var err error
	if cfg.Seccomp, err = f.Seccomp.check(f.RuntimeHandlers); err != nil {
		return nil, err
	}
	if err := f.UserNamespaces.check(f.RuntimeHandlers); err != nil {
		return nil, err
	}
	if err := f.Validator.check(); err != nil {
		return nil, err
	}
	if err := cfg.contradictions(); err != nil {
		return nil, err
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

// contradictions refuses a rule turned off in a scope where another key of
// the same file asks that rule to act: whichever the author meant, one of
// the two is a mistake, and guessing would fail open or break pods.
func (c *Config) contradictions() error {
	type demand struct {
		rule      Rule
		key       string
		scopes    []string
		byHandler bool
	}
	nonDefault := func(s Scoped[Privileged], byHandler bool) []string {
		var out []string
		m := s.Namespaces
		if byHandler {
			m = s.RuntimeHandlers
		}
		for _, scope := range slices.Sorted(maps.Keys(m)) {
			if m[scope] != PrivilegedUnconfined {
				out = append(out, scope)
			}
		}
		return out
	}
	demands := []demand{
		{RuleUserNamespace, "user-namespaces.namespaces", c.UserNamespaces.Namespaces, false},
		{RuleUserNamespace, "user-namespaces.runtime-handlers", c.UserNamespaces.RuntimeHandlers, true},
		{RuleSeccomp, "seccomp.complain.namespaces", c.Seccomp.Complain.Namespaces, false},
		{RuleSeccomp, "seccomp.complain.runtime-handlers", c.Seccomp.Complain.RuntimeHandlers, true},
		{RuleSeccomp, "seccomp.privileged.namespaces", nonDefault(c.Seccomp.Privileged, false), false},
		{RuleSeccomp, "seccomp.privileged.runtime-handlers", nonDefault(c.Seccomp.Privileged, true), true},
	}
	// The map asks the rule to act on every pod: off may spare namespaces
	// and handlers, not all of them.
	if len(c.Validator.AnnotationPlugins) > 0 && c.modes[RuleAnnotatedPlugins].Default == Off {
		return fmt.Errorf("rules.%s.mode: off contradicts validator.annotation-plugins, which asks rule %[1]s to act: remove one of them",
			RuleAnnotatedPlugins)
	}
	for _, d := range demands {
		modes := c.modes[d.rule]
		scoped, kind := modes.Namespaces, "namespaces"
		if d.byHandler {
			scoped, kind = modes.RuntimeHandlers, "runtime-handlers"
		}
		for _, s := range d.scopes {
			mode, set := scoped[s]
			key := fmt.Sprintf("rules.%s.%s.%s", d.rule, kind, s)
			if !set {
				mode, key = modes.Default, fmt.Sprintf("rules.%s.mode", d.rule)
			}
			if mode == Off {
				return fmt.Errorf("%s: off contradicts %s, which asks rule %s to act in %s: remove one of them",
					key, d.key, d.rule, s)
			}
		}
	}
	return nil
}

// Mode is the mode of rule for a pod.
func (c *Config) Mode(rule Rule, scope Scope) Mode { return c.modes[rule].For(scope) }

// DefaultMode reports whether the mode of rule for a pod is the built-in
// default: neither the rule's mode nor one for the pod's namespace or
// runtime handler is set.
func (c *Config) DefaultMode(rule Rule, scope Scope) bool {
	_, explicit := c.ExplicitMode(rule, scope)
	return !explicit && !c.modeSet[rule]
}

// ExplicitMode is the mode of rule that the pod's runtime handler or
// namespace sets; ok is false when only the rule's default applies.
func (c *Config) ExplicitMode(rule Rule, scope Scope) (Mode, bool) {
	return c.modes[rule].Explicit(scope)
}
