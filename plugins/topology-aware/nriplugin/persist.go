package nriplugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// CheckpointVersion is the schema version of the checkpoint's payload, a
// policy.Snapshot. Bump it when policy.Snapshot changes incompatibly.
const CheckpointVersion = 1

// errPersisterClosed fails a Flush after Close.
var errPersisterClosed = errors.New("the persister is closed")

const (
	// writeDelay is how long the writer lets changes accumulate before it
	// writes: a burst of container creations (a node filling up, a
	// Deployment scaled out) then costs one write, not one per container.
	// Flush does not wait for it.
	writeDelay = 20 * time.Millisecond
	// retryDelay is how long a failed write waits before it is tried again.
	retryDelay = time.Second
)

// persister writes the plugin's state behind the NRI handlers: the
// checkpoint and the placement records in the shared state.
//
// Why behind and not in the handler: every NRI request holds the runtime's
// one lock, and a durable write is an fsync of the file and of its
// directory (milliseconds on a disk), plus, after an exclusive grant, one
// record per shared container whose CPUs changed (hundreds on a busy node).
// Doing that inline would stall every container operation on the node. So
// a handler only marks the state changed; one goroutine takes a snapshot
// (under the plugin's lock, in memory) and writes it, and changes that
// arrive meanwhile coalesce into the next write.
//
// What a crash between a change and its write loses is harmless: the
// runtime still knows every container and its actual cpuset, and
// Synchronize adopts containers that the checkpoint lacks and drops those it
// has that no longer run. Flush, which Synchronize calls before it returns
// and Close calls at shutdown, makes the checkpoint equal the live state.
type persister struct {
	checkpoint *state.Checkpoint[policy.Snapshot]
	records    *state.Records[PlacementRecord] // nil: sharing disabled
	// collect returns the state to write, under the plugin's lock; ok is
	// false while there is none yet (before the first Synchronize).
	collect func() (snap policy.Snapshot, recs map[string]PlacementRecord, ok bool)
	log     *logrus.Entry
	metrics *metrics

	// generation counts changes; the writer compares it with what it wrote.
	generation atomic.Uint64
	changed    chan struct{}   // wakes the writer; holds at most one signal
	flushes    chan chan error // Flush's requests
	closing    chan struct{}
	stopped    chan struct{}
	closeOnce  sync.Once

	// Owned by the writer goroutine.
	written   uint64                     // the generation last written
	lastErr   error                      // of that write; a failed write is retried
	published map[string]PlacementRecord // what the records directory holds; nil until listed
}

func newPersister(cp *state.Checkpoint[policy.Snapshot], recs *state.Records[PlacementRecord],
	collect func() (policy.Snapshot, map[string]PlacementRecord, bool), log *logrus.Entry, m *metrics) *persister {
	s := &persister{
		checkpoint: cp, records: recs, collect: collect, log: log, metrics: m,
		changed: make(chan struct{}, 1), flushes: make(chan chan error),
		closing: make(chan struct{}), stopped: make(chan struct{}),
	}
	go s.run()
	return s
}

// Changed tells the persister that the state changed; it returns at once.
func (s *persister) Changed() {
	s.generation.Add(1)
	select {
	case s.changed <- struct{}{}:
	default: // the writer is already woken
	}
}

// Flush waits until every change made before the call is written and
// returns the error of that write. It must not be called with the plugin's
// lock held (the writer takes it to collect the state).
func (s *persister) Flush() error {
	reply := make(chan error, 1)
	select {
	case s.flushes <- reply:
		return <-reply
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

// run is the writer: it writes writeDelay after a change, at once on Flush,
// and again retryDelay after a failed write.
func (s *persister) run() {
	defer close(s.stopped)
	timer := time.NewTimer(writeDelay)
	timer.Stop() // armed by the first change
	armed := false
	arm := func(d time.Duration) {
		if !armed {
			timer.Reset(d)
			armed = true
		}
	}
	write := func() {
		target := s.generation.Load()
		if target == s.written && s.lastErr == nil {
			return
		}
		s.written, s.lastErr = target, s.write()
		if s.lastErr != nil {
			arm(retryDelay)
		}
	}
	for {
		select {
		case <-s.changed:
			arm(writeDelay)
		case <-timer.C:
			armed = false
			write()
		case reply := <-s.flushes:
			write()
			reply <- s.lastErr
		case <-s.closing:
			return
		}
	}
}

// write saves the checkpoint and brings the records in line with it.
func (s *persister) write() error {
	snap, recs, ok := s.collect()
	if !ok {
		return nil
	}
	start := time.Now()
	err := s.checkpoint.Save(snap)
	s.metrics.checkpointWrite(time.Since(start), err)
	if err != nil {
		s.log.WithError(err).Error("could not save the checkpoint; retrying")
		return err
	}
	if s.records == nil {
		return nil
	}
	if err := s.syncRecords(recs); err != nil {
		s.log.WithError(err).Warn("could not publish every placement record; retrying")
		return err
	}
	return nil
}

// syncRecords publishes the records that differ from what was published and
// removes those of containers that are gone.
func (s *persister) syncRecords(want map[string]PlacementRecord) error {
	if s.published == nil {
		onDisk, err := s.loadPublished()
		if err != nil {
			return err
		}
		s.published = onDisk
	}
	var errs []error
	for key, rec := range want {
		if old, ok := s.published[key]; ok && old.equal(rec) {
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
		if err := s.records.Remove(key); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.published, key)
	}
	return errors.Join(errs...)
}

// loadPublished reads what an earlier process published. A record that
// cannot be read stands as a zero record, which no wanted record equals:
// it is rewritten, or removed if its container is gone.
func (s *persister) loadPublished() (map[string]PlacementRecord, error) {
	keys, err := s.records.Keys()
	if err != nil {
		return nil, fmt.Errorf("list published placements: %w", err)
	}
	out := make(map[string]PlacementRecord, len(keys))
	for _, key := range keys {
		rec, found, err := s.records.Read(key)
		if err != nil {
			s.log.WithError(err).Warn("replacing an unreadable placement record")
		}
		if found || err != nil {
			out[key] = rec
		}
	}
	return out, nil
}
