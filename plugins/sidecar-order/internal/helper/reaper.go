package helper

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// reaper owns every wait(2) of the helper. A sidecar's helper is PID 1 of
// its container, so orphans are reparented to it and must be reaped; a
// wait for any child would steal the status of the sidecar's process or of
// a readiness check, so all of them are started and reaped here.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
}

func newReaper() *reaper { return &reaper{waiters: map[int]chan syscall.WaitStatus{}} }

// start runs argv with the given files as stdin, stdout, stderr and returns
// its pid and a channel that receives its status. The mutex is held across
// the fork so that the child cannot be reaped before it is registered.
func (r *reaper) start(argv []string, files [3]*os.File) (int, <-chan syscall.WaitStatus, int, error) {
	path, code, err := resolve(argv[0])
	if err != nil {
		return 0, nil, code, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
	})
	if err != nil {
		code := ExitNotExecutable
		if errors.Is(err, syscall.ENOENT) {
			code = ExitNotFound
		}
		return 0, nil, code, fmt.Errorf("starting %q: %w", path, err)
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, 0, nil
}

// reap collects every child that has exited; call it on SIGCHLD.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			ch <- ws
			delete(r.waiters, pid)
		}
	}
}

// exitCode is the code a shell would report for ws.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return signalExit(ws.Signal())
	}
	return ws.ExitStatus()
}
