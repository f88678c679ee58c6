package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Sweep deletes the namespaces whose name starts with prefix, which must
// start with Prefix, so that only this package's namespaces can go: call it
// before a run, for what a crashed one left, never while another run on the
// host is live. Processes a crashed run left inside are not its business:
// they keep their namespace, unnamed, until they are stopped.
func Sweep(prefix string) error {
	if !strings.HasPrefix(prefix, Prefix) {
		return fmt.Errorf("sweeping network namespaces: prefix %q does not start with %s", prefix, Prefix)
	}
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweeping network namespaces %s*: %w", prefix, err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := remove(e.Name()); err != nil {
				errs = append(errs, fmt.Errorf("sweeping network namespace %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
