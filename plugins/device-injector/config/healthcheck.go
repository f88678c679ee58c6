package config

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nri-suite/nri-suite/common/quote"
)

// Defaults and bounds of operator health checks. A check that hangs holds
// up its round of checks, so its timeout is bounded; so is the number of
// checks running at once, which costs one process (or file read) each.
const (
	DefaultCheckTimeout     = 5 * time.Second
	MinCheckTimeout         = 10 * time.Millisecond
	MaxCheckTimeout         = time.Minute
	DefaultCheckConcurrency = 4
	MaxCheckConcurrency     = 64
)

// Placeholders in a check's command arguments and file path.
const (
	// PlaceholderDevice stands for the device's resource id: the CDI name
	// (vendor.com/class=name) or the host path of a device node.
	PlaceholderDevice = "{device}"
	// PlaceholderName stands for the device's own name: what follows "=" in
	// a CDI name, the base name of a device node's path.
	PlaceholderName = "{name}"
)

// placeholderPattern finds what looks like a placeholder, so that a typo
// such as {dev} is an error at load rather than a literal at run time.
var placeholderPattern = regexp.MustCompile(`\{[A-Za-z_-]*\}`)

// HealthCheck is an operator's check of the devices whose resource id
// matches one of Devices: a command that must exit 0, and/or a file whose
// content must match Expect, each within Timeout.
type HealthCheck struct {
	// Key names the check in messages: "health-checks[0]".
	Key string
	// Devices are path.Match patterns on resource ids ("vendor.com/gpu=*",
	// "/dev/dri/*").
	Devices []string
	// Command is the argv to run, with placeholders; nil for none.
	Command []string
	Timeout time.Duration
	// File is the path to read, with placeholders; "" for none.
	File string
	// Expect must match the whole of File's content, surrounding
	// whitespace trimmed.
	Expect *regexp.Regexp
}

// HealthCheckFile is one entry of the health-checks key.
type HealthCheckFile struct {
	// Devices are path.Match patterns on CDI names or device node paths.
	Devices []string `yaml:"devices"`
	// Command is an argv whose first element is an absolute path.
	Command []string `yaml:"command"`
	// Timeout limits the command and the file's read, a Go duration
	// (default 5s).
	Timeout string `yaml:"timeout"`
	// File is an absolute path whose content is checked against Expect.
	File string `yaml:"file"`
	// Expect is a Go regular expression the whole content must match.
	Expect *string `yaml:"expect"`
}

// Matches reports whether the check applies to the device id.
func (c HealthCheck) Matches(id string) bool {
	for _, pat := range c.Devices {
		// Patterns were checked at load: Match cannot fail here.
		if ok, _ := path.Match(pat, id); ok {
			return true
		}
	}
	return false
}

// For returns the check's command and file with the placeholders replaced
// for the device id.
func (c HealthCheck) For(id string) (argv []string, file string) {
	name := id
	if _, after, ok := strings.Cut(id, "="); ok {
		name = after
	} else if strings.HasPrefix(id, "/") {
		name = path.Base(id)
	}
	r := strings.NewReplacer(PlaceholderDevice, id, PlaceholderName, name)
	for _, arg := range c.Command {
		argv = append(argv, r.Replace(arg))
	}
	if c.File != "" {
		file = r.Replace(c.File)
	}
	return argv, file
}

func healthChecks(files []HealthCheckFile) ([]HealthCheck, error) {
	var out []HealthCheck
	for i, f := range files {
		c, err := f.check(fmt.Sprintf("health-checks[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (f HealthCheckFile) check(key string) (HealthCheck, error) {
	c := HealthCheck{Key: key, Devices: f.Devices, Command: f.Command, File: f.File, Timeout: DefaultCheckTimeout}
	if len(f.Devices) == 0 {
		return c, fmt.Errorf(`%s.devices: empty: expected patterns such as "vendor.com/gpu=*" or "/dev/dri/*"`, key)
	}
	for _, pat := range f.Devices {
		if err := checkDevicePattern(pat); err != nil {
			return c, fmt.Errorf(`%s.devices: %s: expected a CDI name pattern such as "vendor.com/gpu=*" or an absolute device path pattern: %w`, key, quote.Value(pat), err)
		}
	}
	if len(f.Command) == 0 && f.File == "" {
		return c, fmt.Errorf("%s: neither command nor file: expected at least one", key)
	}
	if len(f.Command) > 0 {
		if !filepath.IsAbs(f.Command[0]) {
			return c, fmt.Errorf("%s.command: %s: expected an absolute path to the executable first (checks run without a shell or PATH lookup)", key, quote.Value(f.Command[0]))
		}
		for _, arg := range f.Command {
			if err := checkPlaceholders(arg); err != nil {
				return c, fmt.Errorf("%s.command: %s: %w", key, quote.Value(arg), err)
			}
		}
	}
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil {
			return c, fmt.Errorf("%s.timeout: %s: expected a duration such as 5s: %w", key, quote.Value(f.Timeout), quote.Error(err))
		}
		if d < MinCheckTimeout || d > MaxCheckTimeout {
			return c, fmt.Errorf("%s.timeout: %s: expected between %v and %v", key, quote.Value(f.Timeout), MinCheckTimeout, MaxCheckTimeout)
		}
		c.Timeout = d
	}
	return c, f.fileCheck(key, &c)
}

func (f HealthCheckFile) fileCheck(key string, c *HealthCheck) error {
	switch {
	case f.File == "" && f.Expect != nil:
		return fmt.Errorf("%s.expect: %s: there is no file to match it against", key, quote.Value(*f.Expect))
	case f.File == "":
		return nil
	case !strings.HasPrefix(f.File, "/"):
		return fmt.Errorf("%s.file: %s: expected an absolute path", key, quote.Value(f.File))
	case f.Expect == nil:
		return fmt.Errorf("%s.file: %s: expect is missing: expected a regular expression the file's content must match", key, quote.Value(f.File))
	}
	if err := checkPlaceholders(f.File); err != nil {
		return fmt.Errorf("%s.file: %s: %w", key, quote.Value(f.File), err)
	}
	re, err := regexp.Compile(`^(?:` + *f.Expect + `)$`)
	if err != nil {
		return fmt.Errorf("%s.expect: %s: expected a Go regular expression: %w", key, quote.Value(*f.Expect), quote.Error(err))
	}
	c.Expect = re
	return nil
}

// checkDevicePattern checks a pattern's syntax and that it can match a
// resource id: a CDI name (vendor/class=name) or an absolute path. A
// pattern of the form "vendor.com/gpu" could never match a CDI name, which
// always has "=name".
func checkDevicePattern(pat string) error {
	if _, err := path.Match(pat, ""); err != nil {
		return err
	}
	if strings.HasPrefix(pat, "/") {
		return nil
	}
	_, class, _ := strings.Cut(pat, "/")
	if strings.Count(pat, "/") != 1 || !strings.ContainsAny(class, "=*?[") {
		return fmt.Errorf("neither vendor/class=name nor absolute")
	}
	return nil
}

func checkPlaceholders(s string) error {
	for _, p := range placeholderPattern.FindAllString(s, -1) {
		if p != PlaceholderDevice && p != PlaceholderName {
			return fmt.Errorf("unknown placeholder %s: expected %s or %s", quote.Bare(p), PlaceholderDevice, PlaceholderName)
		}
	}
	return nil
}

func checkConcurrency(n *int) (int, error) {
	if n == nil {
		return DefaultCheckConcurrency, nil
	}
	if *n < 1 || *n > MaxCheckConcurrency {
		return 0, fmt.Errorf("health-check-concurrency: %d: expected 1 to %d", *n, MaxCheckConcurrency)
	}
	return *n, nil
}
