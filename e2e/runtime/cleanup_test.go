package runtime

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMountinfoLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want mountInfo
		ok   bool
	}{
		{
			name: "cgroup v1 controller",
			line: "35 25 0:30 / /sys/fs/cgroup/cpuset rw,relatime shared:13 - cgroup cgroup rw,cpuset",
			want: mountInfo{mountPoint: "/sys/fs/cgroup/cpuset", fsType: "cgroup", superOptions: "rw,cpuset"},
			ok:   true,
		},
		{
			name: "no optional fields",
			line: "40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate",
			want: mountInfo{mountPoint: "/sys/fs/cgroup/unified", fsType: "cgroup2", superOptions: "rw,nsdelegate"},
			ok:   true,
		},
		{
			name: "escaped space in the mount point",
			line: `99 1 0:50 / /run/a\040b rw - tmpfs tmpfs rw`,
			want: mountInfo{mountPoint: "/run/a b", fsType: "tmpfs", superOptions: "rw"},
			ok:   true,
		},
		{name: "no separator", line: "35 25 0:30 / /x rw shared:13 cgroup cgroup rw"},
		{name: "nothing after the separator", line: "35 25 0:30 / /x rw - cgroup"},
		{name: "empty", line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMountinfoLine(tt.line)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseMountinfoLine(f *testing.F) {
	f.Add("35 25 0:30 / /sys/fs/cgroup/cpuset rw,relatime shared:13 - cgroup cgroup rw,cpuset")
	f.Add(`99 1 0:50 / /run/a\040b\ rw - tmpfs tmpfs rw`)
	f.Add("- - - - - - - -")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseMountinfoLine(line)
		if !ok && m != (mountInfo{}) {
			t.Fatalf("rejected line %q gave %+v", line, m)
		}
	})
}

func TestUnescapeOctal(t *testing.T) {
	tests := map[string]string{
		`/plain`:          "/plain",
		`/a\040b`:         "/a b",
		`/tab\011x`:       "/tab\tx",
		`/back\134slash`:  `/back\slash`,
		`/short\04`:       `/short\04`,
		`/not\999octal`:   `/not\999octal`,
		`/trailing\`:      `/trailing\`,
		`/\040\040twice`:  "/  twice",
		`/overflow\400xy`: `/overflow\400xy`,
	}
	for in, want := range tests {
		assert.Equal(t, want, unescapeOctal(in), "unescapeOctal(%q)", in)
	}
}

func TestIsUnder(t *testing.T) {
	assert.True(t, isUnder("/run/nri-sandbox-1", "/run/nri-sandbox-1"))
	assert.True(t, isUnder("/run/nri-sandbox-1/x", "/run/nri-sandbox-1"))
	assert.False(t, isUnder("/run/nri-sandbox-12", "/run/nri-sandbox-1"), "a sibling with the same prefix")
	assert.False(t, isUnder("/run", "/run/nri-sandbox-1"))
}

// A process working in a run dir belongs to that sandbox, is found by PID
// and killed; one in a sibling dir with the same prefix is not.
func TestKillSandboxProcesses(t *testing.T) {
	base := t.TempDir()
	runDir := filepath.Join(base, runDirPrefix+"1")
	sibling := filepath.Join(base, runDirPrefix+"12")
	require.NoError(t, os.MkdirAll(runDir, 0o755))
	require.NoError(t, os.MkdirAll(sibling, 0o755))

	start := func(dir, argv0 string) *exec.Cmd {
		cmd := exec.Command("sleep", "300")
		cmd.Dir = dir
		if argv0 != "" {
			cmd.Args[0] = argv0
		}
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return cmd
	}
	byCwd := start(runDir, "")
	byArg := start(base, filepath.Join(runDir, "shim"))
	other := start(sibling, "")

	procs, err := sandboxProcesses(runDir, "/"+runDirPrefix+"no-such-cgroup")
	require.NoError(t, err)
	found := map[int]string{}
	for _, p := range procs {
		found[p.pid] = p.why
	}
	assert.Contains(t, found[byCwd.Process.Pid], "cwd is "+runDir)
	assert.Contains(t, found[byArg.Process.Pid], "command line refers to "+runDir)
	assert.NotContains(t, found, other.Process.Pid)

	log := logrus.New()
	log.SetOutput(testWriter{t})
	require.NoError(t, killSandboxProcesses(runDir, "/"+runDirPrefix+"no-such-cgroup", 10*time.Second, log))
	for _, cmd := range []*exec.Cmd{byCwd, byArg} {
		require.Eventually(t, func() bool {
			return syscall.Kill(cmd.Process.Pid, 0) != nil || isZombie(cmd.Process.Pid)
		}, 5*time.Second, 50*time.Millisecond, "pid %d is killed", cmd.Process.Pid)
	}
	assert.NoError(t, syscall.Kill(other.Process.Pid, 0), "the sibling's process is left alone")
	assert.Equal(t, []string{"run dir " + runDir}, LeftoversIn(runDir), "only the run dir itself is left")
}

func TestHostCleanupRemovesRunDir(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), runDirPrefix+"2")
	created := filepath.Join(t.TempDir(), "created", "by", "kubelet")
	require.NoError(t, os.MkdirAll(filepath.Join(runDir, "kubelet", "root"), 0o755))
	require.NoError(t, os.MkdirAll(created, 0o755))
	st := &hostState{CreatedDirs: []string{filepath.Dir(filepath.Dir(created))}}

	require.NoError(t, hostCleanup(runDir, st, false, logrus.New()))
	assert.NoDirExists(t, runDir)
	assert.NoDirExists(t, filepath.Dir(filepath.Dir(created)))
	assert.Empty(t, leftovers(runDir, st, false))
}
