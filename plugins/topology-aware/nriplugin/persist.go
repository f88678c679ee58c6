package nriplugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// CheckpointVersion is the schema version of the checkpoint's payload,
// Saved. Bump it when Saved changes incompatibly. Saved's classes came
// later, optional: a checkpoint written before them loads, with none.
const CheckpointVersion = 1

// Saved is the checkpoint's payload: the policy's state and the running
// containers' classes by container id (package classes).
type Saved struct {
	policy.Snapshot
	Classes map[string]classes.Assignment `json:"classes,omitempty"`
}

// errPersisterClosed fails a Flush after Close.
var errPersisterClosed = errors.New("the persister is closed")

const (
	// writeDelay is how long the changes must pause before the writer
	// writes: a burst of container creations (a node filling up, a
	// Deployment scaled out) then costs one write, not one per container,
	// and the write does not compete for the CPU with the burst's requests.
	writeDelay = 20 * time.Millisecond
	// maxWriteDelay bounds how long changes wait under sustained churn: the
	// writer writes at the latest this long after the first change it has
	// not written. A checkpoint of hundreds of containers takes milliseconds
	// to encode and sync.
	maxWriteDelay = time.Second
	// retryDelay is how long a failed write waits before it is tried again.
	retryDelay = time.Second
)

// persister writes the plugin's state behind the NRI handlers: the
// checkpoint and the pool and placement records in the shared state.
//
// Why behind and not in the handler: every NRI request holds the runtime's
// one lock, and a durable write is an fsync of the file and of its
// directory (milliseconds on a disk, seconds behind a burst of other
// writes); a checkpoint of thousands of containers also takes a while to
// encode. Doing that inline would stall every container operation on the
// node. So a handler only marks the state changed; one goroutine takes a
// snapshot (under the plugin's lock, in memory) and writes it, and changes
// that arrive meanwhile coalesce into the next write. No request ever waits
// for it: not even Synchronize.
//
// What a crash between a change and its write costs: the checkpoint is
// behind the runtime by the changes of the last write interval
// (writeDelay, at most maxWriteDelay, or the write in progress). No
// placement the runtime was told about is lost by it: Synchronize adopts
// where they run the containers the checkpoint lacks, or records elsewhere
// (created or resized in that interval), and drops those it has that no
// longer run (see policy.Restore). What the runtime cannot show is lost: a
// pod-scope reservation made in that interval (its containers keep their
// CPUs; the pod's later containers are placed without it). Close writes
// everything.
//
// The records are published unsynced (state.Records.Unsynced): they are
// rebuilt from the checkpoint at every start and mean nothing after a
// reboot, and syncing one per new container, on a disk, held the writer
// for seconds after a burst of creations.
type persister struct {
	// checkpoint is where the state is saved; the configuration may move it.
	checkpoint atomic.Pointer[state.Checkpoint[Saved]]
	// The records in the shared state; nil: sharing disabled.
	pools      *recordSet[state.PoolRecord]
	placements *recordSet[state.PlacementRecord]
	// collect returns the state to write, under the plugin's lock; ok is
	// false while there is none yet (before the first Synchronize).
	collect func() (st persistedState, ok bool)
	// saved is told of every checkpoint saved, in the writer.
	saved   func(*state.Checkpoint[Saved])
	log     *logrus.Entry
	metrics *metrics

	// generation counts changes; the writer compares it with what it wrote.
	generation atomic.Uint64
	changed    chan struct{} // wakes the writer; holds at most one signal
	flushes    chan flushRequest
	closing    chan struct{}
	stopped    chan struct{}
	closeOnce  sync.Once

	// Owned by the writer goroutine.
	written uint64 // the generation last written
	lastErr error  // of that write; a failed write is retried
}

// persistedState is what the writer saves: the checkpoint's payload and
// the pool records to publish, by key; the placement records are made from
// the snapshot outside the plugin's lock.
type persistedState struct {
	saved Saved
	pools map[string]state.PoolRecord
}

// flushRequest asks the writer to write every change made before it.
type flushRequest struct {
	reply chan error
}

// newPersister starts the writer; saved (may be nil) is told of every
// checkpoint saved.
func newPersister(cp *state.Checkpoint[Saved], pools *state.Records[state.PoolRecord], placements *state.Records[state.PlacementRecord],
	collect func() (persistedState, bool), saved func(*state.Checkpoint[Saved]), log *logrus.Entry, m *metrics) *persister {
	if saved == nil {
		saved = func(*state.Checkpoint[Saved]) {}
	}
	s := &persister{
		collect: collect, saved: saved, log: log, metrics: m,
		changed: make(chan struct{}, 1), flushes: make(chan flushRequest),
		closing: make(chan struct{}), stopped: make(chan struct{}),
	}
	if pools != nil && placements != nil {
		s.pools = &recordSet[state.PoolRecord]{records: pools.Unsynced(), what: "pool", equal: func(a, b state.PoolRecord) bool { return a == b }, log: log}
		s.placements = &recordSet[state.PlacementRecord]{records: placements.Unsynced(), what: "placement", equal: samePlacement, log: log}
	}
	s.checkpoint.Store(cp)
	go s.run()
	return s
}

// UseCheckpoint saves the state in cp from the next write on.
func (s *persister) UseCheckpoint(cp *state.Checkpoint[Saved]) {
	s.checkpoint.Store(cp)
	s.Changed()
}

// Changed tells the persister that the state changed; it returns at once.
func (s *persister) Changed() {
	s.generation.Add(1)
	select {
	case s.changed <- struct{}{}:
	default: // the writer is already woken
	}
}

// Flush waits until every change made before the call is written, the
// checkpoint and the records, and returns the error of that write. It must
// not be called with the plugin's lock held (the writer takes it to collect
// the state). Only Close and tests wait for it.
func (s *persister) Flush() error {
	req := flushRequest{reply: make(chan error, 1)}
	select {
	case s.flushes <- req:
		return <-req.reply
	case <-s.stopped:
		if s.generation.Load() != s.written {
			return fmt.Errorf("flush state: %w", errPersisterClosed)
		}
		return s.lastErr
	}
}

// Close flushes and stops the writer.
func (s *persister) Close() error {
	err := s.Flush()
	s.closeOnce.Do(func() { close(s.closing) })
	<-s.stopped
	return err
}

// run is the writer: it writes once the changes paused for writeDelay (or
// maxWriteDelay after the first unwritten one), at once on Flush, and again
// retryDelay after a failed write.
func (s *persister) run() {
	defer close(s.stopped)
	timer := time.NewTimer(writeDelay)
	timer.Stop()             // armed by the first change
	var dirtySince time.Time // the first change not written yet; zero: none
	// write writes what changed.
	write := func() {
		dirtySince = time.Time{}
		target := s.generation.Load()
		if target == s.written && s.lastErr == nil {
			return
		}
		s.written, s.lastErr = target, s.write()
		if s.lastErr != nil {
			timer.Reset(retryDelay)
		}
	}
	for {
		select {
		case <-s.changed:
			now := time.Now()
			if dirtySince.IsZero() {
				dirtySince = now
			}
			timer.Reset(writeWait(now, dirtySince))
		case <-timer.C:
			write()
		case req := <-s.flushes:
			write()
			req.reply <- s.lastErr
		case <-s.closing:
			return
		}
	}
}

// writeWait is how long the writer waits, at now, before it writes the
// changes it has not written since dirtySince: writeDelay, but not past
// maxWriteDelay after dirtySince.
func writeWait(now, dirtySince time.Time) time.Duration {
	return max(0, min(writeDelay, dirtySince.Add(maxWriteDelay).Sub(now)))
}

// write saves the checkpoint, tells saved, and brings the records in line
// with it: the pools first, so that a placement never names a pool record
// not yet there.
func (s *persister) write() error {
	st, ok := s.collect()
	if !ok {
		return nil
	}
	start := time.Now()
	cp := s.checkpoint.Load()
	err := cp.Save(st.saved)
	s.metrics.checkpointWrite(time.Since(start), err)
	if err != nil {
		s.log.WithError(err).Error("could not save the checkpoint; retrying")
		return err
	}
	s.saved(cp)
	if s.placements == nil {
		return nil
	}
	placements := make(map[string]state.PlacementRecord, len(st.saved.Containers))
	for _, c := range st.saved.Containers {
		placements[c.Placement.ContainerID] = newPlacementRecord(c.Request, c.Placement)
	}
	if err := errors.Join(s.pools.sync(st.pools), s.placements.sync(placements)); err != nil {
		s.log.WithError(err).Warn("could not publish every record; retrying")
		return err
	}
	return nil
}

// recordSet is one kind of records as the writer keeps them published.
type recordSet[T any] struct {
	records *state.Records[T]
	what    string // the kind in messages: "placement"
	equal   func(a, b T) bool
	log     *logrus.Entry
	// published is what the directory holds; nil until listed.
	published map[string]T
}

// sync publishes the records that differ from what was published and
// removes those no longer wanted.
func (s *recordSet[T]) sync(want map[string]T) error {
	if s.published == nil {
		onDisk, err := s.loadPublished()
		if err != nil {
			return err
		}
		s.published = onDisk
	}
	var errs []error
	for key, rec := range want {
		if old, ok := s.published[key]; ok && s.equal(old, rec) {
			continue
		}
		if err := s.records.Publish(key, rec); err != nil {
			errs = append(errs, err)
			continue
		}
		s.published[key] = rec
	}
	for key := range s.published {
		if _, ok := want[key]; ok {
			continue
		}
		switch err := s.records.Remove(key); {
		case errors.Is(err, state.ErrNotOwned):
			// Not a record (some other file in its place): left there, and
			// not tried again.
			s.log.WithError(err).Warnf("left a file that is not a %s record", s.what)
		case err != nil:
			errs = append(errs, err)
			continue
		}
		delete(s.published, key)
	}
	return errors.Join(errs...)
}

// loadPublished reads what an earlier process published. A record that
// cannot be read (torn, or of an older schema version) stands as a zero
// record, which no wanted record equals: it is rewritten, or removed if it
// is no longer wanted.
func (s *recordSet[T]) loadPublished() (map[string]T, error) {
	keys, err := s.records.Keys()
	if err != nil {
		return nil, fmt.Errorf("list published %s records: %w", s.what, err)
	}
	out := make(map[string]T, len(keys))
	unreadable := 0
	for _, key := range keys {
		rec, found, err := s.records.Read(key)
		if err != nil {
			unreadable++
		}
		if found || err != nil {
			out[key] = rec
		}
	}
	if unreadable > 0 {
		// One line, not one per record: after an upgrade every record of
		// the older schema is unreadable.
		s.log.WithField("records", unreadable).Warnf("replacing unreadable or outdated %s records", s.what)
	}
	return out, nil
}
