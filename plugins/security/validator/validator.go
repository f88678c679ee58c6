// Package validator judges what the other NRI plugins did to a container
// before the runtime creates it: the merged adjustment of a
// ValidateContainerAdjustmentRequest, with the plugin that owns each field.
//
// NRI's builtin default validator can only refuse a whole kind of change
// (every OCI hook, every namespace change, every sysctl). This package looks
// at what was changed and by whom: hooks from plugins not allowed to add
// them, a seccomp policy that leaves the container unconfined or drops its
// deny-by-default, a namespace removed or joined from the host, sysctls
// outside the safe set, devices outside the policy, and required plugins
// that are not connected. It only reports findings; the caller decides, by
// each rule's mode, whether they refuse the container.
package validator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// Finding is one rule broken by one plugin.
type Finding struct {
	Rule config.Rule
	// Plugin is the offender as NRI names it ("50-e2e-test"); empty for
	// required-plugins, where nobody acted.
	Plugin string
	// Items are what it changed (hook paths, sysctl keys, device paths...).
	Items []string
	// Problem says what is wrong, for the rejection reason and the log.
	Problem string
}

// Count is the number of offending items.
func (f Finding) Count() int { return len(f.Items) }

// String is the finding as one clause of a rejection reason.
func (f Finding) String() string {
	who := "plugin " + f.Plugin
	if f.Plugin == "" {
		who = "node"
	}
	return fmt.Sprintf("rule %s: %s %s: %s", f.Rule, who, f.Problem, strings.Join(f.Items, ", "))
}

// HostNamespaces tells whether a namespace path is one of the host's.
type HostNamespaces interface {
	IsHost(nsType, path string) (bool, error)
}

// Validator checks adjustments against the validator configuration.
type Validator struct {
	cfg  config.ValidatorFile
	self string
	host HostNamespaces
}

// New returns a validator that exempts the plugin named self (the security
// plugin itself, whose own seccomp policies are checked when it makes them)
// and asks host about namespace paths.
func New(cfg config.ValidatorFile, self string, host HostNamespaces) *Validator {
	return &Validator{cfg: cfg, self: self, host: host}
}

// Check returns the findings of the rules enabled says to run, ordered by
// rule and plugin.
func (v *Validator) Check(req *api.ValidateContainerAdjustmentRequest, enabled func(config.Rule) bool) []Finding {
	checks := []struct {
		rule  config.Rule
		check func(*api.ValidateContainerAdjustmentRequest) []Finding
	}{
		{config.RuleOCIHooks, v.hooks},
		{config.RuleSeccompAdjustment, v.seccomp},
		{config.RuleHostNamespaces, v.namespaces},
		{config.RuleSysctls, v.sysctls},
		{config.RuleDevices, v.devices},
		{config.RuleRequiredPlugins, v.requiredPlugins},
	}
	var findings []Finding
	for _, c := range checks {
		if enabled(c.rule) {
			findings = append(findings, c.check(req)...)
		}
	}
	return findings
}

// PluginName is the name part of NRI's "NN-name".
func PluginName(qualified string) string {
	idx, name, ok := strings.Cut(qualified, "-")
	if !ok || idx == "" || strings.Trim(idx, "0123456789") != "" {
		return qualified
	}
	return name
}

func (v *Validator) isSelf(owner string) bool { return PluginName(owner) == v.self }

// collector groups offending items by plugin into one finding each.
type collector struct {
	rule     config.Rule
	problem  func(plugin string) string
	byPlugin map[string][]string
}

func newCollector(rule config.Rule, problem func(plugin string) string) *collector {
	return &collector{rule: rule, problem: problem, byPlugin: map[string][]string{}}
}

func (c *collector) add(plugin, item string) { c.byPlugin[plugin] = append(c.byPlugin[plugin], item) }

func (c *collector) findings() []Finding {
	var out []Finding
	for _, plugin := range slices.Sorted(maps.Keys(c.byPlugin)) {
		items := c.byPlugin[plugin]
		slices.Sort(items)
		out = append(out, Finding{Rule: c.rule, Plugin: plugin, Items: items, Problem: c.problem(plugin)})
	}
	return out
}

func (v *Validator) hooks(req *api.ValidateContainerAdjustmentRequest) []Finding {
	owners, claimed := req.GetOwners().HooksOwner(req.GetContainer().GetId())
	if !claimed {
		return nil
	}
	var paths []string
	h := req.GetAdjust().GetHooks()
	for _, list := range [][]*api.Hook{h.GetPrestart(), h.GetCreateRuntime(), h.GetCreateContainer(),
		h.GetStartContainer(), h.GetPoststart(), h.GetPoststop()} {
		for _, hook := range list {
			paths = append(paths, hook.GetPath())
		}
	}
	c := newCollector(config.RuleOCIHooks, func(string) string {
		return "added OCI hooks and is not in validator.hook-plugins"
	})
	// NRI records every plugin that added hooks, not which hook is whose.
	for _, owner := range strings.Split(owners, ",") {
		if v.isSelf(owner) || slices.Contains(v.cfg.HookPlugins, PluginName(owner)) {
			continue
		}
		for _, p := range paths {
			c.add(owner, p)
		}
	}
	return c.findings()
}

func (v *Validator) seccomp(req *api.ValidateContainerAdjustmentRequest) []Finding {
	owner, claimed := req.GetOwners().SeccompPolicyOwner(req.GetContainer().GetId())
	if !claimed || v.isSelf(owner) {
		return nil
	}
	policy := req.GetAdjust().GetLinux().GetSeccompPolicy()
	original := req.GetContainer().GetLinux().GetSeccompPolicy()
	item := "default action " + cmp.Or(policy.GetDefaultAction(), "(none)")
	var problem string
	switch {
	case Unconfined(policy):
		problem = "set a seccomp policy that leaves the container unconfined (no action denies anything)"
	case original != nil && denies(original.GetDefaultAction()) && !denies(policy.GetDefaultAction()):
		problem = fmt.Sprintf("replaced the container's deny-by-default seccomp policy (default action %s) with an allow-by-default one",
			original.GetDefaultAction())
	default:
		return nil
	}
	return []Finding{{Rule: config.RuleSeccompAdjustment, Plugin: owner, Items: []string{item}, Problem: problem}}
}

// denies reports whether a seccomp action stops the call: everything but
// allow, log and notify (which defers to a user-space listener that may
// allow it).
func denies(action string) bool {
	switch action {
	case "", "SCMP_ACT_ALLOW", "SCMP_ACT_LOG", "SCMP_ACT_NOTIFY":
		return false
	}
	return true
}

// Unconfined reports whether a seccomp policy stops no system call: no
// policy, or one whose default and every rule allow or only log.
func Unconfined(p *api.LinuxSeccomp) bool {
	if denies(p.GetDefaultAction()) {
		return false
	}
	for _, s := range p.GetSyscalls() {
		if len(s.GetNames()) > 0 && denies(s.GetAction()) {
			return false
		}
	}
	return true
}

func (v *Validator) namespaces(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleHostNamespaces, func(string) string {
		return "took the container into the host's namespaces"
	})
	for _, ns := range req.GetAdjust().GetLinux().GetNamespaces() {
		typ, removed := ns.IsMarkedForRemoval()
		owner, _ := req.GetOwners().NamespaceOwner(id, typ)
		if v.isSelf(owner) {
			continue
		}
		switch {
		case removed:
			c.add(owner, typ+" (namespace removed: the container shares the host's)")
		case ns.GetPath() != "":
			host, err := v.host.IsHost(typ, ns.GetPath())
			if err != nil {
				c.add(owner, fmt.Sprintf("%s at %s (cannot tell whether it is the host's: %v)", typ, ns.GetPath(), err))
			} else if host {
				c.add(owner, fmt.Sprintf("%s at %s (the host's)", typ, ns.GetPath()))
			}
		}
	}
	return c.findings()
}

func (v *Validator) sysctls(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleSysctls, func(string) string {
		return "set sysctls outside the safe set and validator.allowed-sysctls"
	})
	for key, value := range req.GetAdjust().GetLinux().GetSysctl() {
		if _, removed := api.IsMarkedForRemoval(key); removed {
			continue
		}
		owner, _ := req.GetOwners().SysctlOwner(id, key)
		if !v.isSelf(owner) && !v.cfg.SysctlAllowed(key) {
			c.add(owner, key+"="+value)
		}
	}
	return c.findings()
}

func (v *Validator) devices(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleDevices, func(owner string) string {
		return fmt.Sprintf("added devices outside validator.devices (allowed and plugins.%s)", PluginName(owner))
	})
	for _, d := range req.GetAdjust().GetLinux().GetDevices() {
		path, removed := d.IsMarkedForRemoval()
		if removed {
			continue
		}
		owner, _ := req.GetOwners().DeviceOwner(id, path)
		if !v.isSelf(owner) && !v.cfg.DeviceAllowed(PluginName(owner), path) {
			c.add(owner, path)
		}
	}
	for _, d := range req.GetAdjust().GetCDIDevices() {
		owner, _ := req.GetOwners().CdiDeviceOwner(id, d.GetName())
		if !v.isSelf(owner) && !v.cfg.DeviceAllowed(PluginName(owner), d.GetName()) {
			c.add(owner, d.GetName())
		}
	}
	return c.findings()
}

func (v *Validator) requiredPlugins(req *api.ValidateContainerAdjustmentRequest) []Finding {
	present := map[string]bool{}
	for _, p := range req.GetPlugins() {
		present[p.GetName()] = true
	}
	var missing []string
	for _, name := range v.cfg.RequiredPlugins {
		if !present[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{Rule: config.RuleRequiredPlugins, Items: missing,
		Problem: "is missing plugins that validator.required-plugins requires"}}
}
