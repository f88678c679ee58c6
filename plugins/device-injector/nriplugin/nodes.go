package nriplugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/devnode"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
)

// ErrNoDevice is wrapped by the error for a device path that is not a char
// or block device node on the host.
var ErrNoDevice = errors.New("no such device node")

// allowDevicePath checks a device's host path against the rule as written
// and with its symlinks followed, as the node's numbers are read: otherwise
// a link in an allowed directory (/dev/allowed/x -> /dev/sda) would hand the
// container the disk. A link the host's tools make (/dev/disk/by-id/...)
// passes only if the rule allows its target too.
func allowDevicePath(rule config.Rule, namespace, path string) error {
	if err := rule.AllowDevicePath(namespace, path); err != nil {
		return err
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil // hostDevice says that the node is missing
	}
	if err := rule.AllowDevicePath(namespace, resolved); err != nil {
		return fmt.Errorf("device %s is %s on the host: %w", path, resolved, err)
	}
	return nil
}

// hostDevice completes a requested device node from the host: its type and
// numbers when the annotation leaves them out (and a check that they agree
// when it does not), and its permissions when no file_mode is given. The
// node must exist: a container asking for a device the host does not have
// would run without it.
func hostDevice(d request.Device) (rspec.LinuxDevice, error) {
	node, err := devnode.Stat(d.Path)
	if errors.Is(err, devnode.ErrNotDevice) {
		return rspec.LinuxDevice{}, fmt.Errorf("%w: device %s (from %s): not a char or block device node", ErrNoDevice, d.Path, d.Key)
	}
	if err != nil {
		return rspec.LinuxDevice{}, fmt.Errorf("%w: device %s (from %s): %w", ErrNoDevice, d.Path, d.Key, err)
	}
	if d.Type != "" && d.Type != node.Type || d.Major != nil && (*d.Major != node.Major || *d.Minor != node.Minor) {
		return rspec.LinuxDevice{}, fmt.Errorf("device %s (from %s): the annotation says %s, but the host's node is %s %d:%d",
			d.Path, d.Key, describeRequested(d), node.Type, node.Major, node.Minor)
	}
	out := rspec.LinuxDevice{Path: d.Path, Type: node.Type, Major: node.Major, Minor: node.Minor, UID: d.UID, GID: d.GID}
	mode := node.Perm
	if d.FileMode != nil {
		mode = os.FileMode(*d.FileMode)
	}
	out.FileMode = &mode
	return out, nil
}

func describeRequested(d request.Device) string {
	s := d.Type
	if s == "" {
		s = "any type"
	}
	if d.Major != nil {
		s += fmt.Sprintf(" %d:%d", *d.Major, *d.Minor)
	}
	return s
}
