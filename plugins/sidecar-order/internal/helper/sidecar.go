package helper

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// Signals a sidecar's helper relays to its child. SIGTERM and SIGINT are
// held until the mains have exited; the others are forwarded at once.
var relayed = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// sidecar is the state of a running sidecar's helper.
type sidecar struct {
	Options
	spec   *coord.Pod
	idx    int
	reaper *reaper
	pid    int
	report coord.Report
}

// runSidecar waits for the previous sidecar, starts the command, reports its
// readiness and stops it in order.
func runSidecar(o Options) int {
	spec, err := o.Dir.ReadSpec()
	if err != nil {
		o.logf("%v (the plugin's coordination directory %s is missing or damaged)", err, o.Dir.Path)
		return ExitFailed
	}
	idx := spec.Sidecar(o.Container)
	if idx < 0 {
		o.logf("runs as a sidecar, but the pod's sidecars are %v", sidecarNames(spec))
		return ExitFailed
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	sigs := make(chan os.Signal, len(relayed))
	signal.Notify(sigs, relayed...)

	lock, err := o.Dir.LockSidecar(o.Container)
	if err != nil {
		o.logf("registering as a running sidecar: %v", err)
		return ExitFailed
	}
	defer lock.Close()
	if err := o.Dir.ClearReady(o.Container); err != nil {
		o.logf("%v", err)
	}

	s := &sidecar{Options: o, spec: spec, idx: idx, reaper: newReaper(),
		report: coord.Report{Container: o.Container, Role: RoleSidecar}}
	if code, ok := s.waitForPrevious(sigs); !ok {
		return code
	}
	pid, done, code, err := s.reaper.start(o.Argv, [3]*os.File{os.Stdin, os.Stdout, os.Stderr})
	if err != nil {
		o.logf("%v", err)
		return code
	}
	s.pid = pid
	return s.supervise(done, chld, sigs)
}

// waitForPrevious waits until the sidecar before this one is ready or its
// timeout passed; ok is false when a signal ended the helper first.
func (s *sidecar) waitForPrevious(sigs <-chan os.Signal) (code int, ok bool) {
	if s.idx == 0 {
		return 0, true
	}
	prev := s.spec.Sidecars[s.idx-1]
	start := time.Now()
	res, sig := s.waitFor(func() bool { return s.Dir.SidecarReady(prev.Name) }, start.Add(time.Duration(prev.Timeout)), sigs)
	s.report.Waited = coord.Duration(time.Since(start))
	switch res {
	case signalled:
		s.logf("got %s while waiting for sidecar %s; exiting without starting the command", sig, prev.Name)
		return signalExit(sig.(syscall.Signal)), false
	case timedOut:
		s.logf("sidecar %s was not ready (%s) within %s; starting anyway", prev.Name, prev.Ready, time.Duration(prev.Timeout))
		s.report.TimedOut, s.report.Action = []string{prev.Name}, coord.OnTimeoutStart
	case dirGone:
		s.logf("the coordination directory %s disappeared while waiting for sidecar %s; starting anyway", s.Dir.Path, prev.Name)
	}
	return 0, true
}

// supervise runs until the child exits, and returns its exit code.
func (s *sidecar) supervise(done <-chan syscall.WaitStatus, chld, sigs <-chan os.Signal) int {
	stopReadiness := make(chan struct{})
	defer close(stopReadiness)
	go s.reportReadiness(stopReadiness)

	exited := make(chan struct{})
	stopping := false
	stop := func(reason string, holdForMains bool) {
		stopping = true
		s.report.Stop = reason
		go s.orderedStop(holdForMains, exited)
	}
	tick := time.NewTicker(s.Poll)
	defer tick.Stop()
	for {
		select {
		case <-chld:
			s.reaper.reap()
		case ws := <-done:
			close(exited)
			s.report.ExitCode = exitCode(ws)
			if err := s.Dir.ClearReady(s.Container); err != nil && s.Dir.Exists() {
				s.logf("%v", err)
			}
			if s.Dir.Exists() {
				if err := s.Dir.WriteReport(s.report); err != nil {
					s.logf("%v", err)
				}
			}
			return s.report.ExitCode
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGTERM || sig == syscall.SIGINT:
				if !stopping {
					s.logf("got %s; holding it until the main containers and the later sidecars have exited", sig)
					stop(coord.StopSignal, true)
				}
			default:
				_ = syscall.Kill(s.pid, sig.(syscall.Signal))
			}
		case <-tick.C:
			s.reaper.reap() // a SIGCHLD that raced with the last reap
			if s.spec.StopAfterMains && !stopping {
				if done, err := s.Dir.MainsExited(s.spec); err == nil && done {
					s.logf("every main container has exited; stopping in order")
					stop(coord.StopMainsExited, false)
				}
			}
		}
	}
}

// reportReadiness checks readiness every poll until it passes, then marks
// the sidecar ready.
func (s *sidecar) reportReadiness(stop <-chan struct{}) {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		devnull = os.Stderr
	} else {
		defer devnull.Close()
	}
	c := checker{spec: s.spec.Sidecars[s.idx].Ready, reaper: s.reaper, devnul: devnull}
	tick := time.NewTicker(s.Poll)
	defer tick.Stop()
	for !c.ready() {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
	if err := s.Dir.MarkReady(s.Container); err != nil {
		s.logf("ready, but cannot tell the others: %v", err)
		return
	}
	s.logf("ready (%s)", c.spec)
}

// orderedStop stops the child once the mains (when holdForMains) and the
// sidecars started after this one have exited, each wait bounded, then
// gives the child StopGrace before SIGKILL.
func (s *sidecar) orderedStop(holdForMains bool, exited <-chan struct{}) {
	if holdForMains {
		hold := time.Duration(s.spec.HoldTimeout)
		if res, _ := s.waitFor(func() bool { return !s.Dir.MainsRunning(s.spec) }, time.Now().Add(hold), nil); res == timedOut {
			s.logf("main containers still run after hold-timeout %s; stopping anyway", hold)
		}
	}
	later := s.spec.Sidecars[s.idx+1:]
	grace := time.Duration(s.spec.StopGrace)
	bound := time.Duration(len(later)) * (grace + time.Second)
	res, _ := s.waitFor(func() bool {
		for _, l := range later {
			if s.Dir.SidecarAlive(l.Name) {
				return false
			}
		}
		return true
	}, time.Now().Add(bound), nil)
	if res == timedOut {
		s.logf("later sidecars still run after %s; stopping anyway", bound)
	}
	// Not ready any more: a main restarted from now on waits for it again.
	_ = s.Dir.ClearReady(s.Container)
	s.logf("sending SIGTERM to the sidecar (grace %s)", grace)
	_ = syscall.Kill(s.pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		s.logf("still running after the grace period %s; sending SIGKILL", grace)
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
	}
}

func sidecarNames(p *coord.Pod) []string {
	names := make([]string, len(p.Sidecars))
	for i, s := range p.Sidecars {
		names[i] = s.Name
	}
	return names
}
