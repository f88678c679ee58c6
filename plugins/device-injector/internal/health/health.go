// Package health watches the devices device-injector injects: every CDI
// device the spec directories define, and the host device nodes containers
// asked for by path. A device is Healthy, Unhealthy (a node is missing or
// not the device its spec says, its spec became invalid or no longer
// defines it, an operator check fails) or Unknown (not checked yet, or an
// operator check could not run), with a message, as KEP-4680's
// allocatedResourcesStatus.
//
// One goroutine polls: the resolver rescans the spec directories on its own
// (fsnotify) but tells nobody, and device nodes disappear without an event
// it would see, so both are re-read every interval. Reading the last scan
// costs no rescan and a node check one stat.
//
// The operator's checks (Probes: a command, a file) run in the same rounds,
// for devices whose nodes are fine, on at most Probes.Concurrency workers
// that live for one round.
package health

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/devnode"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// Sources are what the monitor checks.
type Sources struct {
	// Inventory reads the CDI cache.
	Inventory func() resolve.Inventory
	// InUse lists the resource ids that containers use: CDI names, whose
	// health is kept while the CDI cache no longer defines them, and host
	// paths of device nodes asked for by path, which are checked too.
	InUse func() []string
}

// Monitor keeps the health of the devices. It is safe for concurrent use;
// readers (Health, Snapshot) never wait for a round of checks, only for the
// moment its result is stored.
type Monitor struct {
	src      Sources
	now      func() time.Time
	interval atomic.Int64 // nanoseconds
	probes   atomic.Pointer[Probes]
	wake     chan struct{}

	// checkMu makes rounds of checks one at a time; it guards what only
	// rounds use.
	checkMu sync.Mutex
	specOf  map[string]string // CDI name -> the spec file that last defined it
	prober  prober

	mu     sync.RWMutex
	status map[string]state.DeviceHealth
}

// New builds a monitor that has checked nothing yet.
func New(src Sources, interval time.Duration) *Monitor {
	m := &Monitor{src: src, now: time.Now, wake: make(chan struct{}, 1),
		status: map[string]state.DeviceHealth{}, specOf: map[string]string{}}
	m.interval.Store(int64(interval))
	m.probes.Store(&Probes{})
	return m
}

// SetInterval changes the check interval from the next check on.
func (m *Monitor) SetInterval(d time.Duration) {
	if time.Duration(m.interval.Swap(int64(d))) != d {
		m.poke()
	}
}

// SetProbes replaces the operator's checks; a round with them starts now.
func (m *Monitor) SetProbes(p Probes) {
	m.probes.Store(&p)
	m.poke()
}

func (m *Monitor) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run checks every interval until ctx ends, calling onCheck (from this
// goroutine) after every round with the health of every device and whether
// any health or message changed in that round.
func (m *Monitor) Run(ctx context.Context, onCheck func(devices map[string]state.DeviceHealth, changed bool)) {
	for {
		changed, err := m.Check(ctx)
		if err != nil {
			return // ctx ended during the round
		}
		onCheck(m.Snapshot(), changed)
		timer := time.NewTimer(time.Duration(m.interval.Load()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-m.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// Health is the health of a resource id; Unknown when it was not checked.
func (m *Monitor) Health(id string) state.DeviceHealth {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if h, ok := m.status[id]; ok {
		return h
	}
	return state.DeviceHealth{Health: state.HealthUnknown, Message: "not checked yet"}
}

// Snapshot returns the health of every checked device.
func (m *Monitor) Snapshot() map[string]state.DeviceHealth {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.status)
}

// Check re-evaluates every device once and reports whether any health or
// message changed. The operator's checks run without any lock that readers
// take. If ctx ends first, nothing is stored and ctx's error is returned.
func (m *Monitor) Check(ctx context.Context) (bool, error) {
	m.checkMu.Lock()
	defer m.checkMu.Unlock()
	inv := m.src.Inventory()
	inUse := map[string]bool{}
	for _, id := range m.src.InUse() {
		inUse[id] = true
	}
	next := map[string]state.DeviceHealth{}
	defined := map[string]bool{}
	for _, d := range inv.Devices {
		defined[d.Name] = true
		m.specOf[d.Name] = d.SpecPath
		next[d.Name] = checkNodes(d.Nodes)
	}
	// A device the cache dropped is Unhealthy while a container uses it or
	// its spec file is still there, broken; otherwise it is simply gone.
	for name, path := range m.specOf {
		if defined[name] {
			continue
		}
		specErr, broken := inv.SpecErrors[path]
		switch {
		case broken:
			next[name] = unhealthy("spec %s is invalid: %v", path, specErr)
		case inUse[name]:
			next[name] = unhealthy("no spec defines it any longer (it was in %s)", path)
		default:
			delete(m.specOf, name)
		}
	}
	for id := range inUse {
		// Device nodes asked for by path; CDI names never start with '/'.
		if _, ok := next[id]; !ok && strings.HasPrefix(id, "/") {
			next[id] = checkNodes([]resolve.Node{{HostPath: id}})
		}
	}
	if err := m.prober.run(ctx, *m.probes.Load(), next); err != nil {
		return false, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	changed := len(next) != len(m.status)
	now := m.now()
	for id, h := range next {
		old, ok := m.status[id]
		if ok && old.Health == h.Health && old.Message == h.Message {
			h.Since = old.Since
		} else {
			h.Since = now
			changed = true
		}
		next[id] = h
	}
	m.status = next
	return changed, nil
}

func unhealthy(format string, args ...any) state.DeviceHealth {
	return state.DeviceHealth{Health: state.HealthUnhealthy, Message: fmt.Sprintf(format, args...)}
}

// checkNodes stats each node: it must exist, be a char or block device,
// and be the type and numbers the spec gives, if it gives them.
func checkNodes(nodes []resolve.Node) state.DeviceHealth {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, checkNode(n))
	}
	if err := errors.Join(errs...); err != nil {
		return state.DeviceHealth{Health: state.HealthUnhealthy, Message: err.Error()}
	}
	return state.DeviceHealth{Health: state.HealthHealthy}
}

func checkNode(n resolve.Node) error {
	node, err := devnode.Stat(n.HostPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("device node %s is missing", n.HostPath)
	case errors.Is(err, devnode.ErrNotDevice):
		return fmt.Errorf("device node %s is not a char or block device", n.HostPath)
	case err != nil:
		return fmt.Errorf("device node %s: %w", n.HostPath, err)
	}
	typeDiffers := n.Type != "" && n.Type != "u" && n.Type != node.Type
	numbersDiffer := n.Major != 0 && (n.Major != node.Major || n.Minor != node.Minor)
	if typeDiffers || numbersDiffer {
		return fmt.Errorf("device node %s is %s %d:%d, the spec says %s %d:%d", n.HostPath, node.Type, node.Major, node.Minor, n.Type, n.Major, n.Minor)
	}
	return nil
}
