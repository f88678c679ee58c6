package seccomp

import (
	"errors"
	"fmt"
	"slices"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// Rule is a node-wide extra rule merged into every built profile.
type Rule struct {
	// Names are syscall names; each must be a syscall on the node's architecture.
	Names []string `yaml:"names"`
	// Action is a seccomp action (SCMP_ACT_ERRNO when empty). SCMP_ACT_NOTIFY is refused:
	// the plugin has no listener to hand the calls to.
	Action string `yaml:"action"`
	// Errno names the error an SCMP_ACT_ERRNO rule returns (EPERM when empty).
	Errno string `yaml:"errno,omitempty"`
}

// extraRules are the validated extra rules and the syscalls they take over.
type extraRules struct {
	syscalls []specs.LinuxSyscall
	names    map[string]struct{}
}

// compileRules validates rules for the node's architecture; an error names the rule by
// its index and the bad value.
func compileRules(rules []Rule, table *syscallTable) (extraRules, error) {
	compiled := extraRules{names: map[string]struct{}{}}
	owner := map[string]int{}
	for i, r := range rules {
		sc, err := compileRule(r, table)
		if err != nil {
			return extraRules{}, fmt.Errorf("extra seccomp rule %d: %w", i, err)
		}
		for _, name := range sc.Names {
			if j, dup := owner[name]; dup {
				return extraRules{}, fmt.Errorf("extra seccomp rule %d: syscall %q is already in rule %d, expected each syscall in one rule", i, name, j)
			}
			owner[name] = i
			compiled.names[name] = struct{}{}
		}
		compiled.syscalls = append(compiled.syscalls, sc)
	}
	return compiled, nil
}

func compileRule(r Rule, table *syscallTable) (specs.LinuxSyscall, error) {
	if len(r.Names) == 0 {
		return specs.LinuxSyscall{}, errors.New("names: empty, expected at least one syscall name")
	}
	for _, name := range r.Names {
		if !table.onNode(name) {
			return specs.LinuxSyscall{}, fmt.Errorf("names: %q is not a syscall on %s", name, table.goarch)
		}
	}
	action := specs.LinuxSeccompAction(r.Action)
	if action == "" {
		action = specs.ActErrno
	}
	if err := actions.check("action", action); err != nil {
		return specs.LinuxSyscall{}, err
	}
	if action == specs.ActNotify {
		return specs.LinuxSyscall{}, errors.New("action: SCMP_ACT_NOTIFY needs a listener, which extra rules cannot have")
	}
	sc := specs.LinuxSyscall{Names: slices.Clone(r.Names), Action: action}
	switch {
	case action == specs.ActErrno:
		name := r.Errno
		if name == "" {
			name = "EPERM"
		}
		errno, ok := errnos()[name]
		if !ok {
			return specs.LinuxSyscall{}, fmt.Errorf("errno: unknown value %q, expected an errno name such as EPERM or ENOSYS", r.Errno)
		}
		ret := uint(errno)
		sc.ErrnoRet = &ret
	case r.Errno != "":
		return specs.LinuxSyscall{}, fmt.Errorf("errno: set with action %s, expected only with SCMP_ACT_ERRNO", action)
	}
	return sc, nil
}

// merge gives the extra rules precedence: their syscalls are taken out of every rule of
// the profile (allow or not, with or without argument conditions), because the runtime's
// libseccomp refuses two actions for one syscall, and then the extra rules are added.
func (x extraRules) merge(profile []specs.LinuxSyscall) []specs.LinuxSyscall {
	if len(x.syscalls) == 0 {
		return profile
	}
	merged := make([]specs.LinuxSyscall, 0, len(profile)+len(x.syscalls))
	for _, rule := range profile {
		kept := rule.Names
		if slices.ContainsFunc(rule.Names, x.has) {
			kept = slices.DeleteFunc(slices.Clone(rule.Names), x.has)
		}
		if len(kept) > 0 {
			rule.Names = kept
			merged = append(merged, rule)
		}
	}
	return append(merged, x.syscalls...)
}

func (x extraRules) has(name string) bool {
	_, ok := x.names[name]
	return ok
}
