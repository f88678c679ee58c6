package nriplugin

import (
	"errors"
	"fmt"
	"os"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/plugins/device-injector/request"
)

// ErrNoDevice is wrapped by the error for a device path that is not a char
// or block device node on the host.
var ErrNoDevice = errors.New("no such device node")

// hostDevice completes a requested device node from the host: its type and
// numbers when the annotation leaves them out (and a check that they agree
// when it does not), and its permissions when no file_mode is given. The
// node must exist: a container asking for a device the host does not have
// would run without it.
func hostDevice(d request.Device) (rspec.LinuxDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(d.Path, &st); err != nil {
		return rspec.LinuxDevice{}, fmt.Errorf("%w: device %s (from %s): %w", ErrNoDevice, d.Path, d.Key, err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return rspec.LinuxDevice{}, fmt.Errorf("%w: device %s (from %s): not a char or block device node", ErrNoDevice, d.Path, d.Key)
	}
	major, minor := int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev))) //nolint:unconvert // Rdev's type differs by arch
	if d.Type != "" && d.Type != typ || d.Major != nil && (*d.Major != major || *d.Minor != minor) {
		return rspec.LinuxDevice{}, fmt.Errorf("device %s (from %s): the annotation says %s, but the host's node is %s %d:%d",
			d.Path, d.Key, describeRequested(d), typ, major, minor)
	}
	out := rspec.LinuxDevice{Path: d.Path, Type: typ, Major: major, Minor: minor, UID: d.UID, GID: d.GID}
	mode := os.FileMode(st.Mode & 0o777)
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
