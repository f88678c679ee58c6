package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/common/fsread"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
)

// Probes are the operator's checks and how many may run at once.
type Probes struct {
	Checks      []config.HealthCheck
	Concurrency int
}

// probeEnv is a check command's whole environment: a pre-registered plugin
// inherits almost none, so none is passed on, and the device's id is there
// for scripts that prefer it to a placeholder.
func probeEnv(id string) []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NRI_SUITE_DEVICE=" + id}
}

// Limits on what a check's output may put into a health message and on the
// size of a health file (a sysfs attribute's, a page); a larger one is
// Unhealthy.
const (
	maxMessageOutput = 512
	maxFileRead      = 4096
)

// prober runs the operator's checks for one round of health checks.
type prober struct {
	// hanging are the files whose read did not return in time; a new read
	// of one waits until the old one ends, so that a file that hangs ties
	// up one goroutine, not one per round.
	hanging sync.Map // path -> struct{}
}

// run checks every device of next that is Healthy so far against the
// checks that match it, at most p.Concurrency at a time, and puts each
// result into next. The workers live for this round only. It returns
// ctx's error if ctx ended before every check did.
func (pr *prober) run(ctx context.Context, p Probes, next map[string]state.DeviceHealth) error {
	type job struct {
		id     string
		checks []config.HealthCheck
		result state.DeviceHealth
	}
	var jobs []*job
	for id, h := range next {
		if h.Health != state.HealthHealthy {
			continue // a missing node is reason enough; checks would only add noise
		}
		var checks []config.HealthCheck
		for _, c := range p.Checks {
			if c.Matches(id) {
				checks = append(checks, c)
			}
		}
		if len(checks) > 0 {
			jobs = append(jobs, &job{id: id, checks: checks})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	queue := make(chan *job)
	var wg sync.WaitGroup
	for range min(max(p.Concurrency, 1), len(jobs)) {
		wg.Go(func() {
			for j := range queue {
				j.result = pr.probe(ctx, j.id, j.checks)
			}
		})
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, j := range jobs {
		next[j.id] = j.result
	}
	return nil
}

// probe runs the checks of one device in order; the first that does not
// pass decides.
func (pr *prober) probe(ctx context.Context, id string, checks []config.HealthCheck) state.DeviceHealth {
	for _, c := range checks {
		argv, file := c.For(id)
		if len(argv) > 0 {
			if h, ok := runCommand(ctx, c, argv, id); !ok {
				return h
			}
		}
		if file != "" {
			if h, ok := pr.readFile(ctx, c, file); !ok {
				return h
			}
		}
	}
	return state.DeviceHealth{Health: state.HealthHealthy}
}

// runCommand runs argv with the check's timeout. A non-zero exit or a
// timeout is Unhealthy; a command that cannot start is Unknown: the check
// is broken, not necessarily the device. The command runs in its own
// process group, all of which is killed at the timeout, so that a script's
// children do not outlive it.
func runCommand(ctx context.Context, c config.HealthCheck, argv []string, id string) (state.DeviceHealth, bool) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = probeEnv(id)
	cmd.Dir = "/"
	stderr := &limitedBuffer{limit: maxMessageOutput}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding stderr open must not hold up the round.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return state.DeviceHealth{}, true
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return unhealthy("health check %s: %s did not finish within %v", c.Key, argv[0], c.Timeout), false
	case errors.As(err, &exit):
		msg := fmt.Sprintf("health check %s: %s exited with %s", c.Key, argv[0], describeExit(exit))
		if out := strings.TrimSpace(stderr.String()); out != "" {
			msg += ": " + out
		}
		return state.DeviceHealth{Health: state.HealthUnhealthy, Message: msg}, false
	default:
		return state.DeviceHealth{Health: state.HealthUnknown,
			Message: fmt.Sprintf("health check %s could not run: %v", c.Key, err)}, false
	}
}

func describeExit(exit *exec.ExitError) string {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("status %d", exit.ExitCode())
}

// readFile reads a regular file (opened non-blocking, so that a FIFO
// cannot hang it) within the check's timeout, and matches its trimmed
// content against the check's expect. A file that cannot be read is
// Unhealthy: health files are written by the device's driver or agent,
// and a missing one means that nobody vouches for the device.
func (pr *prober) readFile(ctx context.Context, c config.HealthCheck, file string) (state.DeviceHealth, bool) {
	if _, busy := pr.hanging.Load(file); busy {
		return unhealthy("health check %s: an earlier read of %s has not returned yet", c.Key, file), false
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := fsread.File(file, maxFileRead)
		done <- result{data, err}
	}()
	timer := time.NewTimer(c.Timeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return state.DeviceHealth{Health: state.HealthUnknown, Message: "health check interrupted"}, false
	case <-timer.C:
		pr.hanging.Store(file, struct{}{})
		go func() { <-done; pr.hanging.Delete(file) }()
		return unhealthy("health check %s: reading %s did not finish within %v", c.Key, file, c.Timeout), false
	}
	if r.err != nil {
		return unhealthy("health check %s: %v", c.Key, r.err), false
	}
	content := strings.TrimSpace(string(r.data))
	if !c.Expect.MatchString(content) {
		return unhealthy("health check %s: %s is %q, expected it to match %s", c.Key, file, truncate(content), c.Expect), false
	}
	return state.DeviceHealth{}, true
}

func truncate(s string) string {
	if len(s) > maxMessageOutput {
		return s[:maxMessageOutput] + "..."
	}
	return s
}

// limitedBuffer keeps the first limit bytes written to it and drops the
// rest, so that a chatty check cannot fill memory or a health message.
type limitedBuffer struct {
	limit int
	buf   bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string { return b.buf.String() }
