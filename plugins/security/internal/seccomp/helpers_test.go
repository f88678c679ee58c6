package seccomp

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// denyMkdir is a small profile in the Security Profiles Operator's output format.
const denyMkdir = `{
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
  "syscalls": [
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
  ]
}`

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func writeProfile(t testing.TB, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func newStore(t testing.TB, dir string, rules ...Rule) *Store {
	t.Helper()
	s, err := NewStore(Options{Dir: dir, ExtraRules: rules, Log: quietLog()})
	require.NoError(t, err)
	return s
}

// rulesFor returns the rules of p that name syscall.
func rulesFor(p *api.LinuxSeccomp, syscall string) []*api.LinuxSyscall {
	var out []*api.LinuxSyscall
	for _, r := range p.Syscalls {
		if slices.Contains(r.Names, syscall) {
			out = append(out, r)
		}
	}
	return out
}

// actionsFor lists the actions of the rules of p that name syscall.
func actionsFor(p *api.LinuxSeccomp, syscall string) []string {
	var out []string
	for _, r := range rulesFor(p, syscall) {
		out = append(out, r.Action)
	}
	return out
}

// generatedProfile is a profile of n single-syscall rules over the node's syscalls, with
// a mix of actions and argument conditions, as a large recorded profile looks.
func generatedProfile(t testing.TB, n int) string {
	t.Helper()
	var names []string
	for name := range hostSyscalls().onArch {
		names = append(names, name)
	}
	slices.Sort(names)
	require.GreaterOrEqual(t, len(names), n, "the node has fewer syscalls than rules asked for")
	errno := uint(1)
	p := specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &errno}
	for i, name := range names[:n] {
		rule := specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow}
		switch i % 3 {
		case 1:
			rule.Action, rule.ErrnoRet = specs.ActErrno, &errno
		case 2:
			rule.Args = []specs.LinuxSeccompArg{{Index: uint(i % 6), Value: uint64(i), Op: specs.OpNotEqual}}
		}
		p.Syscalls = append(p.Syscalls, rule)
	}
	data, err := json.Marshal(p)
	require.NoError(t, err)
	return string(data)
}
