package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// formatVersion is the layout of the envelope itself; the payload's layout is
// the caller's schema version.
const formatVersion = 1

var (
	// ErrCorrupt matches every *CorruptError.
	ErrCorrupt = errors.New("corrupt state file")
	// ErrUnreadable: the file exists but could not be read: it is not a
	// regular file (a directory, a FIFO, a link) or above its size limit.
	ErrUnreadable = errors.New("unreadable")
	// ErrMalformed: not a well-formed envelope, or a payload that does not decode.
	ErrMalformed = errors.New("malformed")
	// ErrWrongVersion: another envelope format or payload schema version.
	ErrWrongVersion = errors.New("wrong version")
	// ErrChecksumMismatch: the payload was truncated or edited after it was written.
	ErrChecksumMismatch = errors.New("checksum mismatch")
)

// CorruptError reports a state file that exists but cannot be used. Err says
// what was wrong and matches one of ErrUnreadable, ErrMalformed,
// ErrWrongVersion or ErrChecksumMismatch.
type CorruptError struct {
	File    string // the bad file
	MovedTo string // where it was kept for inspection; empty if left in place
	Err     error
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("corrupt state file %s: %v", e.File, e.Err)
	if e.MovedTo != "" {
		msg += "; moved aside to " + e.MovedTo
	}
	return msg
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// envelope is what every state file holds.
type envelope struct {
	Format   int             `json:"format"`
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Data     json.RawMessage `json:"data"`
}

// encode wraps v in an envelope. The file is indented for people reading it;
// the checksum covers the compact payload, so whitespace does not matter.
func encode(version int, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding payload: %w", err)
	}
	out, err := json.MarshalIndent(envelope{
		Format:   formatVersion,
		Version:  version,
		Checksum: checksum(data),
		Data:     data,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding envelope: %w", err)
	}
	return append(out, '\n'), nil
}

// parseEnvelope decodes the envelope in raw, strictly, without checking its
// format, version or payload.
func parseEnvelope(raw []byte) (envelope, error) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return env, fmt.Errorf("%w: decoding envelope: %w", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return env, fmt.Errorf("%w: data after the envelope", ErrMalformed)
	}
	if env.Data == nil {
		return env, fmt.Errorf("%w: no data field", ErrMalformed)
	}
	return env, nil
}

// decode checks the envelope in raw and decodes its payload strictly.
//
// The file is compacted first, whole: its payload is then the compact form
// the checksum covers, and the two decodings after it scan the payload
// without the indentation (a third of a large checkpoint's bytes).
func decode[T any](raw []byte, version int) (T, error) {
	var zero T
	compact := bytes.NewBuffer(make([]byte, 0, len(raw)))
	if err := json.Compact(compact, raw); err != nil {
		// Not JSON: the envelope's decoder says how (truncated, data after
		// it) the way the other errors do.
		if _, err := parseEnvelope(raw); err != nil {
			return zero, err
		}
		return zero, fmt.Errorf("%w: decoding envelope: %w", ErrMalformed, err)
	}
	env, err := parseEnvelope(compact.Bytes())
	if err != nil {
		return zero, err
	}
	if env.Format != formatVersion {
		return zero, fmt.Errorf("%w: format %d, want %d", ErrWrongVersion, env.Format, formatVersion)
	}
	if env.Version != version {
		return zero, fmt.Errorf("%w: schema version %d, want %d", ErrWrongVersion, env.Version, version)
	}
	if sum := checksum(env.Data); env.Checksum != sum {
		return zero, fmt.Errorf("%w: file says %q, data hashes to %q", ErrChecksumMismatch, env.Checksum, sum)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(env.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return zero, fmt.Errorf("%w: decoding data: %w", ErrMalformed, err)
	}
	return v, nil
}

func checksum(compactData []byte) string {
	sum := sha256.Sum256(compactData)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Checkpoint is one plugin's durable memory of type T in a single JSON file.
// It is safe for concurrent use; processes sharing it serialize their writes.
type Checkpoint[T any] struct {
	path    string
	version int
	mu      sync.Mutex
}

// NewCheckpoint returns the checkpoint at path whose payload has schema
// version (>= 1). Bump the version when T changes incompatibly: a file of
// another version is then set aside instead of misread.
func NewCheckpoint[T any](path string, version int) (*Checkpoint[T], error) {
	if path == "" {
		return nil, errors.New("creating checkpoint: empty path")
	}
	if version < 1 {
		return nil, fmt.Errorf("creating checkpoint %s: schema version %d, want >= 1", path, version)
	}
	return &Checkpoint[T]{path: filepath.Clean(path), version: version}, nil
}

// Path is the checkpoint's file.
func (c *Checkpoint[T]) Path() string { return c.path }

// Save durably replaces the checkpoint with v, creating its directory (0700)
// if needed; the file is private to its plugin (0600).
func (c *Checkpoint[T]) Save(v T) error {
	data, err := encode(c.version, v)
	if err != nil {
		return fmt.Errorf("saving checkpoint %s: %w", c.path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := writeFileAtomic(c.path, data, privatePerms, MaxCheckpointSize); err != nil {
		return fmt.Errorf("saving checkpoint %s: %w", c.path, err)
	}
	return nil
}

// Load reads the checkpoint. found is false when there is none. A file that
// cannot be used is moved aside and returned as a *CorruptError with found
// false: log it and start empty. Any other error means the checkpoint's
// directory itself is unusable. Load removes a temp file left by a killed
// writer.
func (c *Checkpoint[T]) Load() (v T, found bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := filepath.Dir(c.path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	}
	// Writers replace the file by a rename, so it reads whole without the
	// lock. The lock is for tidying: removing a killed writer's temp file
	// and moving a bad checkpoint aside. A lock another process holds (a
	// writer stuck on a slow disk, say) must not cost the state: then the
	// checkpoint is read all the same, and left where it is.
	unlock, lockErr := lockDir(dir)
	switch {
	case errors.Is(lockErr, ErrLockHeld):
		unlock = func() {}
	case lockErr != nil:
		return v, false, fmt.Errorf("loading checkpoint %s: %w", c.path, lockErr)
	default:
		if err := removeIfExists(tempPath(c.path)); err != nil {
			unlock()
			return v, false, fmt.Errorf("loading checkpoint %s: removing stale temp file: %w", c.path, err)
		}
	}
	defer unlock()
	aside := c.moveAside
	if lockErr != nil {
		aside = func(reason error) error { return &CorruptError{File: c.path, Err: reason} }
	}
	raw, err := fsread.NoFollow(c.path, MaxCheckpointSize)
	if errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	}
	if err != nil {
		return v, false, aside(fmt.Errorf("%w: %w", ErrUnreadable, err))
	}
	v, err = decode[T](raw, c.version)
	if err != nil {
		return v, false, aside(err)
	}
	return v, true, nil
}

// Remove deletes the checkpoint, and the temp file a killed writer left for
// it: a plugin whose checkpoint moved to another directory retires the old
// one. A file in its place that this package did not write is left there,
// and the error matches ErrNotOwned; a missing one is not an error.
func (c *Checkpoint[T]) Remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := removeOwnedIf(c.path, func() bool { return true }); err != nil {
		return fmt.Errorf("removing checkpoint %s: %w", c.path, err)
	}
	return nil
}

// RemoveAll is Remove, and then the checkpoint's directory with its
// writers' lock when nothing else is left in it: a plugin leaving the node
// for good takes its state with it.
func (c *Checkpoint[T]) RemoveAll() error {
	if err := c.Remove(); err != nil {
		return err
	}
	if err := pruneDir(filepath.Dir(c.path)); err != nil {
		return fmt.Errorf("removing checkpoint %s: %w", c.path, err)
	}
	return nil
}

// moveAside keeps the bad file for inspection under a name that no later Save
// or Load touches.
func (c *Checkpoint[T]) moveAside(reason error) error {
	aside := c.path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(c.path, aside); err != nil {
		return &CorruptError{File: c.path, Err: fmt.Errorf("%w; could not move it aside: %w", reason, err)}
	}
	return &CorruptError{File: c.path, MovedTo: aside, Err: reason}
}
