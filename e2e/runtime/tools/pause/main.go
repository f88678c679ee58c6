// Command pause is the process of the sandbox ("infra") image that the
// nri-suite real-node e2e tests load into containerd and CRI-O.
//
// It holds the pod's namespaces open and does nothing else: it sleeps until
// SIGTERM or SIGINT and then exits 0. As PID 1 of a shared PID namespace it
// is the parent of every orphaned process in the pod, so it reaps them on
// SIGCHLD; otherwise they would stay zombies until the pod is gone.
//
// It is built with CGO_ENABLED=0 into a static binary, the only file of
// the image.
package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	run(func() {})
}

// run installs the signal handlers, calls ready, and then serves signals
// until SIGTERM or SIGINT ends the process.
func run(ready func()) {
	// Buffered so that a burst of signals arriving while children are being
	// reaped is not lost; SIGCHLD coalesces anyway, reapChildren drains all.
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	ready()
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		os.Exit(0)
	}
}

// reapChildren collects the exit status of every child that has exited,
// without blocking on those still running.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			// ECHILD (no children at all) or 0 (none has exited yet).
			return
		}
	}
}
