package nriplugin

import (
	"errors"
	"fmt"
	"path/filepath"

	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
)

// ErrNoMountSource is wrapped by the error for a mount whose source cannot be
// resolved on the host: it does not exist, or cannot be looked up.
var ErrNoMountSource = errors.New("mount source not resolvable on the host")

// hostMount checks a mount asked for against the rule, as the host resolves
// its source. The source as written must match first, so that a pod cannot
// learn whether a path outside the rule exists; then the source with every
// symlink followed, as the runtime would follow them, must match too. The
// mount's source is the resolved path, so that the runtime mounts what was
// checked: only a directory on that path turned into a symlink between this
// check and the mount could still change it, and the rule should only allow
// directories that nobody but the node's administrators writes.
func hostMount(rule config.Rule, namespace string, m request.Mount) (rspec.Mount, error) {
	if err := rule.AllowMountSource(namespace, m.Source); err != nil {
		return rspec.Mount{}, err
	}
	resolved, err := filepath.EvalSymlinks(m.Source)
	if err != nil {
		return rspec.Mount{}, fmt.Errorf("%w: %w", ErrNoMountSource, err)
	}
	if err := rule.AllowMountSource(namespace, resolved); err != nil {
		return rspec.Mount{}, fmt.Errorf("source %s is %s on the host: %w", m.Source, resolved, err)
	}
	return rspec.Mount{Source: resolved, Destination: m.Destination, Type: m.Type, Options: m.Options}, nil
}
