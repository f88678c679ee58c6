// Package validator judges what the other NRI plugins did to a container
// before the runtime creates it: the merged adjustment of a
// ValidateContainerAdjustmentRequest, with the plugin that owns each field.
//
// NRI's builtin default validator can only refuse a whole kind of change
// (every OCI hook, every namespace change, every sysctl). This package looks
// at what was changed and by whom: hooks from plugins not allowed to add
// them, a seccomp policy that lets through what the runtime default denies,
// a namespace removed or joined from the host, sysctls outside the safe set,
// devices and device-cgroup rules outside the policy, the routes to the host
// (mounts, cgroups path, OOM score, environment, rlimits: routes.go),
// required plugins that are not connected, and plugins that a pod's
// annotations ask for and that are not connected. It only reports findings;
// the caller decides, by each rule's mode, whether they refuse the container.
package validator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/security/config"
	"github.com/nri-suite/nri-suite/plugins/security/internal/hostns"
	"github.com/nri-suite/nri-suite/plugins/security/internal/privileged"
)

// Finding is one rule broken by one plugin.
type Finding struct {
	Rule config.Rule
	// Plugin is the offender as NRI names it ("50-e2e-test"), or for
	// annotated-plugins the plugin that is missing; empty for
	// required-plugins, where nobody acted, and where NRI does not record
	// which plugin acted (Unattributed).
	Plugin string
	// Unattributed: a plugin acted, and NRI records no owner of the change.
	Unattributed bool
	// Items are what it changed (hook paths, sysctl keys, device paths...).
	Items []string
	// More counts the offending items left out of Items, to bound it.
	More int
	// Problem says what is wrong, for the rejection reason and the log.
	Problem string
}

// Count is the number of offending items.
func (f Finding) Count() int { return len(f.Items) + f.More }

// String is the finding as one clause of a rejection reason.
func (f Finding) String() string {
	who := "plugin " + f.Plugin
	switch {
	case f.Unattributed:
		who = "a plugin"
	case f.Plugin == "":
		who = "node"
	}
	items := strings.Join(f.Items, ", ")
	if f.More > 0 {
		items += fmt.Sprintf(" and %d more", f.More)
	}
	return fmt.Sprintf("rule %s: %s %s: %s", f.Rule, who, f.Problem, items)
}

// maxItems bounds the items a finding lists.
const maxItems = 10

// bounded sets f's items to the first maxItems of items, counting the rest.
func (f Finding) bounded(items []string) Finding {
	f.Items, f.More = items[:min(len(items), maxItems)], max(len(items)-maxItems, 0)
	return f
}

// Own is what this plugin did to the container at CreateContainer: the
// validator recognizes its own changes by what they are, not by the name
// they are claimed under, which any plugin can register with.
type Own struct {
	// Seccomp is the policy it set, nil for none.
	Seccomp *api.LinuxSeccomp
	// LeftPrivileged: it left the container unconfined as privileged.
	LeftPrivileged bool
}

// SeccompBaseline judges a seccomp policy by what the runtime default denies
// (seccomp.Baseline).
type SeccompBaseline interface {
	// LetsThrough lists, sorted, the syscalls the runtime default denies
	// that policy lets through.
	LetsThrough(policy *api.LinuxSeccomp) []string
}

// Validator checks adjustments against the validator configuration.
type Validator struct {
	cfg      config.ValidatorFile
	self     config.PluginID
	host     hostns.Host
	baseline SeccompBaseline
}

// New returns a validator for the plugin registered as self (the security
// plugin itself, whose own seccomp policies are checked when it makes them)
// that asks host about namespace paths and judges other plugins' seccomp
// policies against baseline.
func New(cfg config.ValidatorFile, self config.PluginID, host hostns.Host, baseline SeccompBaseline) *Validator {
	return &Validator{cfg: cfg, self: self, host: host, baseline: baseline}
}

// Check returns the findings of the rules enabled says to run, ordered by
// rule and plugin; own is what this plugin did to the container.
func (v *Validator) Check(req *api.ValidateContainerAdjustmentRequest, enabled func(config.Rule) bool, own Own) []Finding {
	checks := []struct {
		rule  config.Rule
		check func(*api.ValidateContainerAdjustmentRequest) []Finding
	}{
		{config.RuleSeccomp, func(r *api.ValidateContainerAdjustmentRequest) []Finding { return v.madePrivileged(r, own) }},
		{config.RuleOCIHooks, v.hooks},
		{config.RuleSeccompAdjustment, func(r *api.ValidateContainerAdjustmentRequest) []Finding { return v.seccomp(r, own) }},
		{config.RuleHostNamespaces, v.namespaces},
		{config.RuleSysctls, v.sysctls},
		{config.RuleDevices, v.devices},
		{config.RuleDeviceCgroups, v.deviceCgroups},
		{config.RuleMounts, v.mounts},
		{config.RuleCgroupsPath, v.cgroupsPath},
		{config.RuleOOMScoreAdj, v.oomScoreAdj},
		{config.RuleEnv, v.env},
		{config.RuleRlimits, v.rlimits},
		{config.RuleRequiredPlugins, v.requiredPlugins},
		{config.RuleAnnotatedPlugins, v.annotatedPlugins},
		{config.RulePluginIdentity, v.identities},
	}
	var findings []Finding
	for _, c := range checks {
		if enabled(c.rule) {
			findings = append(findings, c.check(req)...)
		}
	}
	return findings
}

// idOf is the identity of the plugin NRI names owner ("10-device-injector").
func idOf(owner string) config.PluginID { return config.PluginID(owner) }

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
		if slices.Contains(v.cfg.HookPlugins, owner) {
			continue
		}
		for _, p := range paths {
			c.add(owner, p)
		}
	}
	return c.findings()
}

func (v *Validator) seccomp(req *api.ValidateContainerAdjustmentRequest, own Own) []Finding {
	owner, claimed := req.GetOwners().SeccompPolicyOwner(req.GetContainer().GetId())
	if !claimed {
		return nil
	}
	policy := req.GetAdjust().GetLinux().GetSeccompPolicy()
	item := "default action " + cmp.Or(policy.GetDefaultAction(), "(none)")
	if idOf(owner) == v.self {
		if own.Seccomp != nil && proto.Equal(policy, own.Seccomp) {
			return nil
		}
		return []Finding{{Rule: config.RuleSeccompAdjustment, Plugin: owner, Items: []string{item},
			Problem: "set a seccomp policy under this plugin's name that this plugin did not set"}}
	}
	// Whatever the container had: a policy another plugin sets may keep
	// this plugin from giving the container the runtime default (a plugin of
	// a lower index confines it first), so the runtime default is the measure.
	through := v.baseline.LetsThrough(policy)
	if len(through) == 0 {
		return nil
	}
	return []Finding{Finding{Rule: config.RuleSeccompAdjustment, Plugin: owner,
		Problem: fmt.Sprintf("set a seccomp policy (%s) that lets through system calls the runtime default denies", item)}.bounded(through)}
}

// madePrivileged finds a container this plugin left unconfined as
// privileged that the runtime did not make privileged: the signs of it
// (package privileged) came from other plugins, which CreateContainer sees
// applied and the validation request's container does not.
func (v *Validator) madePrivileged(req *api.ValidateContainerAdjustmentRequest, own Own) []Finding {
	if !own.LeftPrivileged || privileged.Of(req.GetContainer()).Privileged() {
		return nil
	}
	return []Finding{{Rule: config.RuleSeccomp, Unattributed: true, Items: []string{"device-cgroup rules", "/sys mount"},
		Problem: "made the container look privileged (every device allowed, /sys writable), and so left unconfined by seccomp; " +
			"the runtime did not make it privileged"}}
}

func (v *Validator) namespaces(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleHostNamespaces, func(string) string {
		return "took the container into the host's namespaces"
	})
	for _, ns := range req.GetAdjust().GetLinux().GetNamespaces() {
		typ, removed := ns.IsMarkedForRemoval()
		owner, _ := req.GetOwners().NamespaceOwner(id, typ)
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
		if !v.cfg.SysctlAllowed(key) {
			c.add(owner, key+"="+value)
		}
	}
	return c.findings()
}

func (v *Validator) devices(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleDevices, func(owner string) string {
		return fmt.Sprintf("added devices outside validator.devices (allowed and plugins.%s)", owner)
	})
	for _, d := range req.GetAdjust().GetLinux().GetDevices() {
		path, removed := d.IsMarkedForRemoval()
		if removed {
			continue
		}
		owner, _ := req.GetOwners().DeviceOwner(id, path)
		if !v.cfg.Devices.Allows(idOf(owner), path) {
			c.add(owner, path)
		}
	}
	for _, d := range req.GetAdjust().GetCDIDevices() {
		owner, _ := req.GetOwners().CdiDeviceOwner(id, d.GetName())
		if !v.cfg.Devices.Allows(idOf(owner), d.GetName()) {
			c.add(owner, d.GetName())
		}
	}
	return c.findings()
}

// connected are the plugins that take part in the request, as NRI lists them.
func connected(req *api.ValidateContainerAdjustmentRequest) map[config.PluginID]bool {
	present := map[config.PluginID]bool{}
	for _, p := range req.GetPlugins() {
		present[config.NewPluginID(p.GetIndex(), p.GetName())] = true
	}
	return present
}

func (v *Validator) requiredPlugins(req *api.ValidateContainerAdjustmentRequest) []Finding {
	present := connected(req)
	var missing []string
	for _, id := range v.cfg.RequiredPlugins {
		if !present[config.PluginID(id)] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Finding{{Rule: config.RuleRequiredPlugins, Items: missing,
		Problem: "is missing plugins that validator.required-plugins requires"}}
}

// annotatedPlugins finds, per plugin of validator.annotation-plugins that
// is not connected, the pod's annotations for this container that ask for
// it: the runtime would create the container without what they ask for.
// Only pod annotations count, as only they reach the suite's plugins
// (k8s.Annotations); their values are for the plugin to judge.
func (v *Validator) annotatedPlugins(req *api.ValidateContainerAdjustmentRequest) []Finding {
	present := connected(req)
	container := k8s.IdentityOf(req.GetPod(), req.GetContainer()).Container
	c := newCollector(config.RuleAnnotatedPlugins, func(string) string {
		return "is not connected, and the pod's annotations ask it to act on this container (validator.annotation-plugins): " +
			"refused rather than created without it"
	})
	for key := range req.GetPod().GetAnnotations() {
		id, owned := v.cfg.AnnotationPlugins[k8s.AnnotationDomain(key)]
		if owned && !present[config.PluginID(id)] && k8s.AnnotationFor(key, container) {
			c.add(id, quote.Bare(key))
		}
	}
	findings := c.findings()
	for i, f := range findings {
		findings[i] = f.bounded(f.Items)
	}
	return findings
}

// trusted are the plugins the policy names, and this plugin.
func (v *Validator) trusted() []config.PluginID {
	ids := []config.PluginID{v.self}
	for _, list := range [][]string{v.cfg.HookPlugins, v.cfg.RequiredPlugins, slices.Collect(maps.Values(v.cfg.AnnotationPlugins)),
		slices.Collect(maps.Keys(v.cfg.Devices.Plugins)), slices.Collect(maps.Keys(v.cfg.Mounts.Plugins)),
		slices.Collect(maps.Keys(v.cfg.Env.Plugins))} {
		for _, id := range list {
			ids = append(ids, config.PluginID(id))
		}
	}
	return ids
}

// identities finds plugins that pass for one the policy trusts: two
// registered under the same index and name (NRI does not keep them unique,
// and their changes are claimed under one name), or one under a trusted
// plugin's name at another index. Either could hold what the policy grants
// the trusted one.
func (v *Validator) identities(req *api.ValidateContainerAdjustmentRequest) []Finding {
	count := map[config.PluginID]int{}
	for _, p := range req.GetPlugins() {
		count[config.NewPluginID(p.GetIndex(), p.GetName())]++
	}
	c := newCollector(config.RulePluginIdentity, func(string) string {
		return "registered under the name of a plugin the policy trusts"
	})
	for _, trusted := range v.trusted() {
		for _, id := range slices.Sorted(maps.Keys(count)) {
			switch {
			case id == trusted && count[id] > 1:
				c.add(string(id), fmt.Sprintf("%d plugins registered as %s", count[id], id))
			case id != trusted && id.Name() == trusted.Name():
				c.add(string(id), fmt.Sprintf("%s besides the trusted %s", id, trusted))
			}
		}
	}
	for plugin, items := range c.byPlugin {
		c.byPlugin[plugin] = slices.Compact(slices.Sorted(slices.Values(items)))
	}
	return c.findings()
}
