package seccomp

import "github.com/opencontainers/runtime-spec/specs-go"

// complain turns a profile into its complain-mode twin: every action that would stop a
// call (errno, kill, trap, trace) logs it instead, so that a workload shows in the audit
// log what a profile would refuse without being refused. ALLOW, LOG and NOTIFY stay.
// Rules that end up equal to the default action are left for the runtime to skip.
func complain(p *specs.LinuxSeccomp) {
	if enforcing(p.DefaultAction) {
		p.DefaultAction = specs.ActLog
		p.DefaultErrnoRet = nil
	}
	for i := range p.Syscalls {
		if enforcing(p.Syscalls[i].Action) {
			p.Syscalls[i].Action = specs.ActLog
			p.Syscalls[i].ErrnoRet = nil
		}
	}
}
