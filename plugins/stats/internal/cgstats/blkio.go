package cgstats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// v1BlkIOFiles are the pairs of (operations, bytes) files cAdvisor's stats
// come from on v1 (runc's fs.BlkioGroup): the first pair whose operations
// file counts anything, BFQ's, CFQ's, then the throttling layer's, which
// counts every device. The library's reader differs: it reads the
// throttling layer's non-recursive files, which leave a pod cgroup's
// children out.
var v1BlkIOFiles = [][2]string{
	{"blkio.bfq.io_serviced_recursive", "blkio.bfq.io_service_bytes_recursive"},
	{"blkio.io_serviced_recursive", "blkio.io_service_bytes_recursive"},
	{"blkio.throttle.io_serviced_recursive", "blkio.throttle.io_service_bytes_recursive"},
	{"blkio.throttle.io_serviced", "blkio.throttle.io_service_bytes"},
}

// readV1BlkIO reads the block I/O of the v1 blkio cgroup dir; a cgroup
// without the files has none.
func readV1BlkIO(dir string) ([]DeviceIO, error) {
	for _, pair := range v1BlkIOFiles {
		var devs []DeviceIO
		counted, err := readBlkioFile(filepath.Join(dir, pair[0]), &devs, false)
		if err == nil && !counted && pair[0] == "blkio.throttle.io_serviced_recursive" {
			// runc goes on to the non-recursive files, which count a subset
			// of these: nothing either. One read less per idle cgroup.
			return nil, nil
		}
		if notExist(err) || err == nil && !counted {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := readBlkioFile(filepath.Join(dir, pair[1]), &devs, true); err != nil {
			return nil, err
		}
		return devs, nil
	}
	return nil, nil
}

// readBlkioFile adds the lines of a v1 blkio statistics file ("8:0 Read
// 4096", a last "Total 4096") to devs, as bytes or as operations; counted
// says whether the file had a device line.
func readBlkioFile(path string, devs *[]DeviceIO, isBytes bool) (counted bool, err error) {
	data, err := readFile(path)
	if err != nil {
		return false, err
	}
	for line := range bytes.Lines(data) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 || len(fields) == 2 && fields[0] == "Total" {
			continue
		}
		if len(fields) != 3 {
			return false, fmt.Errorf("reading %s: line %q, expected \"<major>:<minor> <operation> <value>\"", path, line)
		}
		major, minor, ok := parseDeviceNumber(fields[0])
		value, err := strconv.ParseUint(fields[2], 10, 64)
		if !ok || err != nil {
			return false, fmt.Errorf("reading %s: line %q, expected \"<major>:<minor> <operation> <value>\"", path, line)
		}
		d := device(devs, major, minor)
		if isBytes {
			d.Bytes = append(d.Bytes, OpCount{fields[1], value})
		} else {
			d.IOs = append(d.IOs, OpCount{fields[1], value})
		}
		counted = true
	}
	return counted, nil
}

// parseDeviceNumber parses a block device's "<major>:<minor>", as the
// blkio files, io.stat and /sys/block/<name>/dev write it.
func parseDeviceNumber(s string) (major, minor uint64, ok bool) {
	maj, min, found := strings.Cut(s, ":")
	major, err1 := strconv.ParseUint(maj, 10, 64)
	minor, err2 := strconv.ParseUint(min, 10, 64)
	return major, minor, found && err1 == nil && err2 == nil
}

// device returns the entry of major:minor in devs, added if new.
func device(devs *[]DeviceIO, major, minor uint64) *DeviceIO {
	for i := range *devs {
		if d := &(*devs)[i]; d.Major == major && d.Minor == minor {
			return d
		}
	}
	*devs = append(*devs, DeviceIO{Major: major, Minor: minor})
	return &(*devs)[len(*devs)-1]
}

// ParseIOStat reads a v2 io.stat ("8:0 rbytes=4096 wbytes=0 rios=1
// wios=0 dbytes=0 dios=0 cost.usage=…", a line per device) in cAdvisor's
// v1 terms, as runc's fs2 does: rbytes and wbytes are the Read and Write
// bytes, rios and wios the operations; and blk-iocost's cost.usage,
// cost.wait, cost.indebt and cost.indelay where the kernel has them.
// The containerd cgroups library's reader drops the cost keys. Other keys
// (dbytes, cost.vrate) are skipped, whatever their values.
func ParseIOStat(data []byte) ([]DeviceIO, error) {
	var devs []DeviceIO
	for line := range bytes.Lines(data) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			continue
		}
		major, minor, ok := parseDeviceNumber(fields[0])
		if !ok {
			return nil, fmt.Errorf("line %q: %q, expected <major>:<minor>", line, fields[0])
		}
		d := DeviceIO{Major: major, Minor: minor}
		var bytes, ios [2]uint64 // Read, Write
		var cost IOCost
		for _, kv := range fields[1:] {
			key, value, _ := strings.Cut(kv, "=")
			var dst *uint64
			switch key {
			case "rbytes":
				dst = &bytes[0]
			case "wbytes":
				dst = &bytes[1]
			case "rios":
				dst = &ios[0]
			case "wios":
				dst = &ios[1]
			case "cost.usage":
				dst, d.Cost = &cost.UsageUsec, &cost
			case "cost.wait":
				dst, d.Cost = &cost.WaitUsec, &cost
			case "cost.indebt":
				dst, d.Cost = &cost.IndebtUsec, &cost
			case "cost.indelay":
				dst, d.Cost = &cost.IndelayUsec, &cost
			default:
				continue
			}
			v, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %q: %s=%q, expected a count", line, key, value)
			}
			*dst = v
		}
		d.Bytes = []OpCount{{"Read", bytes[0]}, {"Write", bytes[1]}}
		d.IOs = []OpCount{{"Read", ios[0]}, {"Write", ios[1]}}
		devs = append(devs, d)
	}
	return devs, nil
}

// readV2IOStat reads the io.stat of a v2 cgroup dir.
func readV2IOStat(dir string) ([]DeviceIO, error) {
	path := filepath.Join(dir, "io.stat")
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	devs, err := ParseIOStat(data)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return devs, nil
}

// DefaultSysBlock is where the kernel lists the node's block devices.
const DefaultSysBlock = "/sys/block"

// deviceNames names block devices as cAdvisor's containerd handler does
// (its machine info's disk map): /dev/<name> for the entries of
// /sys/block, except loop, ram and sr devices and hidden ones (NVMe
// multipath paths); any other device is "". The list is read again when a
// device it lacks shows up, at most once per maxAge.
type deviceNames struct {
	sysBlock string
	maxAge   time.Duration
	now      func() time.Time

	mu      sync.Mutex
	names   map[[2]uint64]string
	scanned time.Time
}

func (n *deviceNames) assign(devs []DeviceIO) {
	if len(devs) == 0 || n.sysBlock == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range devs {
		d := &devs[i]
		name, ok := n.names[[2]uint64{d.Major, d.Minor}]
		if !ok && n.now().Sub(n.scanned) >= n.maxAge {
			n.scan()
			name = n.names[[2]uint64{d.Major, d.Minor}]
		}
		d.Device = name
	}
}

// scan lists the disks; one that cannot be read is left out.
func (n *deviceNames) scan() {
	n.names, n.scanned = map[[2]uint64]string{}, n.now()
	entries, err := os.ReadDir(n.sysBlock)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "sr") {
			continue
		}
		if hidden, err := readTrimmed(filepath.Join(n.sysBlock, name, "hidden")); err == nil && hidden == "1" {
			continue
		}
		dev, err := readTrimmed(filepath.Join(n.sysBlock, name, "dev"))
		if err != nil {
			continue
		}
		if major, minor, ok := parseDeviceNumber(dev); ok {
			n.names[[2]uint64{major, minor}] = "/dev/" + name
		}
	}
}
