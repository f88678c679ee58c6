// Package coord is the coordination directory that the plugin shares with the
// helpers of one pod: the pod's sidecar spec (written by the plugin), and the
// markers and locks through which the helpers in different containers learn
// that a sidecar is ready, that a main container runs or has exited, and that
// a sidecar has stopped.
//
// The directory is on the host and bind-mounted into every container of the
// pod, so plain files and flock(2) locks work across the containers' mount
// and PID namespaces. Liveness is a lock, never a marker alone: a lock is
// released by the kernel when its holder dies, however it dies, so a killed
// helper cannot leave a "running" or "ready" state behind.
//
// This package uses only the standard library: the static helper links it,
// and the helper must stay small.
package coord

import (
	"encoding/json"
	"fmt"
	"time"
)

// Readiness kinds: how a sidecar's helper learns that the sidecar is ready.
const (
	ReadyProcess = "process" // the process was started
	ReadyFile    = "file"    // a path exists inside the sidecar
	ReadyTCP     = "tcp"     // a TCP address accepts a connection
	ReadyExec    = "exec"    // a command in the sidecar's image exits 0
)

// What a main container's helper does when a sidecar is not ready in time.
const (
	OnTimeoutStart = "start" // start the main anyway
	OnTimeoutFail  = "fail"  // exit with ExitTimeout instead of starting the main
)

// Readiness says how a sidecar's readiness is checked.
type Readiness struct {
	Kind string `json:"kind"`
	// Target is the file path (file), the host:port (tcp) or the program
	// (exec); empty for process.
	Target string `json:"target,omitempty"`
	// Args are the program's arguments (exec only).
	Args []string `json:"args,omitempty"`
}

// String renders r in its annotation form, e.g. "tcp:127.0.0.1:15000".
func (r Readiness) String() string {
	s := r.Kind
	if r.Target != "" {
		s += ":" + r.Target
	}
	for _, a := range r.Args {
		s += " " + a
	}
	return s
}

// Sidecar is one sidecar container of the pod.
type Sidecar struct {
	Name  string    `json:"name"`
	Ready Readiness `json:"ready"`
	// Timeout bounds how long mains (and the next sidecar) wait for this
	// sidecar to become ready.
	Timeout Duration `json:"timeout"`
	// OnTimeout is OnTimeoutStart or OnTimeoutFail.
	OnTimeout string `json:"onTimeout"`
}

// Pod is the spec of one pod, as the plugin parsed it from the pod's
// annotations. Sidecars are in start order.
type Pod struct {
	Sidecars []Sidecar `json:"sidecars"`
	// Mains, when not empty, are the only main containers: the sidecars stop
	// after exactly these have exited. Empty means every container that is
	// not a sidecar and was created so far.
	Mains []string `json:"mains,omitempty"`
	// StopAfterMains stops the sidecars once every main has exited, so that
	// a Job-like pod completes.
	StopAfterMains bool `json:"stopAfterMains"`
	// HoldTimeout bounds how long a sidecar's helper holds a SIGTERM while
	// mains (and later sidecars) are still running.
	HoldTimeout Duration `json:"holdTimeout"`
	// StopGrace is how long a sidecar gets after its SIGTERM before SIGKILL.
	StopGrace Duration `json:"stopGrace"`
}

// Sidecar returns the index of the sidecar named name, or -1.
func (p *Pod) Sidecar(name string) int {
	for i, s := range p.Sidecars {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Duration is a time.Duration that is "1.5s" in JSON, so that the spec a
// person reads in the coordination directory is the one they wrote.
type Duration time.Duration

// MarshalJSON renders d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding a duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("decoding a duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
