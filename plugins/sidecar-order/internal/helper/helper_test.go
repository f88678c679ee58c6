package helper_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper/helpertest"
)

// The tests run the real, static helper binary as separate processes, on a
// coordination directory in a temporary directory; the commands behind it
// are the host's /bin/sh and coreutils.

var (
	buildOnce sync.Once
	binPath   string
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func helperBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sidecar-helper-")
		require.NoError(t, err)
		buildDir = dir
		binPath = helpertest.Build(t, dir)
	})
	require.NotEmpty(t, binPath, "the helper was built")
	return binPath
}

const poll = 20 * time.Millisecond

// waitLong bounds every wait of a test: far above what any step needs.
const waitLong = 20 * time.Second

// testPod is a coordination directory and the helpers started on it.
type testPod struct {
	t   *testing.T
	dir coord.Dir
	log string // a file the commands append events to
}

// newPod makes a coordination directory with spec; a zero hold timeout or
// stop grace becomes an hour, so that only the tests about them end early.
func newPod(t *testing.T, spec coord.Pod) *testPod {
	t.Helper()
	if spec.HoldTimeout == 0 {
		spec.HoldTimeout = coord.Duration(time.Hour)
	}
	if spec.StopGrace == 0 {
		spec.StopGrace = coord.Duration(time.Hour)
	}
	root := t.TempDir()
	p := &testPod{t: t, dir: coord.Dir{Path: filepath.Join(root, "pod")}, log: filepath.Join(root, "events")}
	require.NoError(t, os.Mkdir(p.dir.Path, 0o777))
	require.NoError(t, p.dir.WriteSpec(&spec))
	return p
}

func sidecar(name string, ready coord.Readiness, timeout time.Duration, onTimeout string) coord.Sidecar {
	return coord.Sidecar{Name: name, Ready: ready, Timeout: coord.Duration(timeout), OnTimeout: onTimeout}
}

// proc is one helper process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	state  *os.ProcessState
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs the helper for container name with role in front of argv.
func (p *testPod) start(role, name string, argv ...string) *proc {
	p.t.Helper()
	args := append([]string{"--dir", p.dir.Path, "--role", role, "--container", name, "--poll", poll.String(), "--"}, argv...)
	cmd := exec.Command(helperBin(p.t), args...)
	pr := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = pr.stderr
	cmd.Env = append(os.Environ(), "EVENTS="+p.log)
	// Its own process group, so that cleanup also ends the commands of a
	// helper that was killed (in a container, the PID namespace does that).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	require.NoError(p.t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		pr.state = cmd.ProcessState
		close(pr.done)
	}()
	p.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-pr.done
	})
	return pr
}

// main is a main container's helper whose command records "name started
// pid=<pid> sidecar=<ready|not-ready>" and then runs script.
func (p *testPod) main(name, sidecarName, script string) *proc {
	readyMarker := filepath.Join(p.dir.Path, "sidecar-"+sidecarName+".ready")
	return p.start(helper.RoleMain, name, "/bin/sh", "-c",
		fmt.Sprintf(`if [ -e %s ]; then s=ready; else s=not-ready; fi; echo "%s started pid=$$ sidecar=$s" >> "$EVENTS"; %s`, readyMarker, name, script))
}

// longRunning records its name when it gets SIGTERM and exits 0.
func longRunning(name string) []string {
	return []string{"/bin/sh", "-c", fmt.Sprintf(`trap 'echo "%s term" >> "$EVENTS"; exit 0' TERM; echo "%s running" >> "$EVENTS"; while :; do sleep 0.05; done`, name, name)}
}

// exit waits for the helper to exit and returns its exit code (-1 if a
// signal ended it).
func (pr *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-pr.done:
		return pr.state.ExitCode()
	case <-time.After(waitLong):
		t.Fatalf("helper did not exit within %s; stderr:\n%s", waitLong, pr.stderr.String())
		return 0
	}
}

func (pr *proc) running() bool {
	select {
	case <-pr.done:
		return false
	default:
		return true
	}
}

// events returns the lines the commands recorded.
func (p *testPod) events() []string {
	data, _ := os.ReadFile(p.log)
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(data)), " ", "_"))
}

// eventually polls cond with a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(poll)
	}
}

func hasEvent(p *testPod, event string) func() bool {
	return func() bool {
		for _, e := range p.events() {
			if e == event {
				return true
			}
		}
		return false
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // error substring; "" for success
	}{
		{"ok", []string{"--role", "main", "--container", "app", "--", "/app"}, ""},
		{"bad role", []string{"--role", "boss", "--container", "app", "--", "/app"}, `--role "boss": expected main or sidecar`},
		{"no container", []string{"--role", "main", "--", "/app"}, "missing --container"},
		{"no command", []string{"--role", "sidecar", "--container", "a", "--"}, "missing command"},
		{"bad poll", []string{"--role", "main", "--container", "a", "--poll", "0s", "--", "/x"}, "--poll 0s"},
		{"unknown flag", []string{"--bogus", "--", "/x"}, "flag provided but not defined: -bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := helper.ParseArgs(tc.args)
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"/app"}, o.Argv)
			assert.Equal(t, helper.DirPath, o.Dir.Path)
		})
	}
}

// TestMainWaitsForReadiness: for each readiness kind, the main's command
// starts only once the sidecar is ready, and sees it ready at its start.
func TestMainWaitsForReadiness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing listens until the test says so

	for _, tc := range []struct {
		kind  string
		ready func(t *testing.T, flag string) coord.Readiness
		// makeReady makes the sidecar ready; nil when starting suffices.
		makeReady func(t *testing.T, flag string)
	}{
		{kind: coord.ReadyProcess, ready: func(*testing.T, string) coord.Readiness { return coord.Readiness{Kind: coord.ReadyProcess} }},
		{kind: coord.ReadyFile,
			ready: func(_ *testing.T, flag string) coord.Readiness {
				return coord.Readiness{Kind: coord.ReadyFile, Target: flag}
			},
			makeReady: func(t *testing.T, flag string) { require.NoError(t, os.WriteFile(flag, nil, 0o644)) }},
		{kind: coord.ReadyExec,
			ready: func(_ *testing.T, flag string) coord.Readiness {
				return coord.Readiness{Kind: coord.ReadyExec, Target: "/bin/sh", Args: []string{"-c", "test -e " + flag}}
			},
			makeReady: func(t *testing.T, flag string) { require.NoError(t, os.WriteFile(flag, nil, 0o644)) }},
		{kind: coord.ReadyTCP,
			ready: func(*testing.T, string) coord.Readiness {
				return coord.Readiness{Kind: coord.ReadyTCP, Target: "127.0.0.1:" + strconv.Itoa(port)}
			},
			makeReady: func(t *testing.T, _ string) {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
			}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			flag := filepath.Join(t.TempDir(), "ready-flag")
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{sidecar("proxy", tc.ready(t, flag), time.Hour, coord.OnTimeoutFail)}})
			m := p.main("app", "proxy", "exit 0")
			s := p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
			eventually(t, "the sidecar's command to run", hasEvent(p, "proxy_running"))
			if tc.makeReady != nil {
				time.Sleep(10 * poll) // many readiness polls
				assert.False(t, p.dir.SidecarReady("proxy"), "not ready before the condition holds")
				assert.True(t, m.running(), "the main waits")
				assert.NotContains(t, strings.Join(p.events(), " "), "app_started", "the main's command has not started")
				tc.makeReady(t, flag)
			}
			assert.Equal(t, 0, m.exit(t), m.stderr.String())
			assert.Contains(t, p.events(), "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=ready",
				"the command runs as the helper's PID and sees the sidecar ready")
			assert.True(t, s.running(), "the sidecar keeps running")

			reports, err := p.dir.TakeReports()
			require.NoError(t, err)
			require.Len(t, reports, 1)
			assert.Equal(t, helper.RoleMain, reports[0].Role)
			assert.Empty(t, reports[0].TimedOut)
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			assert.Equal(t, 0, s.exit(t), s.stderr.String())
		})
	}
}

// TestSidecarsStartInOrder: the second sidecar's command starts only after
// the first is ready.
func TestSidecarsStartInOrder(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "first-ready")
	p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
		sidecar("first", coord.Readiness{Kind: coord.ReadyFile, Target: flag}, time.Hour, coord.OnTimeoutStart),
		sidecar("second", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutStart),
	}})
	second := p.start(helper.RoleSidecar, "second", longRunning("second")...)
	p.start(helper.RoleSidecar, "first", longRunning("first")...)
	eventually(t, "the first sidecar's command", hasEvent(p, "first_running"))
	time.Sleep(10 * poll)
	assert.NotContains(t, p.events(), "second_running", "the second waits for the first to be ready")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	eventually(t, "the second sidecar's command", hasEvent(p, "second_running"))
	eventually(t, "the second sidecar to be ready", func() bool { return p.dir.SidecarReady("second") })
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, second.exit(t), "no main ran: nothing to hold the signal for")
}

// TestExecPassthrough: the main's command is exec'd in place of the helper:
// its exit code and the signals sent to the helper's PID are its own.
func TestExecPassthrough(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		signal syscall.Signal // sent once the command runs; 0 for none
		code   int            // ExitCode(); -1 when killed by a signal
	}{
		{"exit code", "exit 7", 0, 7},
		{"trapped signal", `trap 'exit 42' USR1; while :; do sleep 0.05; done`, syscall.SIGUSR1, 42},
		{"default signal action", `while :; do sleep 0.05; done`, syscall.SIGKILL, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
			p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
			m := p.main("app", "proxy", tc.script)
			if tc.signal != 0 {
				eventually(t, "the main's command", hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=ready"))
				require.NoError(t, m.cmd.Process.Signal(tc.signal))
			}
			assert.Equal(t, tc.code, m.exit(t), m.stderr.String())
			if tc.signal == syscall.SIGKILL {
				assert.Equal(t, syscall.SIGKILL, m.state.Sys().(syscall.WaitStatus).Signal())
			}
		})
	}
}

// TestSidecarPassthrough: a sidecar's exit code, and signals other than
// SIGTERM and SIGINT, pass through its helper.
func TestSidecarPassthrough(t *testing.T) {
	p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutStart)}})
	s := p.start(helper.RoleSidecar, "proxy", "/bin/sh", "-c",
		`trap 'echo "proxy hup" >> "$EVENTS"' HUP; trap 'exit 3' USR2; echo "proxy running" >> "$EVENTS"; while :; do sleep 0.05; done`)
	eventually(t, "the sidecar's command", hasEvent(p, "proxy_running"))
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, "the sidecar to get SIGHUP", hasEvent(p, "proxy_hup"))
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGUSR2))
	assert.Equal(t, 3, s.exit(t), s.stderr.String())
	assert.False(t, p.dir.SidecarAlive("proxy"))
	assert.False(t, p.dir.SidecarReady("proxy"), "no ready marker outlives the sidecar")
}

// TestTimeouts: a sidecar that never becomes ready makes the main start
// anyway or fail, as configured, after its timeout and not before.
func TestTimeouts(t *testing.T) {
	for _, tc := range []struct {
		onTimeout string
		code      int
		started   bool
	}{
		{coord.OnTimeoutStart, 0, true},
		{coord.OnTimeoutFail, helper.ExitFailed, false},
	} {
		t.Run(tc.onTimeout, func(t *testing.T) {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
				sidecar("proxy", coord.Readiness{Kind: coord.ReadyFile, Target: "/nonexistent/never"}, 300*time.Millisecond, tc.onTimeout)}})
			p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
			m := p.main("app", "proxy", "exit 0")
			assert.Equal(t, tc.code, m.exit(t), m.stderr.String())
			assert.Equal(t, tc.started, hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=not-ready")())
			assert.Contains(t, m.stderr.String(), "sidecar proxy was not ready (file:/nonexistent/never) within 300ms")
			reports, err := p.dir.TakeReports()
			require.NoError(t, err)
			require.Len(t, reports, 1)
			assert.Equal(t, []string{"proxy"}, reports[0].TimedOut)
			assert.Equal(t, tc.onTimeout, reports[0].Action)
			assert.GreaterOrEqual(t, time.Duration(reports[0].Waited), 300*time.Millisecond, "waited the whole timeout")
		})
	}
}

// TestNeverReady: a sidecar whose readiness check never passes, for each
// kind (including an exec: program that the image does not have), holds
// neither the next sidecar nor the main beyond its timeout, and keeps
// running: a timeout is not a reason to stop it.
func TestNeverReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := ln.Addr().String()
	require.NoError(t, ln.Close())
	for _, tc := range []struct {
		name  string
		ready coord.Readiness
	}{
		{"missing file", coord.Readiness{Kind: coord.ReadyFile, Target: "/nonexistent/never"}},
		{"closed port", coord.Readiness{Kind: coord.ReadyTCP, Target: closedPort}},
		{"program not in the image", coord.Readiness{Kind: coord.ReadyExec, Target: "/nonexistent/check"}},
		{"failing program", coord.Readiness{Kind: coord.ReadyExec, Target: "/bin/false"}},
	} {
		ready := tc.ready
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
				sidecar("never", ready, 300*time.Millisecond, coord.OnTimeoutStart),
				sidecar("next", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
			never := p.start(helper.RoleSidecar, "never", longRunning("never")...)
			next := p.start(helper.RoleSidecar, "next", longRunning("next")...)
			m := p.main("app", "next", "exit 0")
			assert.Equal(t, 0, m.exit(t), m.stderr.String())
			assert.True(t, hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=ready")(),
				"the main started once the next sidecar was ready: %v", p.events())
			assert.Contains(t, m.stderr.String(), "sidecar never was not ready ("+ready.String()+") within 300ms: its helper runs")
			// "next" still runs: exec's goroutine copies its stderr from the
			// pipe when it gets to it, which under load can be after the main
			// exited.
			eventually(t, "next's message", func() bool {
				return strings.Contains(next.stderr.String(), "sidecar never was not ready ("+ready.String()+") within 300ms; starting anyway")
			})
			assert.True(t, never.running(), "the sidecar that never became ready keeps running")
			assert.False(t, p.dir.SidecarReady("never"))

			// A sidecar's helper reports when its command exits. The later
			// sidecar first (the earlier one holds SIGTERM until it is
			// gone); each once its command's shell has set the trap, which
			// it says with "running": under load, "next" may just have
			// started.
			for _, s := range []struct {
				name string
				proc *proc
			}{{"next", next}, {"never", never}} {
				eventually(t, "sidecar "+s.name+"'s command to set its trap", hasEvent(p, s.name+"_running"))
				require.NoError(t, s.proc.cmd.Process.Signal(syscall.SIGTERM))
				assert.Equal(t, 0, s.proc.exit(t), s.proc.stderr.String())
			}
			reports, err := p.dir.TakeReports()
			require.NoError(t, err)
			timedOut := map[string][]string{}
			for _, r := range reports {
				timedOut[r.Container] = r.TimedOut
			}
			assert.Equal(t, map[string][]string{"app": {"never"}, "next": {"never"}, "never": nil}, timedOut)
		})
	}
}

// TestUnknownSidecar: a sidecar that was never created shows in the
// timeout message, and a helper told to be a sidecar that is not in the
// spec refuses.
func TestUnknownSidecar(t *testing.T) {
	for _, tc := range []struct {
		onTimeout string
		code      int
	}{
		{coord.OnTimeoutStart, 0},
		{coord.OnTimeoutFail, helper.ExitFailed},
	} {
		t.Run(tc.onTimeout, func(t *testing.T) {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{sidecar("ghost", coord.Readiness{Kind: coord.ReadyProcess}, 200*time.Millisecond, tc.onTimeout)}})
			m := p.main("app", "ghost", "exit 0")
			assert.Equal(t, tc.code, m.exit(t), m.stderr.String())
			assert.Contains(t, m.stderr.String(), "sidecar ghost was not ready (process) within 200ms: no container of that name runs in this pod")
			assert.Equal(t, tc.code == 0, hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=not-ready")())
		})
	}

	p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{sidecar("ghost", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutStart)}})
	s := p.start(helper.RoleSidecar, "other", "/bin/true")
	assert.Equal(t, helper.ExitFailed, s.exit(t))
	assert.Contains(t, s.stderr.String(), "runs as a sidecar, but the pod's sidecars are [ghost]")
}

// TestCoordinationDirGone: a directory that disappears while the main waits
// ends the wait at once with each sidecar's on-timeout action; a missing one
// fails the helper with a message.
func TestCoordinationDirGone(t *testing.T) {
	for _, tc := range []struct {
		onTimeout string
		code      int
	}{
		{coord.OnTimeoutStart, 0},
		{coord.OnTimeoutFail, helper.ExitFailed},
	} {
		t.Run(tc.onTimeout, func(t *testing.T) {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
				sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, tc.onTimeout)}})
			m := p.start(helper.RoleMain, "app", "/bin/sh", "-c", `echo "app started" >> "$EVENTS"`)
			eventually(t, "the main to register", func() bool { return p.dir.Main("app") == coord.MainRunning })
			require.NoError(t, os.RemoveAll(p.dir.Path))
			assert.Equal(t, tc.code, m.exit(t), m.stderr.String())
			assert.Contains(t, m.stderr.String(), "disappeared while waiting for sidecar proxy")
			assert.Equal(t, tc.code == 0, hasEvent(p, "app_started")())
		})
	}
	t.Run("sidecar", func(t *testing.T) {
		p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
			sidecar("first", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail),
			sidecar("second", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
		s := p.start(helper.RoleSidecar, "second", "/bin/sh", "-c", `echo "second running" >> "$EVENTS"; exit 4`)
		eventually(t, "the second sidecar to register", func() bool { return p.dir.SidecarAlive("second") })
		require.NoError(t, os.RemoveAll(p.dir.Path))
		assert.Equal(t, 4, s.exit(t), "the sidecar started anyway and its exit code passed through")
		assert.Contains(t, s.stderr.String(), "disappeared while waiting for sidecar first; starting anyway")
		assert.True(t, hasEvent(p, "second_running")())
	})
	t.Run("while running", func(t *testing.T) {
		// Without the directory nothing tells whether the mains exited:
		// the sidecar keeps running, and a SIGTERM is forwarded at once
		// instead of being held for the (hour-long) hold-timeout.
		p := newPod(t, coord.Pod{StopAfterMains: true, Sidecars: []coord.Sidecar{
			sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
		require.NoError(t, p.dir.RegisterMain("app"))
		s := p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
		m := p.main("app", "proxy", `while :; do sleep 0.05; done`)
		eventually(t, "the main's command", hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=ready"))
		require.NoError(t, os.RemoveAll(p.dir.Path))
		time.Sleep(10 * poll) // many of the sidecar's looks at the mains
		assert.True(t, s.running(), "a missing directory is not mains that exited")
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, s.exit(t), s.stderr.String())
		assert.Equal(t, []string{"proxy_term"}, filter(p.events(), "_exit", "_term"))
		require.NoError(t, m.cmd.Process.Kill())
		m.exit(t)
	})
	t.Run("damaged", func(t *testing.T) {
		for _, role := range []string{helper.RoleMain, helper.RoleSidecar} {
			p := newPod(t, coord.Pod{Sidecars: []coord.Sidecar{
				sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
			require.NoError(t, os.WriteFile(filepath.Join(p.dir.Path, "pod.json"), []byte(`{"sidecars": [`), 0o644))
			h := p.start(role, "proxy", "/bin/true")
			assert.Equal(t, helper.ExitFailed, h.exit(t), role)
			assert.Contains(t, h.stderr.String(), "decoding the pod's sidecar spec "+filepath.Join(p.dir.Path, "pod.json"), role)
			assert.Contains(t, h.stderr.String(), "is missing or damaged", role)
		}
	})
	t.Run("missing", func(t *testing.T) {
		p := &testPod{t: t, dir: coord.Dir{Path: filepath.Join(t.TempDir(), "none")}}
		m := p.start(helper.RoleMain, "app", "/bin/true")
		assert.Equal(t, helper.ExitFailed, m.exit(t))
		assert.Contains(t, m.stderr.String(), "coordination directory "+p.dir.Path+" is missing or damaged")
	})
}

// TestStopAfterMains: when the only main exits, the sidecars are stopped
// last-started first and exit 0, as a Job's sidecars must.
func TestStopAfterMains(t *testing.T) {
	p := newPod(t, coord.Pod{StopAfterMains: true,
		Sidecars: []coord.Sidecar{
			sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail),
			sidecar("logs", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail),
		}})
	require.NoError(t, p.dir.RegisterMain("app"))
	proxy := p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
	logs := p.start(helper.RoleSidecar, "logs", longRunning("logs")...)
	m := p.main("app", "logs", `echo "app exit" >> "$EVENTS"; exit 0`)
	assert.Equal(t, 0, m.exit(t))
	assert.Equal(t, 0, logs.exit(t), logs.stderr.String())
	assert.Equal(t, 0, proxy.exit(t), proxy.stderr.String())
	events := p.events()
	assert.Equal(t, []string{"app_exit", "logs_term", "proxy_term"}, filter(events, "_exit", "_term"),
		"the main exits, then the sidecars stop in reverse order")

	reports, err := p.dir.TakeReports()
	require.NoError(t, err)
	stops := map[string]string{}
	for _, r := range reports {
		stops[r.Container] = r.Stop
	}
	assert.Equal(t, map[string]string{"app": "", "logs": coord.StopMainsExited, "proxy": coord.StopMainsExited}, stops)
}

// TestSignalHeldUntilMainsExit: SIGTERM to every container at once (pod
// deletion): the sidecar's helper holds it until the main has exited; with
// a main that ignores SIGTERM, only until hold-timeout.
func TestSignalHeldUntilMainsExit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mainScript string
		want       []string
	}{
		{"main exits on SIGTERM", `trap 'sleep 0.3; echo "app exit" >> "$EVENTS"; exit 0' TERM; while :; do sleep 0.05; done`,
			[]string{"app_exit", "proxy_term"}},
		{"main ignores SIGTERM", `trap '' TERM; while :; do sleep 0.05; done`, []string{"proxy_term"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, coord.Pod{StopAfterMains: true, HoldTimeout: coord.Duration(500 * time.Millisecond),
				Sidecars: []coord.Sidecar{sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
			require.NoError(t, p.dir.RegisterMain("app"))
			s := p.start(helper.RoleSidecar, "proxy", longRunning("proxy")...)
			m := p.main("app", "proxy", tc.mainScript)
			eventually(t, "the main's command", hasEvent(p, "app_started_pid="+strconv.Itoa(m.cmd.Process.Pid)+"_sidecar=ready"))
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
			assert.Equal(t, 0, s.exit(t), s.stderr.String())
			assert.Equal(t, tc.want, filter(p.events(), "_exit", "_term"))
			if m.running() {
				assert.Contains(t, s.stderr.String(), "main containers still run after hold-timeout 500ms")
				require.NoError(t, m.cmd.Process.Kill())
			}
			m.exit(t)
		})
	}
}

// TestStopGrace: a sidecar that ignores SIGTERM is killed after the grace.
func TestStopGrace(t *testing.T) {
	p := newPod(t, coord.Pod{StopAfterMains: true, StopGrace: coord.Duration(200 * time.Millisecond),
		Sidecars: []coord.Sidecar{sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}})
	require.NoError(t, p.dir.RegisterMain("app"))
	s := p.start(helper.RoleSidecar, "proxy", "/bin/sh", "-c", `trap '' TERM; while :; do sleep 0.05; done`)
	m := p.main("app", "proxy", "exit 0")
	assert.Equal(t, 0, m.exit(t))
	assert.Equal(t, 128+int(syscall.SIGKILL), s.exit(t), "the sidecar's helper reports the kill like a shell")
	assert.Contains(t, s.stderr.String(), "still running after the grace period 200ms; sending SIGKILL")
}

func filter(events []string, suffixes ...string) []string {
	var out []string
	for _, e := range events {
		for _, s := range suffixes {
			if strings.HasSuffix(e, s) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// BenchmarkStartDelay is the delay the helper adds to a main container with
// no sidecar to wait for: the helper, then execve of /bin/true, against
// /bin/true started directly and against the floor of any static Go front
// (a program that does nothing but execve).
func BenchmarkStartDelay(b *testing.B) {
	dir := b.TempDir()
	bin := helpertest.Build(b, dir)
	pod := coord.Dir{Path: filepath.Join(dir, "pod")}
	require.NoError(b, os.Mkdir(pod.Path, 0o777))
	require.NoError(b, pod.WriteSpec(&coord.Pod{}))
	run := func(b *testing.B, argv ...string) {
		for b.Loop() {
			if out, err := exec.CommandContext(context.Background(), argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, "/bin/true") })
	// The floor of any static Go front: a program that only execs.
	floor := filepath.Join(dir, "floor")
	require.NoError(b, os.Mkdir(floor, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(floor, "go.mod"), []byte("module floor\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(floor, "main.go"), []byte(`package main

import (
	"os"
	"syscall"
)

func main() { _ = syscall.Exec(os.Args[1], os.Args[1:], os.Environ()) }
`), 0o644))
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "floor", ".")
	build.Dir, build.Env = floor, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "%s", out)
	b.Run("go-exec-floor", func(b *testing.B) { run(b, filepath.Join(floor, "floor"), "/bin/true") })
	b.Run("helper-no-sidecars", func(b *testing.B) {
		run(b, bin, "--dir", pod.Path, "--role", "main", "--container", "app", "--", "/bin/true")
	})
	// On a node the state directory is under /run, a tmpfs: the helper's
	// few file operations cost less there than in the test's TempDir.
	if shm, err := os.MkdirTemp("/dev/shm", "sidecar-bench-"); err == nil {
		defer os.RemoveAll(shm)
		onTmpfs := coord.Dir{Path: shm}
		require.NoError(b, onTmpfs.WriteSpec(&coord.Pod{}))
		b.Run("helper-no-sidecars-tmpfs", func(b *testing.B) {
			run(b, bin, "--dir", onTmpfs.Path, "--role", "main", "--container", "app", "--", "/bin/true")
		})
	}
	// One sidecar that is already ready: its lock is held by this process.
	ready := coord.Dir{Path: filepath.Join(dir, "ready")}
	require.NoError(b, os.Mkdir(ready.Path, 0o777))
	require.NoError(b, ready.WriteSpec(&coord.Pod{Sidecars: []coord.Sidecar{
		sidecar("proxy", coord.Readiness{Kind: coord.ReadyProcess}, time.Hour, coord.OnTimeoutFail)}}))
	lock, err := ready.LockSidecar("proxy")
	require.NoError(b, err)
	defer lock.Close()
	require.NoError(b, ready.MarkReady("proxy"))
	b.Run("helper-ready-sidecar", func(b *testing.B) {
		run(b, bin, "--dir", ready.Path, "--role", "main", "--container", "app", "--", "/bin/true")
	})
}
