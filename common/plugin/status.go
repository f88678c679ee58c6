package plugin

import (
	"sync"
	"time"
)

// status is the plugin's attachment to the runtime: connected (registered), ready
// (registered and synchronized), or why not. Every change is handed to observe, which
// publishes it for the other plugins of the node.
type status struct {
	mu        sync.Mutex
	connected bool
	ready     bool
	reason    string
	runtime   string    // name and version of the runtime last registered with
	lastSync  time.Time // when the last Synchronize succeeded
	// held is why the plugin itself says it cannot serve (Deps.NotReady);
	// it keeps a connected plugin not ready.
	held    string
	observe func(statusSnapshot)
}

// statusSnapshot is a copy of the status at one moment.
type statusSnapshot struct {
	Connected, Ready bool
	Reason, Runtime  string
	LastSync         time.Time
}

// registered records a registration that waits for its Synchronize.
func (s *status) registered(runtime string) {
	s.change(func() {
		s.connected, s.ready, s.runtime = true, false, runtime
		s.reason = "registered with " + runtime + ", waiting for Synchronize"
	})
}

// synchronized records a successful Synchronize: the plugin is ready.
func (s *status) synchronized() {
	s.change(func() { s.ready, s.reason, s.lastSync = true, "", time.Now() })
}

// notReady records a connected plugin that cannot serve, e.g. a failed Synchronize.
func (s *status) notReady(reason string) {
	s.change(func() { s.ready, s.reason = false, reason })
}

// hold records why the plugin cannot serve, whatever its connection; ""
// releases it.
func (s *status) hold(why string) {
	s.mu.Lock()
	same := s.held == why
	s.mu.Unlock()
	if !same {
		s.change(func() { s.held = why })
	}
}

// disconnected records that there is no connection to the runtime, and why.
func (s *status) disconnected(reason string) {
	s.change(func() { s.connected, s.ready, s.reason = false, false, reason })
}

func (s *status) change(apply func()) {
	s.mu.Lock()
	apply()
	snap := s.snapshotLocked()
	observe := s.observe
	s.mu.Unlock()
	if observe != nil {
		observe(snap)
	}
}

func (s *status) lastRuntime() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runtime
}

// get is whether the plugin is ready, and why not: what it holds
// first, then its connection.
func (s *status) get() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ready, reason := s.readyLocked()
	return ready, reason
}

// connection is whether the plugin is registered and synchronized, and why
// not, whatever it holds.
func (s *status) connection() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready, s.reason
}

func (s *status) readyLocked() (bool, string) {
	if s.held != "" {
		return false, s.held
	}
	return s.ready, s.reason
}

func (s *status) snapshotLocked() statusSnapshot {
	ready, reason := s.readyLocked()
	return statusSnapshot{Connected: s.connected, Ready: ready, Reason: reason, Runtime: s.runtime, LastSync: s.lastSync}
}
