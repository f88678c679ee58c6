// Package devnode reads a device node as the host has it: its type, its
// major and minor numbers and its permissions. Both the injection of device
// nodes by path and the health check of CDI devices' nodes need exactly this.
package devnode

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotDevice is returned for a path that exists but is neither a char nor
// a block device node.
var ErrNotDevice = errors.New("not a char or block device node")

// Node is a device node on the host.
type Node struct {
	Type  string // "c" or "b"
	Major int64
	Minor int64
	Perm  os.FileMode // the permission bits
}

// Stat reads the node at path. A path that does not exist gives an error
// matching fs.ErrNotExist; one that is not a device node, ErrNotDevice.
func Stat(path string) (Node, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Node{}, err
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return Node{}, ErrNotDevice
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // Rdev's type differs by arch
	return Node{Type: typ, Major: int64(unix.Major(rdev)), Minor: int64(unix.Minor(rdev)), Perm: os.FileMode(st.Mode & 0o777)}, nil
}
