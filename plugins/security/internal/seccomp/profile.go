package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// defaultName is how the runtime default profile appears in logs and errors.
const defaultName = "runtime/default"

// source is one valid version of a profile: the runtime default, or a file's content.
// A reloaded file gets a new source, so its cached builds go with the old one.
type source struct {
	name string
	// setup is moby's conversion to the OCI form for a container's capabilities.
	setup func(*specs.Spec) (*specs.LinuxSeccomp, error)
	// caps are the capabilities the profile's rules are conditioned on, sorted: the only
	// part of a container's capabilities that changes the built profile.
	caps   []string
	builds variants
}

func defaultSource() *source {
	return &source{
		name:  defaultName,
		setup: mobyseccomp.GetDefaultProfile,
		caps:  conditionCaps(mobyseccomp.DefaultProfile()),
	}
}

// parseProfile validates a profile file completely, so that a profile that is accepted
// here cannot fail to build later.
func parseProfile(name string, data []byte, table *syscallTable) (*source, error) {
	var p mobyseccomp.Seccomp
	dec := json.NewDecoder(bytes.NewReader(data))
	// Strict: a misspelled key ("syscall") would otherwise drop its rules silently.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: decoding JSON: %w", ErrInvalidProfile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: decoding JSON: unexpected data after the profile", ErrInvalidProfile)
	}
	if err := validate(&p, table); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	body := string(data)
	// moby's own checks (name and names, architectures and archMap, kernel versions).
	if _, err := mobyseccomp.LoadProfile(body, specForCaps(capabilities())); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	return &source{
		name:  name,
		setup: func(spec *specs.Spec) (*specs.LinuxSeccomp, error) { return mobyseccomp.LoadProfile(body, spec) },
		caps:  conditionCaps(&p),
	}, nil
}

func validate(p *mobyseccomp.Seccomp, table *syscallTable) error {
	if p.DefaultAction == "" {
		return errors.New("defaultAction: missing")
	}
	if err := actions.check("defaultAction", p.DefaultAction); err != nil {
		return err
	}
	if p.DefaultAction == specs.ActNotify {
		return errors.New("defaultAction: SCMP_ACT_NOTIFY cannot be the default action")
	}
	if p.DefaultErrnoRet != nil && !takesErrno(p.DefaultAction) {
		return fmt.Errorf("defaultErrnoRet: set with defaultAction %s, expected SCMP_ACT_ERRNO or SCMP_ACT_TRACE", p.DefaultAction)
	}
	for i, a := range p.Architectures {
		if err := architectures.check(fmt.Sprintf("architectures[%d]", i), a); err != nil {
			return err
		}
	}
	for i, m := range p.ArchMap {
		for _, a := range append([]specs.Arch{m.Arch}, m.SubArches...) {
			if err := architectures.check(fmt.Sprintf("archMap[%d]", i), a); err != nil {
				return err
			}
		}
	}
	for i, f := range p.Flags {
		if err := flags.check(fmt.Sprintf("flags[%d]", i), f); err != nil {
			return err
		}
	}
	for i, rule := range p.Syscalls {
		if rule == nil {
			return fmt.Errorf("syscalls[%d]: null rule", i)
		}
		if err := validateRule(rule, table); err != nil {
			return fmt.Errorf("syscalls[%d]: %w", i, err)
		}
		if rule.Action == specs.ActNotify && p.ListenerPath == "" {
			return fmt.Errorf("syscalls[%d]: action SCMP_ACT_NOTIFY needs listenerPath", i)
		}
	}
	return nil
}

func validateRule(rule *mobyseccomp.Syscall, table *syscallTable) error {
	names := rule.Names
	//lint:ignore SA1019 old profiles still use "name", which the runtime applies like "names"
	if legacy := rule.Name; legacy != "" {
		// moby refuses both, but only for rules that apply to the container at hand.
		if len(rule.Names) > 0 {
			return errors.New("name and names: both set, expected one of them")
		}
		names = []string{legacy}
	}
	if len(names) == 0 {
		return errors.New("names: empty, expected at least one syscall name")
	}
	for _, name := range names {
		if !table.known(name) {
			return fmt.Errorf("names: %q is not a Linux syscall", name)
		}
	}
	if err := actions.check("action", rule.Action); err != nil {
		return err
	}
	if rule.ErrnoRet != nil && !takesErrno(rule.Action) {
		return fmt.Errorf("errnoRet: set with action %s, expected SCMP_ACT_ERRNO or SCMP_ACT_TRACE", rule.Action)
	}
	for j, arg := range rule.Args {
		// Syscalls take at most six arguments.
		if arg.Index > 5 {
			return fmt.Errorf("args[%d].index: %d, expected 0 to 5", j, arg.Index)
		}
		if err := operators.check(fmt.Sprintf("args[%d].op", j), arg.Op); err != nil {
			return err
		}
	}
	if err := validateFilter("includes", rule.Includes); err != nil {
		return err
	}
	return validateFilter("excludes", rule.Excludes)
}

func validateFilter(what string, f *mobyseccomp.Filter) error {
	if f == nil {
		return nil
	}
	for k, c := range f.Caps {
		if err := capabilities().check(fmt.Sprintf("%s.caps[%d]", what, k), c); err != nil {
			return err
		}
	}
	for k, a := range f.Arches {
		if err := filterArches.check(fmt.Sprintf("%s.arches[%d]", what, k), a); err != nil {
			return err
		}
	}
	return nil
}

// conditionCaps lists the capabilities that a profile's includes and excludes name.
func conditionCaps(p *mobyseccomp.Seccomp) []string {
	var caps []string
	for _, rule := range p.Syscalls {
		for _, f := range []*mobyseccomp.Filter{rule.Includes, rule.Excludes} {
			if f != nil {
				caps = append(caps, f.Caps...)
			}
		}
	}
	slices.Sort(caps)
	return slices.Compact(caps)
}

// specForCaps is the part of an OCI spec that moby's conversion reads.
func specForCaps(caps []string) *specs.Spec {
	return &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps}}}
}
