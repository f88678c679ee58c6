package seccomp

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/sys/capability"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// oneOf is a closed vocabulary of a profile field; its error lists what is expected.
type oneOf[T ~string] []T

func (v oneOf[T]) check(what string, value T) error {
	if slices.Contains(v, value) {
		return nil
	}
	names := make([]string, len(v))
	for i, s := range v {
		names[i] = string(s)
	}
	return fmt.Errorf("%s: unknown value %q, expected one of %s", what, value, strings.Join(names, ", "))
}

var (
	actions = oneOf[specs.LinuxSeccompAction]{
		specs.ActAllow, specs.ActErrno, specs.ActKill, specs.ActKillProcess, specs.ActKillThread,
		specs.ActLog, specs.ActTrap, specs.ActTrace, specs.ActNotify,
	}
	operators = oneOf[specs.LinuxSeccompOperator]{
		specs.OpEqualTo, specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual,
		specs.OpGreaterEqual, specs.OpGreaterThan, specs.OpMaskedEqual,
	}
	flags = oneOf[specs.LinuxSeccompFlag]{
		specs.LinuxSeccompFlagLog, specs.LinuxSeccompFlagSpecAllow, specs.LinuxSeccompFlagWaitKillableRecv,
	}
	architectures = oneOf[specs.Arch]{
		specs.ArchX86, specs.ArchX86_64, specs.ArchX32, specs.ArchARM, specs.ArchAARCH64,
		specs.ArchMIPS, specs.ArchMIPS64, specs.ArchMIPS64N32, specs.ArchMIPSEL, specs.ArchMIPSEL64,
		specs.ArchMIPSEL64N32, specs.ArchPPC, specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390,
		specs.ArchS390X, specs.ArchPARISC, specs.ArchPARISC64, specs.ArchRISCV64,
		specs.ArchLOONGARCH64, specs.ArchM68K, specs.ArchSH, specs.ArchSHEB,
	}
	// filterArches are libseccomp's architecture names, which includes/excludes use
	// ("arches": ["amd64", "x32"]).
	filterArches = oneOf[string]{
		"x86", "amd64", "x32", "arm", "arm64", "loongarch64", "mips", "mips64", "mips64n32",
		"mipsel", "mipsel64", "mipsel64n32", "mips3l64n32", "ppc", "ppc64", "ppc64le",
		"riscv64", "s390", "s390x", "parisc", "parisc64",
	}
)

// capabilities are the capability names a profile may condition a rule on ("CAP_SYS_ADMIN").
var capabilities = sync.OnceValue(func() oneOf[string] {
	var names oneOf[string]
	for _, c := range capability.ListKnown() {
		names = append(names, "CAP_"+strings.ToUpper(c.String()))
	}
	return names
})

// errnos maps errno names ("EPERM") to their values, for extra rules.
var errnos = sync.OnceValue(func() map[string]syscall.Errno {
	m := map[string]syscall.Errno{}
	for e := syscall.Errno(1); e < 4096; e++ {
		if name := unix.ErrnoName(e); name != "" {
			m[name] = e
		}
	}
	return m
})

// enforcing reports whether an action stops the call, which complain mode turns into a log.
func enforcing(a specs.LinuxSeccompAction) bool {
	switch a {
	case specs.ActErrno, specs.ActKill, specs.ActKillProcess, specs.ActKillThread, specs.ActTrap, specs.ActTrace:
		return true
	}
	return false
}

// takesErrno reports whether an action may carry an errno (errnoRet) by the runtime spec.
func takesErrno(a specs.LinuxSeccompAction) bool {
	return a == specs.ActErrno || a == specs.ActTrace
}
