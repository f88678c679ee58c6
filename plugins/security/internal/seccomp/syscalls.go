package seccomp

import (
	"runtime"
	"sync"

	"github.com/elastic/go-seccomp-bpf/arch"
	mobyseccomp "github.com/moby/profiles/seccomp"
)

// nodeABIs names, for each GOARCH with syscall tables, the tables of every ABI a process on
// such a node can use: a 64-bit x86 or ARM kernel also runs its 32-bit binaries.
var nodeABIs = map[string][]string{
	"amd64":   {"x86_64", "i386", "x32"},
	"386":     {"i386"},
	"arm64":   {"aarch64", "arm"},
	"arm":     {"arm"},
	"loong64": {"loong64"},
}

// syscallTable answers whether a syscall name means something, on any architecture
// (what a profile may name: the runtime skips names its architecture lacks, and profiles
// derived from Docker's default name the syscalls of every architecture) or on the node's
// (what an extra rule must name, or it would silently have no effect).
type syscallTable struct {
	goarch string
	onArch map[string]struct{}
	any    map[string]struct{}
}

// hostSyscalls is the table of the architecture this binary runs on, which is the
// architecture of the kernel that enforces the filter.
var hostSyscalls = sync.OnceValue(func() *syscallTable { return newSyscallTable(runtime.GOARCH) })

func newSyscallTable(goarch string) *syscallTable {
	t := &syscallTable{goarch: goarch, onArch: map[string]struct{}{}, any: map[string]struct{}{}}
	for _, name := range []string{"x86_64", "i386", "x32", "aarch64", "arm", "loong64"} {
		addTable(t.any, name)
	}
	for _, name := range nodeABIs[goarch] {
		addTable(t.onArch, name)
	}
	// The runtime default profile also names the syscalls of architectures without a
	// table here (s390x, ppc64le, riscv64) and, for every architecture, names that no
	// table has: libseccomp's multiplexed calls (send, recv).
	for _, rule := range mobyseccomp.DefaultProfile().Syscalls {
		everyArch := rule.Includes == nil || len(rule.Includes.Arches) == 0
		for _, name := range rule.Names {
			if _, inTable := t.any[name]; !inTable && everyArch {
				t.onArch[name] = struct{}{}
			}
			t.any[name] = struct{}{}
		}
	}
	if len(nodeABIs[goarch]) == 0 {
		// No table for this architecture: only typos can be caught.
		t.onArch = t.any
	}
	return t
}

func addTable(into map[string]struct{}, name string) {
	info, err := arch.GetInfo(name)
	if err != nil {
		return // every name above has a table; a newer library that drops one only weakens the check
	}
	for syscall := range info.SyscallNames {
		into[syscall] = struct{}{}
	}
}

// known reports whether name is a syscall on some architecture.
func (t *syscallTable) known(name string) bool {
	_, ok := t.any[name]
	return ok
}

// onNode reports whether name is a syscall a process on this table's architecture can make.
func (t *syscallTable) onNode(name string) bool {
	_, ok := t.onArch[name]
	return ok
}
