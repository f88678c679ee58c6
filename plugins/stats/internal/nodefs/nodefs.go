// Package nodefs reads the node's filesystems as the kubelet's cAdvisor
// reports them for the root cgroup (id "/"): the capacity, usage and inodes
// of each (statfs) and the I/O counters of its disk (/proc/diskstats).
package nodefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// Partition is one of the node's filesystems.
type Partition struct {
	// Device is its device label, as cAdvisor names it: the mount's source
	// (/dev/vda1), a tmpfs's mount point, an overlay's source_major-minor.
	Device     string
	Mountpoint string
	FSType     string
	// Major and Minor are the filesystem's device number (st_dev), which
	// /proc/diskstats lists for a disk.
	Major, Minor uint32
}

// Filesystem is a partition at one reading.
type Filesystem struct {
	Partition
	// Usage is nil where the filesystem could not be asked (no host root).
	Usage *Usage
	// Disk are its disk's counters since boot; zero for a filesystem
	// without a disk (tmpfs), as cAdvisor reports it.
	Disk blockdevice.IOStats
}

// Usage is what statfs says of a filesystem, in bytes and inodes.
type Usage struct {
	Capacity, Free, Inodes, InodesFree uint64
}

// Used is the capacity less the free blocks (reserved ones included), as
// cAdvisor's container_fs_usage_bytes.
func (u *Usage) Used() uint64 { return u.Capacity - min(u.Free, u.Capacity) }

// excludedPrefixes are mount points that belong to a pod or a container,
// not to the node: their volumes and root filesystems come and go with
// them. cAdvisor lists the mounts once, when the kubelet starts, before
// any pod; the plugin may start after pods, and leaves theirs out.
var excludedPrefixes = []string{
	"/var/lib/kubelet/pods/", "/var/lib/containerd/", "/run/containerd/",
	"/var/lib/containers/", "/run/containers/", "/var/lib/docker/",
}

// Partitions picks the node's filesystems from a mountinfo as cAdvisor's
// fs.NewFsInfo does: ext*, nfs*, btrfs, overlay, tmpfs, xfs and zfs mounts,
// a device's first mount only (later ones are bind mounts), but every
// tmpfs (named by its mount point, the last mount of a point winning),
// and the root filesystem whatever its type. Sorted by device.
func Partitions(r io.Reader) ([]Partition, error) {
	mounts, err := mountinfo.GetMountsFromReader(r, nil)
	if err != nil {
		return nil, err
	}
	byDevice := map[string]Partition{}
	for _, m := range mounts {
		if m.Mountpoint == "/" {
			byDevice[m.Source] = partitionOf(m, m.Source)
			continue
		}
		if !supported(m.FSType) || excluded(m.Mountpoint) {
			continue
		}
		if _, seen := byDevice[m.Source]; seen && m.FSType != "tmpfs" {
			continue
		}
		device := m.Source
		switch m.FSType {
		case "tmpfs":
			device = m.Mountpoint
		case "overlay":
			// Every overlay's source is "overlay": its device number tells them apart.
			device = fmt.Sprintf("%s_%d-%d", m.Source, m.Major, m.Minor)
		}
		byDevice[device] = partitionOf(m, device)
	}
	out := make([]Partition, 0, len(byDevice))
	for _, p := range byDevice {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out, nil
}

func partitionOf(m *mountinfo.Info, device string) Partition {
	return Partition{Device: device, Mountpoint: m.Mountpoint, FSType: m.FSType, Major: uint32(m.Major), Minor: uint32(m.Minor)}
}

func supported(fsType string) bool {
	switch fsType {
	case "btrfs", "overlay", "tmpfs", "xfs", "zfs":
		return true
	}
	return strings.HasPrefix(fsType, "ext") || strings.HasPrefix(fsType, "nfs")
}

func excluded(mountpoint string) bool {
	for _, prefix := range excludedPrefixes {
		if strings.HasPrefix(mountpoint, prefix) {
			return true
		}
	}
	return false
}

// Paths are where the host's files are.
type Paths struct {
	// Proc is the host's /proc: 1/mountinfo (the host's mounts, with the
	// host's PID namespace) and diskstats.
	Proc string
	// Sys is the host's /sys (the block device library wants it).
	Sys string
	// HostRoot is where the host's root filesystem is seen, with its
	// mounts ("/" on the host); empty: no usage is read.
	HostRoot string
}

// Reader reads the node's filesystems, listed once at start.
type Reader struct {
	partitions []Partition
	hostRoot   string
	block      blockdevice.FS
}

// NewReader lists the node's filesystems from <Proc>/1/mountinfo.
func NewReader(paths Paths) (*Reader, error) {
	file := filepath.Join(paths.Proc, "1", "mountinfo")
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("listing the node's filesystems: %w", err)
	}
	defer f.Close()
	partitions, err := Partitions(f)
	if err != nil {
		return nil, fmt.Errorf("listing the node's filesystems from %s: %w", file, err)
	}
	block, err := blockdevice.NewFS(paths.Proc, paths.Sys)
	if err != nil {
		return nil, fmt.Errorf("reading the node's disks: %w", err)
	}
	return &Reader{partitions: partitions, hostRoot: paths.HostRoot, block: block}, nil
}

// Partitions are the filesystems the reader reads.
func (r *Reader) Partitions() []Partition { return r.partitions }

// Read reads every filesystem. One whose statfs fails is left out, as
// cAdvisor leaves it out: silently where its mount point is gone (a tmpfs
// unmounted since the start), else with an error in err, which also says
// why /proc/diskstats could not be read.
func (r *Reader) Read() ([]Filesystem, error) {
	var errs []error
	stats, err := r.block.ProcDiskstats()
	if err != nil {
		errs = append(errs, fmt.Errorf("reading diskstats: %w", err))
	}
	disks := make(map[[2]uint32]blockdevice.IOStats, len(stats))
	for _, d := range stats {
		disks[[2]uint32{d.MajorNumber, d.MinorNumber}] = d.IOStats
	}
	out := make([]Filesystem, 0, len(r.partitions))
	for _, p := range r.partitions {
		fs := Filesystem{Partition: p, Disk: disks[[2]uint32{p.Major, p.Minor}]}
		if r.hostRoot != "" {
			usage, err := statfs(filepath.Join(r.hostRoot, p.Mountpoint))
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("filesystem %s: %w", p.Device, err))
				}
				continue
			}
			fs.Usage = usage
		}
		out = append(out, fs)
	}
	return out, errors.Join(errs...)
}

func statfs(path string) (*Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	size := uint64(st.Frsize)
	return &Usage{Capacity: size * st.Blocks, Free: size * st.Bfree, Inodes: st.Files, InodesFree: st.Ffree}, nil
}
