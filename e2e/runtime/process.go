package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is a daemon the sandbox started: containerd, the kubelet, a plugin.
// Its output goes to a log file in the run dir; it gets its own process group
// so that a Ctrl-C on the terminal reaches only the sandbox's owner, which
// then tears down in order, and it is killed if the owner dies.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // valid after done is closed
}

// command says how to run a daemon.
type command struct {
	name    string // for messages: "containerd", "plugin topology-aware"
	argv    []string
	env     []string // appended to the inherited environment
	logPath string   // stdout and stderr
	// dir is the working directory; default: the log's directory.
	dir string
	// netns is the path of the network namespace to run in (a cluster
	// sandbox's); "" is the sandbox's own.
	netns string
}

// fullArgv is the command line to execute: c.argv, inside c.netns when set.
// nsenter enters only the network namespace and then executes the command in
// its own place, so the PID is the daemon's and it shares the sandbox's mount
// namespace (unlike `ip netns exec`, which makes a new one and remounts /sys).
func (c command) fullArgv() []string {
	if c.netns == "" {
		return c.argv
	}
	return append([]string{"nsenter", "--net=" + c.netns, "--"}, c.argv...)
}

// startProcess starts c.
func startProcess(c command) (*process, error) {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", c.name, err)
	}
	argv := c.fullArgv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = c.dir
	if cmd.Dir == "" {
		cmd.Dir = filepath.Dir(c.logPath)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", c.name, c.argv[0], err)
	}
	p := &process{name: c.name, logPath: c.logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *process) PID() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// exitError describes how the process ended, with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.err, tailFile(p.logPath, 20))
}

// waitFor polls check every interval until it returns nil, ctx ends or the
// process dies; the error then carries check's last error and the log tail.
func (p *process) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("waiting for %s: %w", what, p.exitError())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v); last log lines of %s:\n%s",
				what, ctx.Err(), last, p.name, tailFile(p.logPath, 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of a file, or a note why it cannot.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runTool runs a short-lived command and returns its stdout; the error
// carries stderr, which is where CLI tools explain themselves.
func runTool(ctx context.Context, env []string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return stdout.Bytes(), fmt.Errorf("running %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), fmt.Errorf("running %s: %w", strings.Join(argv, " "), err)
	}
	return stdout.Bytes(), nil
}
