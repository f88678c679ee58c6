package plugin

import "sync"

// status is the readiness of the plugin: registered and synchronized, or why not.
type status struct {
	mu      sync.Mutex
	ready   bool
	reason  string
	runtime string // name and version of the runtime last registered with
}

// registered records a registration that waits for its Synchronize.
func (s *status) registered(runtime string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready, s.reason, s.runtime = false, "registered with "+runtime+", waiting for Synchronize", runtime
}

func (s *status) lastRuntime() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runtime
}

func (s *status) set(ready bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready, s.reason = ready, reason
}

func (s *status) get() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready, s.reason
}
