package nriplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// RemoveNodeState implements plugin.NodeStateRemover: the plugin leaves the
// node for good (uninstalled), so the coordination directories it made go,
// but for those a container still needs (coord.Dir.InUse: a helper runs, or
// a container waits to start), then the state directory if that leaves it
// empty, and the helper on the host, which running containers keep as the
// runtime bind-mounted it (its directory, the plugin's mount point, stays).
// The coordination directories left are named in the error: they go with
// the node's /run at its next boot.
func (p *Plugin) RemoveNodeState() error {
	helper, stateDir := p.paths()
	var errs []error
	entries, err := os.ReadDir(stateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing %s: %w", stateDir, err))
	}
	var inUse []string
	for _, e := range entries {
		dir := coord.Dir{Path: filepath.Join(stateDir, e.Name())}
		switch {
		case !e.IsDir() || !dir.Owned():
			continue
		case dir.InUse():
			inUse = append(inUse, dir.Path)
		default:
			errs = append(errs, os.RemoveAll(dir.Path))
		}
	}
	if len(inUse) > 0 {
		errs = append(errs, fmt.Errorf("coordination directories of pods whose containers still run or wait to start stay: %s", strings.Join(inUse, ", ")))
	}
	errs = append(errs, state.RemoveDirIfEmpty(stateDir))
	if helper != "" {
		if err := os.Remove(helper); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the helper %s: %w", helper, err))
		}
	}
	return errors.Join(errs...)
}
