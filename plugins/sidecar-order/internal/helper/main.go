package helper

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// outcome is how a wait ended.
type outcome int

const (
	satisfied outcome = iota
	timedOut
	dirGone
	signalled
)

// waitFor polls cond every o.Poll until it holds, deadline passes, the
// coordination directory disappears or a signal arrives on sigs (nil: none).
func (o Options) waitFor(cond func() bool, deadline time.Time, sigs <-chan os.Signal) (outcome, os.Signal) {
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		if cond() {
			return satisfied, nil
		}
		if !o.Dir.Exists() {
			return dirGone, nil
		}
		if !time.Now().Before(deadline) {
			return timedOut, nil
		}
		select {
		case sig := <-sigs:
			return signalled, sig
		case <-tick.C:
		}
	}
}

// runMain waits for the sidecars, then execs the main's command.
func runMain(o Options) int {
	spec, err := o.Dir.ReadSpec()
	if err != nil {
		o.logf("%v (the plugin's coordination directory %s is missing or damaged)", err, o.Dir.Path)
		return ExitFailed
	}
	// Signals end the wait at once: the command has not started, so
	// nothing needs them but the helper, which is PID 1 and would
	// otherwise ignore them.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	lock, err := o.Dir.LockMain(o.Container)
	if err != nil {
		o.logf("registering as a running main container: %v", err)
		return ExitFailed
	}

	start := time.Now()
	report := coord.Report{Container: o.Container, Role: RoleMain}
	gone := false
	for _, s := range spec.Sidecars {
		res := dirGone
		var sig os.Signal
		if !gone {
			res, sig = o.waitFor(func() bool { return o.Dir.SidecarReady(s.Name) }, start.Add(time.Duration(s.Timeout)), sigs)
		}
		switch res {
		case satisfied:
			continue
		case signalled:
			o.logf("got %s while waiting for sidecar %s; exiting without starting the command", sig, s.Name)
			return signalExit(sig.(syscall.Signal))
		case dirGone:
			if !gone {
				o.logf("the coordination directory %s disappeared while waiting for sidecar %s; applying the on-timeout action of every sidecar not yet ready", o.Dir.Path, s.Name)
			}
			gone = true
		case timedOut:
			o.logf("sidecar %s was not ready (%s) within %s: %s", s.Name, s.Ready, time.Duration(s.Timeout), notReadyHint(o.Dir, s.Name))
		}
		report.TimedOut = append(report.TimedOut, s.Name)
		if report.Action != coord.OnTimeoutFail {
			report.Action = s.OnTimeout
		}
	}
	report.Waited = coord.Duration(time.Since(start))
	if !gone {
		if err := o.Dir.WriteReport(report); err != nil {
			o.logf("%v", err)
		}
	}
	if report.Action == coord.OnTimeoutFail {
		o.logf("on-timeout is fail: not starting the command")
		return ExitFailed
	}
	if len(report.TimedOut) > 0 {
		o.logf("on-timeout is start: starting the command without sidecars %v", report.TimedOut)
	}
	// No signal.Reset: execve resets caught signals to their default action
	// anyway, and Reset waits for the signal goroutine to go idle, which
	// took milliseconds of every start.
	code, err := execCommand(o.Argv, lock)
	o.logf("%v", err)
	return code
}

// notReadyHint says why a sidecar may not be ready, for the timeout message.
func notReadyHint(d coord.Dir, name string) string {
	if d.SidecarAlive(name) {
		return "its helper runs, its readiness check has not passed"
	}
	return "no container of that name runs in this pod (is it in the pod's spec, and was it created?)"
}
