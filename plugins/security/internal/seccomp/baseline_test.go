package seccomp

import (
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// foreignSyscall is a syscall of another architecture than the node's.
func foreignSyscall(t *testing.T) string {
	table := hostSyscalls()
	for _, name := range []string{"arm_fadvise64_64", "arch_prctl", "cacheflush", "vm86"} {
		if table.known(name) && !table.onNode(name) {
			return name
		}
	}
	t.Fatalf("no foreign syscall for %s", table.goarch)
	return ""
}

func TestBaseline(t *testing.T) {
	b, err := NewBaseline("", DefaultCapabilities)
	require.NoError(t, err)
	def, err := newStore(t, "").Build(Request{Capabilities: DefaultCapabilities})
	require.NoError(t, err)
	all := b.LetsThrough(nil)
	require.Contains(t, all, "kexec_load")
	require.Contains(t, all, "mount", "CAP_SYS_ADMIN is not a default capability")
	require.NotContains(t, all, "read")
	require.NotContains(t, all, "ptrace", "the runtime default allows it since Linux 4.8")

	// denyAllBut denies, by default allow, every syscall the runtime default
	// denies but the one named, which gets the rules given.
	denyAllBut := func(name string, rules ...*api.LinuxSyscall) *api.LinuxSeccomp {
		p := &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW",
			Syscalls: []*api.LinuxSyscall{{Names: slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == name }), Action: "SCMP_ACT_ERRNO"}}}
		p.Syscalls = append(p.Syscalls, rules...)
		return p
	}
	deny := func(action string, names ...string) *api.LinuxSyscall {
		return &api.LinuxSyscall{Names: names, Action: action}
	}
	withoutCloneConditions := proto.Clone(def).(*api.LinuxSeccomp)
	for _, r := range withoutCloneConditions.Syscalls {
		if slices.Equal(r.Names, []string{"clone"}) {
			r.Args = nil
		}
	}
	otherCloneConditions := proto.Clone(def).(*api.LinuxSeccomp)
	for _, r := range otherCloneConditions.Syscalls {
		if slices.Equal(r.Names, []string{"clone"}) {
			r.Args[0].Value = 0
		}
	}
	conditional := []*api.LinuxSeccompArg{{Index: 0, Op: "SCMP_CMP_EQ", Value: 1}}

	for _, tc := range []struct {
		name   string
		policy *api.LinuxSeccomp
		want   []string
	}{
		{"the runtime default", def, nil},
		{"no policy", nil, all},
		{"allow by default", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"}, all},
		{"log by default", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_LOG"}, all},
		{"deny by default", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO"}, nil},
		{"kill by default", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_KILL_PROCESS"}, nil},
		{"trace by default: a tracer in the container may allow", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_TRACE"}, all},
		{"every denied syscall denied by name", denyAllBut(""), nil},
		{"kill and trap deny", denyAllBut("kexec_load", deny("SCMP_ACT_KILL", "kexec_load"), deny("SCMP_ACT_TRAP", "kexec_load")), nil},
		{"an unknown name denies nothing", denyAllBut("kexec_load", deny("SCMP_ACT_ERRNO", "kexec-load", "no_such_syscall")), []string{"kexec_load"}},
		{"an empty name denies nothing", denyAllBut("kexec_load", deny("SCMP_ACT_ERRNO", "")), []string{"kexec_load"}},
		{"another architecture's name denies nothing", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW",
			Syscalls: []*api.LinuxSyscall{deny("SCMP_ACT_ERRNO", foreignSyscall(t))}}, all},
		{"log, notify and trace do not deny", denyAllBut("kexec_load", deny("SCMP_ACT_LOG", "kexec_load"),
			deny("SCMP_ACT_NOTIFY", "kexec_load"), deny("SCMP_ACT_TRACE", "kexec_load")), []string{"kexec_load"}},
		{"a conditional deny denies some calls", denyAllBut("kexec_load",
			&api.LinuxSyscall{Names: []string{"kexec_load"}, Action: "SCMP_ACT_ERRNO", Args: conditional}), []string{"kexec_load"}},
		{"an allow beside a deny lets calls through", denyAllBut("", deny("SCMP_ACT_ALLOW", "mount")), []string{"mount"}},
		{"a conditional allow lets some through", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO",
			Syscalls: []*api.LinuxSyscall{{Names: []string{"mount", "read"}, Action: "SCMP_ACT_ALLOW", Args: conditional}}}, []string{"mount"}},
		{"explicit allows under deny by default", &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO",
			Syscalls: []*api.LinuxSyscall{deny("SCMP_ACT_ALLOW", "ptrace", "mount", "bpf", "read")}}, []string{"bpf", "mount"}},
		{"clone without the runtime default's conditions", withoutCloneConditions, []string{"clone"}},
		{"clone with other conditions", otherCloneConditions, []string{"clone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, b.LetsThrough(tc.policy))
		})
	}

	_, err = NewBaseline("riscv64", DefaultCapabilities)
	assert.ErrorIs(t, err, ErrUnsupportedArch)
}

func BenchmarkLetsThrough(b *testing.B) {
	base, err := NewBaseline("", DefaultCapabilities)
	require.NoError(b, err)
	def, err := newStore(b, "").Build(Request{Capabilities: DefaultCapabilities})
	require.NoError(b, err)
	for b.Loop() {
		base.LetsThrough(def)
	}
}
