// Package locality finds where a device sits in the machine: the NUMA node
// and the CPUs local to a char or block device (by major:minor) or to a PCI
// function (by address), from a sysfs tree under a configurable root.
//
// A device node resolves through the symlink <root>/dev/{char,block}/M:m into
// the device hierarchy under <root>/devices; a PCI function through
// <root>/bus/pci/devices/<address>. From there the lookup walks up the
// hierarchy until a level reports a numa_node other than -1, taking the CPUs
// from that level's local_cpulist (or the nearest one below it). Virtual devices and machines without NUMA
// information report -1 everywhere: that is an unknown locality, not an error.
package locality

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Kind is the kind of a device node, named as the directories under
// <root>/dev.
type Kind string

// The kinds of device nodes.
const (
	Char  Kind = "char"
	Block Kind = "block"
)

// UnknownNode is the NUMA node of a device whose locality is unknown.
const UnknownNode = -1

// Locality is where a device sits.
type Locality struct {
	// NUMANode is the device's node, or UnknownNode.
	NUMANode int
	// CPUs are the CPUs the kernel reports as local to the device; empty when
	// it reports none. With an unknown node they are usually all CPUs.
	CPUs cpuset.CPUSet
}

// Known reports whether the device's NUMA node is known.
func (l Locality) Known() bool { return l.NUMANode != UnknownNode }

// ErrNotFound is wrapped by the errors for a device that sysfs does not have.
var ErrNotFound = errors.New("device not found in sysfs")

var pciAddress = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// OfDevice returns the locality of the char or block device major:minor.
func OfDevice(root string, kind Kind, major, minor int64) (Locality, error) {
	if kind != Char && kind != Block {
		return Locality{}, fmt.Errorf("locate device %d:%d: kind %q, expected %q or %q", major, minor, kind, Char, Block)
	}
	link := filepath.Join(root, "dev", string(kind), fmt.Sprintf("%d:%d", major, minor))
	l, err := walk(root, link)
	if err != nil {
		return Locality{}, fmt.Errorf("locate %s device %d:%d: %w", kind, major, minor, err)
	}
	return l, nil
}

// OfPCI returns the locality of the PCI function at address, in the full
// form domain:bus:device.function ("0000:3b:00.0").
func OfPCI(root, address string) (Locality, error) {
	if !pciAddress.MatchString(address) {
		return Locality{}, fmt.Errorf("locate pci device %q: expected an address like 0000:3b:00.0", address)
	}
	l, err := walk(root, filepath.Join(root, "bus", "pci", "devices", address))
	if err != nil {
		return Locality{}, fmt.Errorf("locate pci device %s: %w", address, err)
	}
	return l, nil
}

// walk resolves link and walks up from the device it points to, staying
// within root.
func walk(root, link string) (Locality, error) {
	dir, err := filepath.EvalSymlinks(link)
	if errors.Is(err, fs.ErrNotExist) {
		return Locality{}, fmt.Errorf("%w: no %s", ErrNotFound, link)
	}
	if err != nil {
		return Locality{}, fmt.Errorf("resolve %s: %w", link, err)
	}
	top, err := filepath.EvalSymlinks(root)
	if err != nil {
		return Locality{}, fmt.Errorf("resolve sysfs root: %w", err)
	}
	if !within(top, dir) {
		return Locality{}, fmt.Errorf("%s resolves to %s, outside the sysfs root", link, dir)
	}
	var nearestCPUs cpuset.CPUSet
	haveCPUs := false
	for ; within(top, dir); dir = filepath.Dir(dir) {
		cpus, found, err := readCPUs(filepath.Join(dir, "local_cpulist"))
		if err != nil {
			return Locality{}, err
		}
		if found && !haveCPUs {
			nearestCPUs, haveCPUs = cpus, true
		}
		node, err := readNode(filepath.Join(dir, "numa_node"))
		if err != nil {
			return Locality{}, err
		}
		if node != UnknownNode {
			if found { // the level that knows the node knows its CPUs best
				return Locality{NUMANode: node, CPUs: cpus}, nil
			}
			return Locality{NUMANode: node, CPUs: nearestCPUs}, nil
		}
	}
	return Locality{NUMANode: UnknownNode, CPUs: nearestCPUs}, nil
}

// within reports whether dir is below top (top itself excluded: the sysfs
// root never describes a device).
func within(top, dir string) bool {
	rel, err := filepath.Rel(top, dir)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// readNode reads a numa_node file; an absent one means unknown.
func readNode(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return UnknownNode, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read numa node: %w", err)
	}
	content := strings.TrimSpace(string(data))
	node, err := strconv.Atoi(content)
	if err != nil || node < UnknownNode {
		return 0, fmt.Errorf("parse %s: got %q, expected a NUMA node id or -1", path, content)
	}
	return node, nil
}

// readCPUs reads a local_cpulist file; found is false when it is absent.
func readCPUs(path string) (cpus cpuset.CPUSet, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cpuset.CPUSet{}, false, nil
	}
	if err != nil {
		return cpuset.CPUSet{}, false, fmt.Errorf("read local cpus: %w", err)
	}
	if cpus, err = cpuset.Parse(string(data)); err != nil {
		return cpuset.CPUSet{}, false, fmt.Errorf("parse %s: expected a cpu list: %w", path, err)
	}
	return cpus, true, nil
}
