package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// ErrNotOwned: a file where a record or a checkpoint should be that this
// package did not write. It is left in place: nothing here removes what it
// did not write.
var ErrNotOwned = errors.New("not a file of the nri-suite state")

// removeOwnedIf is removeOwned under the writers' lock of path's
// directory, unless may, asked under the lock, keeps the file. A missing
// directory has nothing to remove. It reports whether the file is gone.
func removeOwnedIf(path string, may func() bool) (bool, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return false, err
	}
	defer unlock()
	if !may() {
		return false, nil
	}
	return true, removeOwned(path)
}

// removeOwned removes the file at path if this package wrote it, and the
// temp file a killed writer left for it (a name reserved for that, see
// tempPath). The caller holds the directory's lock. A file this package
// wrote is a regular file holding an envelope with a format and a checksum,
// of any version, so that records of an older schema still go; anything
// else is refused with ErrNotOwned. A missing file is not an error.
func removeOwned(path string) error {
	if err := removeIfExists(tempPath(path)); err != nil {
		return err
	}
	raw, err := fsread.NoFollow(path, MaxCheckpointSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fsread.ErrNotRegular), errors.Is(err, fsread.ErrTooLarge):
		return fmt.Errorf("%w: %w: left in place", ErrNotOwned, err)
	case err != nil:
		return err
	}
	env, err := parseEnvelope(raw)
	if err == nil && (env.Format < 1 || env.Checksum == "") {
		err = errors.New("no format or checksum")
	}
	if err != nil {
		return fmt.Errorf("%w: %s holds no state envelope (%w): left in place", ErrNotOwned, path, err)
	}
	return removeIfExists(path)
}
