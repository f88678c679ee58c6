package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runAsPauseEnv makes the test binary run main() instead of the tests, so
// that the tests exercise the real program in a process of its own.
const runAsPauseEnv = "NRI_SUITE_TEST_RUN_PAUSE"

const deadline = 10 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(runAsPauseEnv) == "1" {
		// The Go runtime catches every signal from the start, so the
		// parent cannot tell from /proc when pause's own handlers are in
		// place: pause says so on stdout.
		run(func() { fmt.Println(readyLine) })
		return
	}
	os.Exit(m.Run())
}

const readyLine = "ready"

// startPause starts this test binary as the pause program and waits until it
// has installed its signal handlers.
func startPause(t *testing.T, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), runAsPauseEnv+"=1")
	cmd.SysProcAttr = attr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Scan()
		line <- scanner.Text()
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case got := <-line:
		require.Equal(t, readyLine, got, "pause must report that its handlers are installed")
	case <-time.After(deadline):
		t.Fatalf("pause did not get ready within %v", deadline)
	}
	return cmd
}

// childrenOf returns the children of a process (living or zombie) with their
// state letter from /proc/<pid>/stat.
func childrenOf(parent int) map[int]string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat") // the pattern is valid
	children := map[int]string{}
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited while we scanned
		}
		// The command name is in parentheses and may contain spaces: the
		// fields after its closing parenthesis are "state ppid ...".
		end := strings.LastIndexByte(string(data), ')')
		fields := strings.Fields(string(data[end+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == parent {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
				children[pid] = fields[0]
			}
		}
	}
	return children
}

func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startPause(t, nil)
			require.NoError(t, cmd.Process.Signal(sig))
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				require.NoError(t, err, "pause must exit 0 on %v", sig)
				assert.Equal(t, 0, cmd.ProcessState.ExitCode())
			case <-time.After(deadline):
				t.Fatalf("pause did not exit within %v of %v", deadline, sig)
			}
		})
	}
}

// TestReapsOrphans makes pause PID 1 of a new PID namespace, enters that
// namespace with a shell that leaves a background child behind, and checks
// that the orphan is re-parented to pause and reaped once it exits.
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a PID namespace")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	pause := startPause(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	pid := pause.Process.Pid

	out, err := exec.Command(nsenter, "--target", strconv.Itoa(pid), "--pid", "--",
		"/bin/sh", "-c", "sleep 1 >/dev/null 2>&1 & exit 0").CombinedOutput() // the orphan must not hold the output pipe
	require.NoError(t, err, "nsenter: %s", out)

	// The orphaned sleep is now a child of pause; without this the test
	// would prove nothing.
	require.Len(t, childrenOf(pid), 1, "the orphaned sleep must be re-parented to pause")

	var left map[int]string
	require.Eventually(t, func() bool {
		left = childrenOf(pid)
		return len(left) == 0
	}, deadline, 20*time.Millisecond, "pause left children behind (state Z = not reaped)")
	assert.Empty(t, left)

	require.NoError(t, pause.Process.Signal(syscall.SIGTERM))
	err = pause.Wait()
	var exitErr *exec.ExitError
	require.False(t, errors.As(err, &exitErr), "pause must exit 0, got %v", err)
}
