package seccomp

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	e2eruntime "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/testenv"
)

// TestEffect runs a static busybox under runc with built policies, to check that what the
// store builds does in the kernel what it says. It needs root, the cached runc (make
// runtime-bins) and a static busybox; without them it skips.
func TestEffect(t *testing.T) {
	runc, busybox := effectPrereqs(t)
	dir := t.TempDir()
	writeProfile(t, dir, "deny-mkdir.json", denyMkdir)
	s := newStore(t, dir, Rule{Names: []string{"rmdir"}, Errno: "EACCES"})

	tests := []struct {
		name   string
		req    Request
		script string
		want   string
	}{
		{"named profile denies mkdir", Request{Profile: "deny-mkdir.json"}, "mkdir /tmp/d", "mkdir: can't create directory '/tmp/d': Operation not permitted"},
		{"default profile allows mkdir", Request{}, "mkdir /tmp/d && echo made", "made"},
		{"complain lets mkdir through", Request{Profile: "deny-mkdir.json", Complain: true}, "mkdir /tmp/d && echo made", "made"},
		{"extra rule denies rmdir", Request{}, "mkdir /tmp/d && rmdir /tmp/d", "rmdir: '/tmp/d': Permission denied"},
		{"filter is installed", Request{}, "grep Seccomp: /proc/self/status", "Seccomp:\t2"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Capabilities = containerdCaps
			policy, err := s.Build(tt.req)
			require.NoError(t, err)
			out := runBusybox(t, runc, busybox, fmt.Sprintf("nri-suite-seccomp-%d-%d", os.Getpid(), i), tt.script, policy)
			assert.Contains(t, out, tt.want)
		})
	}
}

func effectPrereqs(t *testing.T) (runc, busybox string) {
	t.Helper()
	testenv.RequireRoot(t, "to run runc")
	runc = e2eruntime.DefaultCache().Bin("runc")
	if _, err := os.Stat(runc); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("needs the cached runc (make runtime-bins): %v", err))
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		testenv.Unavailable(t, fmt.Sprintf("needs busybox (Debian's busybox-static): %v", err))
	}
	f, err := elf.Open(busybox)
	if err != nil {
		testenv.Unavailable(t, fmt.Sprintf("needs a static busybox: %v", err))
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			testenv.Unavailable(t, "needs a static busybox (Debian's busybox-static), "+busybox+" is dynamically linked")
		}
	}
	return runc, busybox
}

// runBusybox runs `busybox sh -c script` in a runc container confined by policy, converted
// back to OCI the way the runtime converts an NRI adjustment, and returns its output.
func runBusybox(t *testing.T, runc, busybox, id, script string, policy *api.LinuxSeccomp) string {
	t.Helper()
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "proc", "tmp"} {
		require.NoError(t, os.MkdirAll(filepath.Join(rootfs, d), 0o755))
	}
	bin, err := os.ReadFile(busybox)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), bin, 0o755))

	spec := specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: rootfs},
		Process: &specs.Process{
			Args:            []string{"/bin/busybox", "sh", "-c", script},
			Env:             []string{"PATH=/bin"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: containerdCaps, Effective: containerdCaps, Permitted: containerdCaps,
			},
		},
		Mounts: []specs.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			},
			Seccomp: ociSeccomp(policy),
		},
	}
	data, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644))

	var out bytes.Buffer
	cmd := exec.Command(runc, "--root", filepath.Join(bundle, "state"), "run", "--bundle", bundle, id)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done: // the script's exit status is part of what the test checks in its output
	case <-time.After(time.Minute):
		require.NoError(t, cmd.Process.Kill())
		<-done
		t.Fatalf("runc run %s did not finish: %s", id, out.String())
	}
	return out.String()
}

func ociSeccomp(p *api.LinuxSeccomp) *specs.LinuxSeccomp {
	o := &specs.LinuxSeccomp{
		DefaultAction:    specs.LinuxSeccompAction(p.DefaultAction),
		ListenerPath:     p.ListenerPath,
		ListenerMetadata: p.ListenerMetadata,
		Syscalls:         api.ToOCILinuxSyscalls(p.Syscalls),
	}
	if p.DefaultErrno != nil {
		errno := uint(p.DefaultErrno.Value)
		o.DefaultErrnoRet = &errno
	}
	for _, a := range p.Architectures {
		o.Architectures = append(o.Architectures, specs.Arch(a))
	}
	for _, f := range p.Flags {
		o.Flags = append(o.Flags, specs.LinuxSeccompFlag(f))
	}
	return o
}
