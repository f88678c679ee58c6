package seccomp

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompileRules(t *testing.T) {
	tests := []struct {
		name    string
		goarch  string
		rules   []Rule
		wantErr string
	}{
		{name: "defaults", goarch: "amd64", rules: []Rule{{Names: []string{"io_uring_setup", "userfaultfd"}}}},
		{name: "kill", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}, Action: "SCMP_ACT_KILL_PROCESS"}}},
		{name: "no names", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}}, {Action: "SCMP_ACT_LOG"}}, wantErr: "extra seccomp rule 1: names: empty"},
		{name: "unknown syscall", goarch: "amd64", rules: []Rule{{Names: []string{"io_uringsetup"}}}, wantErr: `extra seccomp rule 0: names: "io_uringsetup" is not a syscall on amd64`},
		{name: "syscall of another arch", goarch: "arm64", rules: []Rule{{Names: []string{"arch_prctl"}}}, wantErr: `"arch_prctl" is not a syscall on arm64`},
		{name: "unknown action", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}, Action: "DENY"}}, wantErr: `extra seccomp rule 0: action: unknown value "DENY", expected one of`},
		{name: "notify", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}, Action: "SCMP_ACT_NOTIFY"}}, wantErr: "SCMP_ACT_NOTIFY needs a listener"},
		{name: "unknown errno", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}, Errno: "EBADIDEA"}}, wantErr: `errno: unknown value "EBADIDEA", expected an errno name`},
		{name: "errno without errno action", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}, Action: "SCMP_ACT_LOG", Errno: "EPERM"}}, wantErr: "errno: set with action SCMP_ACT_LOG"},
		{name: "syscall in two rules", goarch: "amd64", rules: []Rule{{Names: []string{"ptrace"}}, {Names: []string{"bpf", "ptrace"}, Action: "SCMP_ACT_LOG"}}, wantErr: `extra seccomp rule 1: syscall "ptrace" is already in rule 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compiled, err := compileRules(tt.rules, newSyscallTable(tt.goarch))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, compiled.syscalls, len(tt.rules))
			for i, r := range tt.rules {
				for _, name := range r.Names {
					assert.True(t, compiled.has(name))
				}
				assert.Equal(t, r.Names, compiled.syscalls[i].Names)
			}
		})
	}
}

func TestExtraRulesInNewStore(t *testing.T) {
	_, err := NewStore(Options{ExtraRules: []Rule{{Names: []string{"ptrace"}, Action: "SCMP_ACT_DENY"}}, Log: quietLog()})
	assert.ErrorContains(t, err, `extra seccomp rule 0: action: unknown value "SCMP_ACT_DENY"`)
}

func TestExtraRulesOverrideProfile(t *testing.T) {
	dir := t.TempDir()
	// The profile allows mkdir plainly and with an argument condition, and denies ptrace.
	writeProfile(t, dir, "allow.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
		{"names":["read","mkdir","write"],"action":"SCMP_ACT_ALLOW"},
		{"names":["mkdir"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":448,"op":"SCMP_CMP_EQ"}]},
		{"names":["ptrace"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}`)
	s := newStore(t, dir,
		Rule{Names: []string{"mkdir", "userfaultfd"}, Errno: "EACCES"},
		Rule{Names: []string{"ptrace"}, Action: "SCMP_ACT_KILL_PROCESS"},
	)
	for _, profile := range []string{"allow.json", ""} {
		t.Run("profile="+profile, func(t *testing.T) {
			p, err := s.Build(Request{Profile: profile, Capabilities: []string{"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}})
			require.NoError(t, err)
			mkdir := rulesFor(p, "mkdir")
			require.Len(t, mkdir, 1, "the extra rule is the only rule for its syscalls")
			assert.Equal(t, "SCMP_ACT_ERRNO", mkdir[0].Action)
			assert.Equal(t, uint32(13), mkdir[0].ErrnoRet.GetValue(), "EACCES")
			assert.Empty(t, mkdir[0].Args)
			assert.Equal(t, []string{"SCMP_ACT_KILL_PROCESS"}, actionsFor(p, "ptrace"))
			assert.Equal(t, []string{"SCMP_ACT_ALLOW"}, actionsFor(p, "read"), "other syscalls of a shared rule stay")
			assert.Equal(t, []string{"SCMP_ACT_ALLOW"}, actionsFor(p, "write"))
		})
	}
}

func TestComplain(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "strict.json", `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":1,"syscalls":[
		{"names":["read","write"],"action":"SCMP_ACT_ALLOW"},
		{"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":1},
		{"names":["ptrace"],"action":"SCMP_ACT_KILL_PROCESS"},
		{"names":["bpf"],"action":"SCMP_ACT_KILL_THREAD"},
		{"names":["acct"],"action":"SCMP_ACT_TRAP"},
		{"names":["chroot"],"action":"SCMP_ACT_TRACE"},
		{"names":["kill"],"action":"SCMP_ACT_LOG"}]}`)
	s := newStore(t, dir, Rule{Names: []string{"userfaultfd"}, Action: "SCMP_ACT_KILL"})

	enforced, err := s.Build(Request{Profile: "strict.json"})
	require.NoError(t, err)
	complaining, err := s.Build(Request{Profile: "strict.json", Complain: true})
	require.NoError(t, err)

	assert.Equal(t, "SCMP_ACT_ERRNO", enforced.DefaultAction, "enforcing builds are not touched by complain builds")
	assert.Equal(t, "SCMP_ACT_LOG", complaining.DefaultAction)
	assert.Nil(t, complaining.DefaultErrno)
	require.Len(t, complaining.Syscalls, len(enforced.Syscalls))
	for i, r := range complaining.Syscalls {
		want := "SCMP_ACT_LOG"
		if enforced.Syscalls[i].Action == "SCMP_ACT_ALLOW" {
			want = "SCMP_ACT_ALLOW"
		}
		assert.Equal(t, want, r.Action, "rule for %v", r.Names)
		assert.Nil(t, r.ErrnoRet, "rule for %v", r.Names)
	}
	assert.Equal(t, []string{"SCMP_ACT_LOG"}, actionsFor(complaining, "userfaultfd"), "extra rules complain too")
	assert.Equal(t, []string{"SCMP_ACT_KILL"}, actionsFor(enforced, "userfaultfd"))

	def, err := s.Build(Request{Complain: true})
	require.NoError(t, err)
	assert.Equal(t, "SCMP_ACT_LOG", def.DefaultAction)
	assertNoRefusal(t, def)
}

// assertNoRefusal checks that p lets every call through (allowed or logged).
func assertNoRefusal(t testing.TB, p *api.LinuxSeccomp) {
	t.Helper()
	assert.False(t, enforcing(specs.LinuxSeccompAction(p.DefaultAction)), "default action %s", p.DefaultAction)
	for _, r := range p.Syscalls {
		assert.False(t, enforcing(specs.LinuxSeccompAction(r.Action)), "rule for %v: %s", r.Names, r.Action)
	}
}
