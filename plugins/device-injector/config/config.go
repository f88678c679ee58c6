// Package config is the device-injector's YAML configuration: where the CDI
// specs are, how devices are injected (mode) and which namespaces may ask
// for which devices (policy). It is decoded strictly (an unknown key is an
// error naming it) and every value is checked at load; errors name the key,
// the value and what was expected. The keys and defaults are documented in
// the plugin's README.md.
package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Mode is how CDI devices reach the container.
type Mode string

const (
	// ModeRuntime hands the CDI names to the runtime (NRI CDI devices),
	// which resolves them with its own CDI cache.
	ModeRuntime Mode = "runtime"
	// ModePlugin resolves the names in the plugin and injects the device
	// nodes, mounts, env and hooks as plain adjustments, for runtimes that
	// drop NRI's CDI adjustments.
	ModePlugin Mode = "plugin"
	// ModeAuto is ModeRuntime on a runtime known to apply NRI's CDI
	// adjustments, else ModePlugin (see Config.EffectiveMode).
	ModeAuto Mode = "auto"
)

// UnhealthyAction is what happens to a new container asking for an
// unhealthy device.
type UnhealthyAction string

const (
	UnhealthyFail UnhealthyAction = "fail"
	UnhealthyWarn UnhealthyAction = "warn"
)

// DefaultHealthInterval is how often device health is checked; MinHealthInterval
// keeps a typo such as 2ms from turning the checks into a busy loop.
const (
	DefaultHealthInterval = 2 * time.Second
	MinHealthInterval     = 100 * time.Millisecond
)

// DefaultSpecDirs are the CDI spec directories of the CDI specification;
// later directories win over earlier ones.
var DefaultSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// DefaultCDIPatterns allow every CDI vendor and class: CDI specs are
// installed by the node's administrator and expose only what they declare.
var DefaultCDIPatterns = []string{"*/*"}

// Config is the checked configuration.
type Config struct {
	SpecDirs        []string
	Mode            Mode
	Runtime         string
	UnhealthyAction UnhealthyAction
	HealthInterval  time.Duration
	// HealthChecks are the operator's checks, in the order configured.
	HealthChecks []HealthCheck
	// CheckConcurrency bounds how many health checks run at once.
	CheckConcurrency int
	Policy           Policy
}

// File is the YAML document, key by key.
type File struct {
	// SpecDirs are the CDI spec directories, lowest priority first.
	SpecDirs []string `yaml:"spec-dirs"`
	// Mode is runtime, plugin or auto (default).
	Mode string `yaml:"mode"`
	// Runtime overrides, for mode auto, the runtime name that NRI reports at
	// registration ("containerd", "cri-o"); empty: trust the report. See
	// EffectiveMode.
	Runtime string `yaml:"runtime"`
	// UnhealthyAction is fail (default) or warn.
	UnhealthyAction string `yaml:"unhealthy-action"`
	// HealthInterval is how often spec directories and device nodes are
	// checked, a Go duration ("2s").
	HealthInterval string `yaml:"health-interval"`
	// HealthChecks attach operator checks (a command, a file) to devices.
	HealthChecks []HealthCheckFile `yaml:"health-checks"`
	// HealthCheckConcurrency bounds the checks running at once (default 4).
	HealthCheckConcurrency *int `yaml:"health-check-concurrency"`
	// Policy says which namespaces may ask for which devices.
	Policy PolicyFile `yaml:"policy"`
}

// PolicyFile is the policy key: a default rule and rules by namespace.
type PolicyFile struct {
	// Default applies to namespaces without a rule of their own.
	Default *RuleFile `yaml:"default"`
	// Namespaces replace, key by key, the default for the namespaces they
	// name.
	Namespaces map[string]RuleFile `yaml:"namespaces"`
}

// RuleFile is what one namespace may ask for, as path.Match patterns. A
// key left out inherits (from policy.default, or the built-in default); an
// empty list allows nothing.
type RuleFile struct {
	// CDI patterns match "vendor/class" of a CDI name ("nvidia.com/gpu",
	// "vendor.com/*", "*/*").
	CDI *[]string `yaml:"cdi"`
	// DevicePaths match the host path of a device node ("/dev/fuse",
	// "/dev/dri/*").
	DevicePaths *[]string `yaml:"device-paths"`
	// MountSources match the host path of a mount's source.
	MountSources *[]string `yaml:"mount-sources"`
}

// Defaults returns the File that an empty configuration means.
func Defaults() File {
	return File{SpecDirs: slices.Clone(DefaultSpecDirs)}
}

// Parse decodes data (from source, for messages) strictly over the defaults
// and checks every value.
func Parse(data []byte, source string) (Config, error) {
	f := Defaults()
	if err := plugin.DecodeConfig(data, source, &f); err != nil {
		return Config{}, err
	}
	cfg, err := f.config()
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", source, err)
	}
	return cfg, nil
}

func (f File) config() (Config, error) {
	cfg := Config{Runtime: strings.TrimSpace(f.Runtime)}
	var err error
	if cfg.SpecDirs, err = specDirs(f.SpecDirs); err != nil {
		return cfg, err
	}
	if cfg.Mode, err = plugin.OneOf("mode", f.Mode, ModeAuto, ModeRuntime, ModePlugin, ModeAuto); err != nil {
		return cfg, err
	}
	if cfg.UnhealthyAction, err = plugin.OneOf("unhealthy-action", f.UnhealthyAction, UnhealthyFail, UnhealthyFail, UnhealthyWarn); err != nil {
		return cfg, err
	}
	if cfg.HealthInterval, err = healthInterval(f.HealthInterval); err != nil {
		return cfg, err
	}
	if cfg.HealthChecks, err = healthChecks(f.HealthChecks); err != nil {
		return cfg, err
	}
	if cfg.CheckConcurrency, err = checkConcurrency(f.HealthCheckConcurrency); err != nil {
		return cfg, err
	}
	if cfg.Policy, err = f.Policy.policy(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// EffectiveMode resolves ModeAuto for the runtime that reported itself as
// reported (the config's runtime key wins when set): runtime mode on
// containerd, which applies NRI's CDI adjustments; plugin mode on CRI-O
// (v1.34 drops them silently) and on any runtime it does not know, since
// plugin mode needs nothing of the runtime.
func (c Config) EffectiveMode(reported string) Mode {
	if c.Mode != ModeAuto {
		return c.Mode
	}
	runtime := c.Runtime
	if runtime == "" {
		runtime = reported
	}
	if strings.EqualFold(runtime, "containerd") {
		return ModeRuntime
	}
	return ModePlugin
}

func healthInterval(s string) (time.Duration, error) {
	if s == "" {
		return DefaultHealthInterval, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("health-interval: %s: expected a duration such as 2s: %w", quote.Value(s), quote.Error(err))
	}
	if d < MinHealthInterval {
		return 0, fmt.Errorf("health-interval: %s: expected at least %v", quote.Value(s), MinHealthInterval)
	}
	return d, nil
}

func specDirs(dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("spec-dirs: empty: expected at least one directory such as /etc/cdi")
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if err := plugin.CheckPath("spec-dirs", d); err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, fmt.Errorf("spec-dirs: %s is listed twice", quote.Value(d))
		}
		seen[d] = true
		out = append(out, d)
	}
	return out, nil
}

func (p PolicyFile) policy() (Policy, error) {
	def := Rule{CDI: DefaultCDIPatterns}
	if p.Default != nil {
		var err error
		if def, err = p.Default.rule("policy.default", def); err != nil {
			return Policy{}, err
		}
	}
	out := Policy{Default: def, Namespaces: make(map[string]Rule, len(p.Namespaces))}
	for ns, rf := range p.Namespaces {
		if err := k8s.CheckNamespace("policy.namespaces", ns); err != nil {
			return Policy{}, err
		}
		// Keys a namespace's rule leaves out are those of policy.default.
		r, err := rf.rule("policy.namespaces."+ns, def)
		if err != nil {
			return Policy{}, err
		}
		out.Namespaces[ns] = r
	}
	return out, nil
}

func (r RuleFile) rule(key string, def Rule) (Rule, error) {
	out := def
	for _, field := range []struct {
		name string
		in   *[]string
		out  *[]string
		want string
	}{
		{"cdi", r.CDI, &out.CDI, `vendor/class patterns such as "nvidia.com/gpu" or "vendor.com/*"`},
		{"device-paths", r.DevicePaths, &out.DevicePaths, `absolute path patterns such as "/dev/dri/*"`},
		{"mount-sources", r.MountSources, &out.MountSources, `absolute path patterns such as "/opt/drivers/*"`},
	} {
		if field.in == nil {
			continue
		}
		for _, pat := range *field.in {
			if err := checkPattern(field.name, pat); err != nil {
				return Rule{}, fmt.Errorf("%s.%s: %s: expected %s: %w", key, field.name, quote.Value(pat), field.want, err)
			}
		}
		*field.out = slices.Clone(*field.in)
	}
	return out, nil
}

// checkPattern checks a pattern's syntax and shape.
func checkPattern(field, pat string) error {
	if _, err := path.Match(pat, ""); err != nil {
		return err
	}
	switch field {
	case "cdi":
		if strings.Count(pat, "/") != 1 || strings.Contains(pat, "=") {
			return fmt.Errorf("not of the form vendor/class")
		}
	default:
		if !strings.HasPrefix(pat, "/") {
			return fmt.Errorf("not absolute")
		}
	}
	return nil
}
