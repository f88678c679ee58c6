package resolve

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the watcher waits after the last change before it
// rescans: a copy or an editor's save is several events, and a burst of
// spec files installed one by one is many; one rescan follows them all,
// and none reads a half-written file.
const settle = 100 * time.Millisecond

// rewatchInterval is how often spec directories that are not watched (they
// did not exist, or were removed) are tried again, and, without a working
// watcher, how often the directories are rescanned.
const rewatchInterval = time.Second

// specEvents are the changes that may change a spec: atomic writers
// create a temp file and rename it into place, which Linux reports as a
// Create of the target.
const specEvents = fsnotify.Create | fsnotify.Rename | fsnotify.Remove | fsnotify.Write

// watch rescans when a spec file in a spec directory changed, or a spec
// directory appeared or went, until ctx ends. The rescans run here,
// never on a resolution's path: resolutions keep using the last scan.
func (r *Resolver) watch(ctx context.Context) {
	ticker := time.NewTicker(rewatchInterval)
	defer ticker.Stop()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.WithError(err).Warn("cannot watch the CDI spec directories; rescanning them every " + rewatchInterval.String())
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				r.rescan()
			}
		}
	}
	defer w.Close()
	watched := map[string]bool{}
	// rewatch watches the configured directories, and rescans if one was
	// not watched before: what changed in it since the last scan (New's,
	// SetSpecDirs', or before the directory went) would go unnoticed.
	rewatch := func() {
		dirs := r.specDirs()
		for dir := range watched {
			if !slices.Contains(dirs, dir) {
				_ = w.Remove(dir)
				delete(watched, dir)
			}
		}
		added := false
		for _, dir := range dirs {
			if !watched[dir] && w.Add(dir) == nil {
				watched[dir], added = true, true
			}
		}
		if added {
			r.rescan()
		}
	}
	rewatch()
	changed := time.NewTimer(settle)
	changed.Stop()
	defer changed.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.reconfigured:
			rewatch()
		case <-ticker.C:
			rewatch()
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op&specEvents == 0 {
				continue
			}
			if watched[ev.Name] {
				if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
					_ = w.Remove(ev.Name)
					delete(watched, ev.Name) // tried again every rewatchInterval
				}
			} else if ext := filepath.Ext(ev.Name); ext != ".json" && ext != ".yaml" {
				continue
			}
			changed.Reset(settle)
		case <-changed.C:
			r.rescan()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			r.log.WithError(err).Warn("watching the CDI spec directories")
		}
	}
}
