package seccomp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long Watch waits after the last change before reloading: a copy or an
// editor's save is several events, and a reload per event would report half-written files.
const settle = 100 * time.Millisecond

// Watch reloads the profile directory whenever something under it changes, until ctx
// ends. Reload errors are logged, not returned: an invalid file must not stop watching.
func (s *Store) Watch(ctx context.Context) error {
	if s.dir == "" {
		return errors.New("watching seccomp profiles: no profile directory configured")
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching seccomp profile directory %s: %w", s.dir, err)
	}
	defer w.Close()
	if err := s.watchTree(w); err != nil {
		return err
	}
	// What changed between the last load and the first watch would go unnoticed.
	s.reloadAndLog()

	timer := time.NewTimer(settle)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			s.log.WithField("event", ev.String()).Debug("seccomp profile directory changed")
			timer.Reset(settle)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.WithError(err).Warn("watching seccomp profile directory")
		case <-timer.C:
			// New subdirectories need their own watch; adding a watched one is a no-op.
			if err := s.watchTree(w); err != nil {
				s.log.WithError(err).Warn("watching seccomp profile directory")
			}
			s.reloadAndLog()
		}
	}
}

// watchTree watches the directory and its visible subdirectories (fsnotify is not recursive).
func (s *Store) watchTree(w *fsnotify.Watcher) error {
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != s.dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
	if err != nil {
		return fmt.Errorf("watching seccomp profile directory %s: %w", s.dir, err)
	}
	return nil
}

func (s *Store) reloadAndLog() {
	invalid, err := s.reload()
	if err != nil {
		s.log.WithError(err).Warn("reloading seccomp profiles")
	}
	s.logInvalid(invalid)
}
