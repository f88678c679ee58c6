package seccomp

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// DefaultCapabilities are the capabilities containerd and CRI-O give a
// container by default. NRI does not pass a container's capabilities, so the
// plugin builds profiles, and the baseline, for these: the rules a profile
// conditions on an added capability (CAP_SYS_ADMIN, ...) stay out, which
// errs on the strict side.
var DefaultCapabilities = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// Baseline is what the runtime default profile denies on this node, for a set of
// capabilities: the measure of a seccomp policy that another plugin gives a container.
// A policy is judged by what it really blocks, as the kernel applies it:
//   - a rule counts only for the names that are syscalls on the node's architecture: the
//     runtime skips the others (unknown names, empty names, another architecture's), so
//     a deny of them denies nothing;
//   - a rule denies when its action is errno, kill (thread or process) or trap; allow,
//     log and notify (a user-space listener may allow the call) do not, nor does trace,
//     which a tracer in the container itself may let through;
//   - a denying rule with argument conditions denies only some calls, so the default
//     action decides the others; an allowing rule with conditions lets some through.
type Baseline struct {
	// guarded are the syscalls the runtime default denies, each with the argument
	// conditions under which it allows some calls of it (none: every call is denied).
	guarded map[string][]string
	names   []string // guarded's keys, sorted
}

// NewBaseline builds the runtime default profile for the node's architecture (arch is a
// GOARCH, "" for the node's) and the capabilities, and records what it denies.
func NewBaseline(arch string, caps []string) (*Baseline, error) {
	table := hostSyscalls()
	if arch != "" && arch != table.goarch {
		return nil, fmt.Errorf("seccomp baseline for %q: the runtime default profile is known for the node's architecture %s: %w",
			arch, table.goarch, ErrUnsupportedArch)
	}
	oci, err := defaultSource().setup(specForCaps(caps))
	if err != nil {
		return nil, fmt.Errorf("seccomp baseline: building the runtime default profile: %w", err)
	}
	def := newEffect(api.FromOCILinuxSeccomp(oci), table.onNode)
	b := &Baseline{guarded: map[string][]string{}}
	for name := range table.onArch {
		r := def.rules[name]
		if !def.restDenied(r) || slices.Contains(r.allows, "") {
			continue // allowed, at least unconditionally for some argument values
		}
		b.guarded[name] = r.allows
	}
	b.names = slices.Sorted(maps.Keys(b.guarded))
	return b, nil
}

// LetsThrough lists, sorted, the syscalls the runtime default denies that policy lets
// through: all calls of one, or calls that the runtime default denies by their
// arguments. Nil policy lets everything through.
func (b *Baseline) LetsThrough(policy *api.LinuxSeccomp) []string {
	// Only the syscalls the runtime default denies matter; they are all the
	// node's.
	e := newEffect(policy, func(name string) bool { _, ok := b.guarded[name]; return ok })
	var out []string
	for _, name := range b.names {
		r := e.rules[name]
		if !e.restDenied(r) || slices.ContainsFunc(r.allows, func(a string) bool { return !slices.Contains(b.guarded[name], a) }) {
			out = append(out, name)
		}
	}
	return out
}

// effect is a policy indexed by syscall, with only what counts (Baseline).
type effect struct {
	defaultDenies bool
	rules         map[string]syscallRules
}

// syscallRules is what the rules naming one syscall do.
type syscallRules struct {
	// allows holds the argument conditions of each allowing rule, canonically
	// ("" for none: every call allowed).
	allows []string
	// deniesAll: a denying rule without argument conditions.
	deniesAll bool
}

// newEffect indexes p's rules for the syscalls keep keeps: the node's, of
// which the runtime skips the others.
func newEffect(p *api.LinuxSeccomp, keep func(name string) bool) effect {
	e := effect{defaultDenies: denies(p.GetDefaultAction()), rules: map[string]syscallRules{}}
	for _, rule := range p.GetSyscalls() {
		for _, name := range rule.GetNames() {
			if !keep(name) {
				continue
			}
			r := e.rules[name]
			switch {
			case !denies(rule.GetAction()):
				r.allows = append(r.allows, conditions(rule.GetArgs()))
			case len(rule.GetArgs()) == 0:
				r.deniesAll = true
			}
			e.rules[name] = r
		}
	}
	return e
}

// restDenied reports whether the calls of a syscall that no allowing rule matches are
// denied: by a rule without conditions, or by the default action. Conditional denies
// leave the other calls to the default.
func (e effect) restDenied(r syscallRules) bool { return r.deniesAll || e.defaultDenies }

// conditions is a rule's argument conditions in a canonical form, for comparison.
func conditions(args []*api.LinuxSeccompArg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprintf("%d %s %d %d", a.GetIndex(), a.GetOp(), a.GetValue(), a.GetValueTwo())
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// denies reports whether an action stops the call whoever runs in the container.
func denies(action string) bool {
	switch action {
	case "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP":
		return true
	}
	return false
}
