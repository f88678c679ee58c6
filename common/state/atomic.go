package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// perms are the modes of the files and of the directories this package creates.
type perms struct{ file, dir os.FileMode }

var (
	// privatePerms are for checkpoints: one plugin's own memory.
	privatePerms = perms{file: 0o600, dir: 0o700}
	// sharedPerms are for records that every plugin on the node reads.
	sharedPerms = perms{file: 0o644, dir: 0o755}
)

// Size limits of the files, checked by readers and writers: a file above
// its limit is as corrupt as a torn one, and a reader never reads more.
const (
	// MaxRecordSize bounds a shared record. The largest, device-health's
	// node record, holds about 700 bytes per watched device at most.
	MaxRecordSize = 4 << 20
	// MaxCheckpointSize bounds a checkpoint: topology-aware's holds about
	// 700 bytes per container, so this is some 20,000 containers, far more
	// than a node runs.
	MaxCheckpointSize = 16 << 20
)

// lockName is the lock file that writers in one directory serialize on.
const lockName = ".state.lock"

// tempPath is where the next version of path is written before it is renamed
// into place. The name is fixed, not random, so that a killed writer leaves at
// most one temp file per target, which the next writer simply replaces.
func tempPath(path string) string {
	dir, name := filepath.Split(path)
	return filepath.Join(dir, "."+name+".tmp")
}

// durability says whether a write is synced to the disk before it counts.
type durability bool

const (
	// synced writes survive a power failure: the file and the rename are
	// synced (two fsyncs, milliseconds each on a disk).
	synced durability = true
	// unsynced writes survive the death of their process, as the kernel
	// keeps what was written, but not a crash of the machine, after which
	// the old or the new content, or an empty file, may be found. For state
	// that means nothing after a reboot.
	unsynced durability = false
)

// writeFileAtomic replaces path with data so that readers, and a crash at any
// moment, see either the old or the new content. Data above limit, which
// readers would refuse, is refused here.
func writeFileAtomic(path string, data []byte, p perms, limit int64) error {
	dir := filepath.Dir(path)
	if err := ensureDir(dir, p.dir); err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	return writeLocked(path, data, p, limit, synced)
}

// writeLocked is writeFileAtomic for a caller that holds the lock of path's
// existing directory.
func writeLocked(path string, data []byte, p perms, limit int64, d durability) (err error) {
	if int64(len(data)) > limit {
		return fmt.Errorf("writing %s: %d bytes, above the limit of %s that readers accept", path, len(data), fsread.Size(limit))
	}
	dir := filepath.Dir(path)
	tmp := tempPath(path)
	if err := removeIfExists(tmp); err != nil {
		return fmt.Errorf("removing stale temp file: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, p.file)
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	// The umask may have narrowed the mode given to OpenFile.
	if err := f.Chmod(p.file); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmp, err)
	}
	if d == synced {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s over %s: %w", tmp, path, err)
	}
	if d == unsynced {
		return nil
	}
	// Without this the rename itself may be lost on power failure.
	return syncDir(dir)
}

// ensureDir creates dir with mode perm if it is missing. An existing
// directory keeps its mode: the operator may have chosen it.
func ensureDir(dir string, perm os.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("creating directory: %w", err)
	}
	// MkdirAll's mode is narrowed by the umask, so set it exactly.
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("setting mode of directory: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory to sync it: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
