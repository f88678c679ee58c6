package config

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

// ValidatorFile is the validator key: what other plugins may do. Plugins
// are named by index and name, as NRI registers them ("10-device-injector").
type ValidatorFile struct {
	// HookPlugins may add OCI hooks.
	HookPlugins []string `yaml:"hook-plugins"`
	// AllowedSysctls are allowed besides SafeSysctls; "prefix.*" allows a
	// subtree.
	AllowedSysctls []string `yaml:"allowed-sysctls"`
	// Devices are the device nodes (paths) and CDI devices (names) plugins
	// may add.
	Devices PluginPatterns `yaml:"devices"`
	// Mounts are the host sources plugins may mount.
	Mounts PluginPatterns `yaml:"mounts"`
	// DeviceCgroups are the device-cgroup rules plugins may add.
	DeviceCgroups DeviceCgroupPolicy `yaml:"device-cgroups"`
	// Env are the environment variables plugins may not set.
	Env EnvPolicy `yaml:"env"`
	// Rlimits are the highest rlimits plugins may set.
	Rlimits RlimitPolicy `yaml:"rlimits"`
	// RequiredPlugins must be connected for any container to be created.
	RequiredPlugins []string `yaml:"required-plugins"`
	// AnnotationPlugins maps the domain of annotation keys
	// (cdi-devices.nri-suite.io, cdi.k8s.io) to the plugin that acts on
	// them: a container whose pod carries one is refused while that plugin
	// is not connected.
	AnnotationPlugins map[string]string `yaml:"annotation-plugins"`
}

// PluginPatterns are path.Match patterns of what plugins may add: Allowed
// for every plugin, Plugins per plugin.
type PluginPatterns struct {
	Allowed []string            `yaml:"allowed"`
	Plugins map[string][]string `yaml:"plugins"`
}

// Allows reports whether the plugin may add value.
func (p PluginPatterns) Allows(plugin PluginID, value string) bool {
	return slices.ContainsFunc(p.of(plugin), func(pattern string) bool {
		ok, _ := path.Match(pattern, value)
		return ok
	})
}

// Names reports whether a pattern for the plugin is value itself, without
// wildcards: what a path that reaches the host needs (validator.mounts).
func (p PluginPatterns) Names(plugin PluginID, value string) bool {
	return slices.ContainsFunc(p.of(plugin), func(pattern string) bool {
		return pattern == value && !strings.ContainsAny(pattern, `*?[\`)
	})
}

// of are the patterns for the plugin: Allowed and its own.
func (p PluginPatterns) of(plugin PluginID) []string {
	return append(slices.Clone(p.Allowed), p.Plugins[string(plugin)]...)
}

// check checks the patterns under key; absolute: host paths, which a
// relative pattern would never match.
func (p PluginPatterns) check(key, example string, absolute bool) error {
	patterns := map[string][]string{key + ".allowed": p.Allowed}
	for id, list := range p.Plugins {
		if err := checkPluginID(key+".plugins", id); err != nil {
			return err
		}
		patterns[key+".plugins."+id] = list
	}
	for _, k := range slices.Sorted(maps.Keys(patterns)) {
		for _, pattern := range patterns[k] {
			if _, err := path.Match(pattern, ""); err != nil || pattern == "" || absolute && !path.IsAbs(pattern) {
				return fmt.Errorf("%s: %s: expected a path.Match pattern such as %s", k, quote.Value(pattern), example)
			}
		}
	}
	return nil
}

// DeviceCgroupPolicy lists the device-cgroup rules plugins may add, as
// "type major:minor access" ("c 10:229 rwm", "*" for any number). NRI does
// not record which plugin adds such a rule, so the list holds for all.
type DeviceCgroupPolicy struct {
	Allowed []string `yaml:"allowed"`
}

// DeviceRule is a device-cgroup rule: type a, b or c, major and minor
// (-1 for any) and access, a subset of "rwm".
type DeviceRule struct {
	Type         string
	Major, Minor int64
	Access       string
}

func (r DeviceRule) String() string {
	num := func(n int64) string {
		if n < 0 {
			return "*"
		}
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s %s:%s %s", r.Type, num(r.Major), num(r.Minor), r.Access)
}

// Covers reports whether r allows at least what other allows.
func (r DeviceRule) Covers(other DeviceRule) bool {
	covers := func(mine, theirs int64) bool { return mine < 0 || mine == theirs }
	for _, c := range other.Access {
		if !strings.ContainsRune(r.Access, c) {
			return false
		}
	}
	return (r.Type == "a" || r.Type == other.Type) && covers(r.Major, other.Major) && covers(r.Minor, other.Minor)
}

// ParseDeviceRule reads "type major:minor access".
func ParseDeviceRule(s string) (DeviceRule, error) {
	fail := fmt.Errorf("%s: expected a device-cgroup rule \"type major:minor access\" such as \"c 10:229 rwm\" (type a, b or c; * for any number)", quote.Value(s))
	f := strings.Fields(s)
	if len(f) != 3 || !slices.Contains([]string{"a", "b", "c"}, f[0]) || f[2] == "" || strings.Trim(f[2], "rwm") != "" {
		return DeviceRule{}, fail
	}
	major, minor, ok := strings.Cut(f[1], ":")
	num := func(s string) (int64, bool) {
		if s == "*" {
			return -1, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0
	}
	maj, okMaj := num(major)
	min, okMin := num(minor)
	if !ok || !okMaj || !okMin {
		return DeviceRule{}, fail
	}
	return DeviceRule{Type: f[0], Major: maj, Minor: min, Access: f[2]}, nil
}

// Allows reports whether plugins may add rule.
func (p DeviceCgroupPolicy) Allows(rule DeviceRule) bool {
	for _, s := range p.Allowed {
		if allowed, err := ParseDeviceRule(s); err == nil && allowed.Covers(rule) {
			return true
		}
	}
	return false
}

// DeniedEnv are the variables no plugin may set unless allowed: they make
// the dynamic loader or the C library load code of the plugin's choosing
// into every process of the container.
var DeniedEnv = []string{"LD_*", "GCONV_PATH", "GLIBC_TUNABLES"}

// EnvPolicy is what plugins may not set: DeniedEnv and Denied (path.Match
// patterns of names), except what Plugins allows a plugin.
type EnvPolicy struct {
	Denied  []string            `yaml:"denied"`
	Plugins map[string][]string `yaml:"plugins"`
}

// Allows reports whether the plugin may set the variable name.
func (p EnvPolicy) Allows(plugin PluginID, name string) bool {
	if (PluginPatterns{Plugins: p.Plugins}).Allows(plugin, name) {
		return true
	}
	for _, pattern := range append(slices.Clone(DeniedEnv), p.Denied...) {
		if ok, _ := path.Match(pattern, name); ok {
			return false
		}
	}
	return true
}

// RlimitPolicy caps the rlimits plugins may set, per type ("RLIMIT_NOFILE").
// A type without a cap may only be lowered from what the container had.
type RlimitPolicy struct {
	Max map[string]uint64 `yaml:"max"`
}

// DefaultRlimitMax caps what the suite's plugins may need: the kernel's
// default nr_open for open files.
var DefaultRlimitMax = map[string]uint64{"RLIMIT_NOFILE": 1 << 20}

// rlimitTypes are the OCI rlimit types.
var rlimitTypes = []string{"RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_LOCKS",
	"RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_RSS",
	"RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK"}

// Ceiling is the highest value plugins may set for an rlimit type; ok is
// false when no cap is configured for it.
func (p RlimitPolicy) Ceiling(typ string) (uint64, bool) {
	if v, ok := p.Max[typ]; ok {
		return v, true
	}
	v, ok := DefaultRlimitMax[typ]
	return v, ok
}

func (v ValidatorFile) check() error {
	for key, ids := range map[string][]string{
		"validator.hook-plugins": v.HookPlugins, "validator.required-plugins": v.RequiredPlugins,
	} {
		for _, id := range ids {
			if err := checkPluginID(key, id); err != nil {
				return err
			}
		}
	}
	for _, domain := range slices.Sorted(maps.Keys(v.AnnotationPlugins)) {
		if !k8s.IsDNSSubdomain(domain) {
			return fmt.Errorf("validator.annotation-plugins: %s: expected the domain of annotation keys, such as cdi-devices.nri-suite.io or cdi.k8s.io "+
				"(lowercase letters, digits, '-' and '.', without '/')", quote.Value(domain))
		}
		if err := checkPluginID("validator.annotation-plugins."+domain, v.AnnotationPlugins[domain]); err != nil {
			return err
		}
	}
	for _, s := range v.AllowedSysctls {
		if err := checkSysctlPattern(s); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		key, example string
		patterns     PluginPatterns
		absolute     bool
	}{
		{"validator.devices", "/dev/fuse, /dev/dri/* or vendor.com/gpu=*", v.Devices, false},
		{"validator.mounts", "/opt/drivers/* (an absolute host path)", v.Mounts, true},
		{"validator.env", "LD_LIBRARY_PATH or MY_*", PluginPatterns{Allowed: v.Env.Denied, Plugins: v.Env.Plugins}, false},
	} {
		if err := c.patterns.check(c.key, c.example, c.absolute); err != nil {
			return err
		}
	}
	for _, r := range v.DeviceCgroups.Allowed {
		if _, err := ParseDeviceRule(r); err != nil {
			return fmt.Errorf("validator.device-cgroups.allowed: %w", err)
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(v.Rlimits.Max)) {
		if !slices.Contains(rlimitTypes, typ) {
			return fmt.Errorf("validator.rlimits.max: unknown type %s: expected one of %s", quote.Value(typ), strings.Join(rlimitTypes, ", "))
		}
	}
	return nil
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
