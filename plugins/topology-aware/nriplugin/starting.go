package nriplugin

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/plugin"
)

// Why containers that are not started yet need a second update.
//
// Between a container's CreateContainer reply and its start, the runtime
// may lose an update of it that another container's request returns:
// containerd adds the container to its store only after every plugin
// answered CreateContainer and ignores, reporting success, an update of an
// id it does not know; and from the creation of its task (before NRI's
// StartContainer) until the task runs, an update rewrites only the stored
// spec, not the cgroup runc already made. Two pods created at once then
// leave the first on CPUs the second was granted exclusively.
//
// So the plugin notes, at each CreateContainer, how many shared-pool
// changes it had announced (startTracker), and at each Synchronize which
// containers not started yet it sent an update; at PostStartContainer (the
// container is in the store and running, in containerd and CRI-O alike), a
// shared container for which a change was announced since, a container the
// Synchronize updated, and any container the runtime shows elsewhere than
// its placement gets its current placement again through the runner's
// Updater, from a goroutine: a handler must not call it, the runtime holds
// its lock while it waits for plugins.

// startTracker is the plugin's bookkeeping of containers answered at
// CreateContainer and not yet started. It is guarded by the plugin's lock;
// everything it does on CreateContainer's path is O(1).
type startTracker struct {
	// changes counts the shared-pool changes announced to the runtime.
	changes uint64
	// starting are the containers not yet started.
	starting map[string]notStartedYet
}

// notStartedYet is what may have been lost of a container's updates before
// its start.
type notStartedYet struct {
	changes uint64 // the tracker's changes at its creation
	updated bool   // a Synchronize sent it an update of its own
}

func newStartTracker() startTracker { return startTracker{starting: map[string]notStartedYet{}} }

// announced records that updates of the shared containers were returned.
func (s *startTracker) announced() { s.changes++ }

// created records a container the plugin placed and the runtime has yet to
// start.
func (s *startTracker) created(id string) { s.starting[id] = notStartedYet{changes: s.changes} }

// started forgets a started container and reports whether an update of it
// may have been lost since its creation: a Synchronize updated it, or, for
// a shared container, the shared pool changed. A container the tracker does
// not know (created before this process, or started twice) reports false.
func (s *startTracker) started(id string, shared bool) bool {
	at, known := s.starting[id]
	delete(s.starting, id)
	return known && (at.updated || shared && at.changes != s.changes)
}

// forget drops a container that will not start (stopped or removed).
func (s *startTracker) forget(id string) { delete(s.starting, id) }

// resync keeps, after a Synchronize, the containers that are still placed
// and adds those the runtime reports created but not started: a plugin
// restarted between their creation and start learns of them only there.
// Their creation counts as now; updated tells those the Synchronize sent an
// update, which may be lost as any other.
func (s *startTracker) resync(placed func(id string) bool, created []string, updated func(id string) bool) {
	old := s.starting
	s.starting = make(map[string]notStartedYet, len(old)+len(created))
	for id := range old {
		if placed(id) {
			s.starting[id] = notStartedYet{changes: s.changes, updated: updated(id)}
		}
	}
	for _, id := range created {
		s.starting[id] = notStartedYet{changes: s.changes, updated: updated(id)}
	}
}

// Outcomes of a re-applied placement, the values of the outcome label of
// the reapplied_updates_total metric.
const (
	reapplyApplied = "applied"
	reapplyFailed  = "failed" // the runtime reported it could not apply it
	reapplyError   = "error"  // the request to the runtime failed
)

// reapplier pushes the current placement of containers through the runner's
// Updater, behind the NRI handlers: of started containers whose update may
// have been lost, and of those a Synchronize reply had no room for.
// Containers queued while a push is on its way coalesce into the next one.
type reapplier struct {
	updater plugin.Updater
	// current returns, under the plugin's lock, the updates that set the
	// given containers to their placements as they are now; a container no
	// longer placed (removed meanwhile) is left out.
	current func(ids []string) []*api.ContainerUpdate
	log     *logrus.Entry
	metrics *metrics

	mu sync.Mutex
	// queued are the containers to push, with the log fields naming them.
	queued map[string]logrus.Fields

	wake      chan struct{} // holds at most one signal
	closing   chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

func newReapplier(updater plugin.Updater, current func([]string) []*api.ContainerUpdate, log *logrus.Entry, m *metrics) *reapplier {
	r := &reapplier{
		updater: updater, current: current, log: log, metrics: m,
		queued: map[string]logrus.Fields{},
		wake:   make(chan struct{}, 1), closing: make(chan struct{}), stopped: make(chan struct{}),
	}
	go r.run()
	return r
}

// Queue asks for the container's placement to be pushed; it returns at
// once and may be called from a handler. names are the log fields naming
// the container.
func (r *reapplier) Queue(id string, names logrus.Fields) {
	r.mu.Lock()
	r.queued[id] = names
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Close stops the pusher once its push in flight, if any, returned (the
// runner closes the plugin after the NRI connection, which fails it).
func (r *reapplier) Close() {
	r.closeOnce.Do(func() { close(r.closing) })
	<-r.stopped
}

func (r *reapplier) run() {
	defer close(r.stopped)
	for {
		select {
		case <-r.wake:
			r.pushQueued()
		case <-r.closing:
			return
		}
	}
}

// pushQueued pushes the queued containers' placements and pushes again
// those whose placement changed while the push was on its way: a handler's
// newer update may have reached the runtime before the push, which then
// overwrote it. Each round reads the placements afresh, so the last push
// of a container carries its placement as it is then.
func (r *reapplier) pushQueued() {
	r.mu.Lock()
	names := r.queued
	r.queued = map[string]logrus.Fields{}
	r.mu.Unlock()
	for ids := slices.Sorted(maps.Keys(names)); len(ids) > 0; {
		updates := r.current(ids)
		if len(updates) == 0 {
			return
		}
		r.push(updates, names)
		ids = r.changedSince(updates)
	}
}

// push sends the updates and logs and counts the outcome per container. A
// container the runtime could not update because it was removed meanwhile
// is no failure.
func (r *reapplier) push(updates []*api.ContainerUpdate, names map[string]logrus.Fields) {
	entry := func(u *api.ContainerUpdate) *logrus.Entry {
		cpu := u.GetLinux().GetResources().GetCpu()
		return r.log.WithFields(names[u.GetContainerId()]).WithFields(logrus.Fields{"cpus": cpu.GetCpus(), "mems": cpu.GetMems()})
	}
	err := errors.New("the runner gave the plugin no updater")
	var failed []*api.ContainerUpdate
	if r.updater != nil {
		failed, err = r.updater.UpdateContainers(updates)
	}
	if err != nil {
		r.count(reapplyError, len(updates))
		for _, u := range updates {
			entry(u).WithError(err).Warn("could not re-apply the placement of a container")
		}
		return
	}
	failedIDs := make([]string, 0, len(failed))
	for _, u := range failed {
		failedIDs = append(failedIDs, u.GetContainerId())
	}
	stillPlaced := r.current(failedIDs)
	for _, u := range updates {
		id := u.GetContainerId()
		switch {
		case !slices.Contains(failedIDs, id):
			r.count(reapplyApplied, 1)
			entry(u).Info("re-applied the placement of a container")
		case slices.ContainsFunc(stillPlaced, func(p *api.ContainerUpdate) bool { return p.GetContainerId() == id }):
			r.count(reapplyFailed, 1)
			entry(u).Warn("the runtime did not apply the re-applied placement of a container")
		default:
			entry(u).Debug("container removed before its placement was re-applied")
		}
	}
}

// changedSince returns the containers whose placement is no longer the one
// sent.
func (r *reapplier) changedSince(sent []*api.ContainerUpdate) []string {
	ids := make([]string, len(sent))
	for i, u := range sent {
		ids[i] = u.GetContainerId()
	}
	now := r.current(ids)
	byID := make(map[string]*api.LinuxCPU, len(now))
	for _, u := range now {
		byID[u.GetContainerId()] = u.GetLinux().GetResources().GetCpu()
	}
	var changed []string
	for _, u := range sent {
		was, is := u.GetLinux().GetResources().GetCpu(), byID[u.GetContainerId()]
		if is != nil && (is.GetCpus() != was.GetCpus() || is.GetMems() != was.GetMems()) {
			changed = append(changed, u.GetContainerId())
		}
	}
	return changed
}

func (r *reapplier) count(outcome string, n int) {
	r.metrics.reapplied.WithLabelValues(outcome).Add(float64(n))
}
