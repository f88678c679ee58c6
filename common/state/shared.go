package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// DefaultDir is the node-local shared state directory.
const DefaultDir = "/run/nri-suite"

// ErrInvalidName: a kind or key that is not a plain file name.
var ErrInvalidName = errors.New("invalid name")

// namePattern keeps kinds and keys single path elements: no separators, no
// leading dot (so no "..", and no clash with temp and lock files).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func validateName(what, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: %s %q, want 1-128 characters of [A-Za-z0-9_.-] starting with a letter or digit",
			ErrInvalidName, what, name)
	}
	return nil
}

const recordExt = ".json"

// Records are the shared records of one kind, each a small file
// <root>/<kind>/<key>.json holding a T. One plugin publishes a kind; any
// plugin reads it at any time without locking and never sees a partial file.
// Records is safe for concurrent use.
type Records[T any] struct {
	kind    string
	dir     string
	version int
	sync    durability
}

// NewRecords binds the records of kind under root (usually DefaultDir) with
// payload schema version (>= 1). It creates nothing: readers may run before
// the publisher, or with a read-only view of root.
func NewRecords[T any](root, kind string, version int) (*Records[T], error) {
	if root == "" {
		return nil, fmt.Errorf("binding %s records: empty shared state directory", kind)
	}
	if err := validateName("kind", kind); err != nil {
		return nil, fmt.Errorf("binding records: %w", err)
	}
	if version < 1 {
		return nil, fmt.Errorf("binding %s records: schema version %d, want >= 1", kind, version)
	}
	return &Records[T]{kind: kind, dir: filepath.Join(root, kind), version: version, sync: synced}, nil
}

// Unsynced returns the same records, published without syncing them to the
// disk: for records that their publisher rebuilds whenever it starts, and
// that mean nothing after a reboot, on a state directory that may be on a
// disk, where the two fsyncs of a synced write cost milliseconds each. A
// reader still never sees a partial record (they are renamed into place);
// only a crash of the machine may leave an old or empty one, which the
// publisher replaces at its start.
func (r *Records[T]) Unsynced() *Records[T] {
	out := *r
	out.sync = unsynced
	return &out
}

// Dir is the directory holding the records.
func (r *Records[T]) Dir() string { return r.dir }

func (r *Records[T]) path(key string) string { return filepath.Join(r.dir, key+recordExt) }

// Publish atomically creates or replaces the record key (file mode 0644, new
// directories 0755, so that plugins under any user can read it).
func (r *Records[T]) Publish(key string, v T) error {
	_, err := r.PublishIf(key, v, nil)
	return err
}

// PublishIf is Publish, unless may, given the record there now, keeps it; a
// missing or unreadable record is replaced, and a nil may replaces any. The
// check and the write are one step under the writers' lock, so that no
// other process publishes in between. It reports whether v was published.
func (r *Records[T]) PublishIf(key string, v T, may func(current T) bool) (bool, error) {
	if err := validateName("key", key); err != nil {
		return false, fmt.Errorf("publishing %s record: %w", r.kind, err)
	}
	data, err := encode(r.version, v)
	if err == nil {
		err = ensureDir(r.dir, sharedPerms.dir)
	}
	if err != nil {
		return false, fmt.Errorf("publishing %s record %s: %w", r.kind, key, err)
	}
	unlock, err := lockDir(r.dir)
	if err != nil {
		return false, fmt.Errorf("publishing %s record %s: %w", r.kind, key, err)
	}
	defer unlock()
	if !r.allows(key, may) {
		return false, nil
	}
	if err := writeLocked(r.path(key), data, sharedPerms, MaxRecordSize, r.sync); err != nil {
		return false, fmt.Errorf("publishing %s record %s: %w", r.kind, key, err)
	}
	return true, nil
}

// allows reports whether may lets the record key be replaced or removed:
// may is nil, there is no record, it cannot be read, or may says so.
func (r *Records[T]) allows(key string, may func(current T) bool) bool {
	if may == nil {
		return true
	}
	current, found, err := r.Read(key)
	return err != nil || !found || may(current)
}

// Read returns the record key; found is false when there is none. A record
// that cannot be used is returned as a *CorruptError and left in place: its
// publisher replaces it on its next Publish.
func (r *Records[T]) Read(key string) (v T, found bool, err error) {
	if err := validateName("key", key); err != nil {
		return v, false, fmt.Errorf("reading %s record: %w", r.kind, err)
	}
	path := r.path(key)
	// Not through a link: Publish writes none, so one is someone else's.
	raw, err := fsread.NoFollow(path, MaxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, &CorruptError{File: path, Err: fmt.Errorf("%w: %w", ErrUnreadable, err)}
	}
	v, err = decode[T](raw, r.version)
	if err != nil {
		return v, false, &CorruptError{File: path, Err: err}
	}
	return v, true, nil
}

// Keys lists the published keys in order; none when the kind's directory
// does not exist yet.
func (r *Records[T]) Keys() ([]string, error) {
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s records: %w", r.kind, err)
	}
	var keys []string
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), recordExt)
		// Skips temp and lock files, which start with a dot.
		if ok && validateName("key", key) == nil {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// List reads every record. A bad record does not hide the others: the good
// ones are returned along with the errors.Join of one *CorruptError per bad
// file.
func (r *Records[T]) List() (map[string]T, error) {
	keys, err := r.Keys()
	if err != nil {
		return nil, err
	}
	records := make(map[string]T, len(keys))
	var errs []error
	for _, key := range keys {
		v, found, err := r.Read(key)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found: // not found: removed since Keys listed it
			records[key] = v
		}
	}
	return records, errors.Join(errs...)
}

// Remove deletes the record key, and a temp file a killed publisher left for
// it. Removing an absent record is not an error. A file in the record's
// place that this package did not write is left there, and the error
// matches ErrNotOwned.
func (r *Records[T]) Remove(key string) error {
	_, err := r.RemoveIf(key, nil)
	return err
}

// RemoveIf is Remove, unless may, given the record there, keeps it (as
// PublishIf, under the writers' lock). It reports whether the record is
// gone: false when may kept it.
func (r *Records[T]) RemoveIf(key string, may func(current T) bool) (bool, error) {
	if err := validateName("key", key); err != nil {
		return false, fmt.Errorf("removing %s record: %w", r.kind, err)
	}
	removed, err := removeOwnedIf(r.path(key), func() bool { return r.allows(key, may) })
	if err != nil {
		return false, fmt.Errorf("removing %s record %s: %w", r.kind, key, err)
	}
	return removed, nil
}

// RemoveAll removes every record of the kind and then its directory
// (Prune), as the kind's publisher does when it leaves the node for good.
// A file in a record's place that this package did not write stays, and
// the error names it.
func (r *Records[T]) RemoveAll() error {
	keys, err := r.Keys()
	if err != nil {
		return err
	}
	var errs []error
	for _, key := range keys {
		errs = append(errs, r.Remove(key))
	}
	errs = append(errs, r.Prune())
	return errors.Join(errs...)
}

// Prune removes the kind's directory, with its writers' lock, when no
// other file is left in it; otherwise it leaves it as it is.
func (r *Records[T]) Prune() error {
	if err := pruneDir(r.dir); err != nil {
		return fmt.Errorf("pruning %s records: %w", r.kind, err)
	}
	return nil
}

// pruneDir removes dir and its writers' lock when nothing else is in it.
func pruneDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != lockName {
			return nil
		}
	}
	if err := removeIfExists(filepath.Join(dir, lockName)); err != nil {
		return err
	}
	return RemoveDirIfEmpty(dir)
}

// RemoveDirIfEmpty removes dir if it is an empty directory. One that is
// absent, holds something (another plugin's records, written meanwhile) or
// is a mount point (a plugin's container mounts the shared directory) is
// left as it is without an error.
func RemoveDirIfEmpty(dir string) error {
	// rmdir(2), not os.Remove: a file in dir's place must stay.
	err := syscall.Rmdir(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) ||
		errors.Is(err, syscall.EBUSY) {
		return nil
	}
	return fmt.Errorf("removing directory %s: %w", dir, err)
}
