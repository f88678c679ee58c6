package helper

import (
	"net"
	"os"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// checkTimeout bounds one readiness check, so that a hanging check command
// or an unanswered connect cannot stall the next attempt forever.
const checkTimeout = 5 * time.Second

// checker runs one kind of readiness check inside the sidecar's container.
type checker struct {
	spec   coord.Readiness
	reaper *reaper
	devnul *os.File // stdio of exec checks
}

// ready runs the check once.
func (c checker) ready() bool {
	switch c.spec.Kind {
	case coord.ReadyProcess:
		return true
	case coord.ReadyFile:
		_, err := os.Stat(c.spec.Target)
		return err == nil
	case coord.ReadyTCP:
		conn, err := net.DialTimeout("tcp", c.spec.Target, checkTimeout)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	case coord.ReadyExec:
		return c.exec()
	}
	return false
}

// exec runs the check command. Its output is discarded: a check that fails
// on every poll would flood the container's log.
func (c checker) exec() bool {
	pid, done, _, err := c.reaper.start(append([]string{c.spec.Target}, c.spec.Args...), [3]*os.File{c.devnul, c.devnul, c.devnul})
	if err != nil {
		return false
	}
	timer := time.NewTimer(checkTimeout)
	defer timer.Stop()
	select {
	case ws := <-done:
		return ws.Exited() && ws.ExitStatus() == 0
	case <-timer.C:
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
		return false
	}
}
