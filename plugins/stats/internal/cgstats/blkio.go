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

	v2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
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
		maj, min, ok := strings.Cut(fields[0], ":")
		major, err1 := strconv.ParseUint(maj, 10, 64)
		minor, err2 := strconv.ParseUint(min, 10, 64)
		value, err3 := strconv.ParseUint(fields[2], 10, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
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

// v2BlkIO turns io.stat's entries into cAdvisor's v1 terms, as runc's
// fs2 does: rbytes and wbytes are the Read and Write bytes, rios and wios
// the operations.
func v2BlkIO(entries []*v2stats.IOEntry) []DeviceIO {
	if len(entries) == 0 {
		return nil
	}
	devs := make([]DeviceIO, 0, len(entries))
	for _, e := range entries {
		devs = append(devs, DeviceIO{
			Major: e.Major, Minor: e.Minor,
			Bytes: []OpCount{{"Read", e.Rbytes}, {"Write", e.Wbytes}},
			IOs:   []OpCount{{"Read", e.Rios}, {"Write", e.Wios}},
		})
	}
	return devs
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
		maj, min, _ := strings.Cut(dev, ":")
		major, err1 := strconv.ParseUint(maj, 10, 64)
		minor, err2 := strconv.ParseUint(min, 10, 64)
		if err1 == nil && err2 == nil {
			n.names[[2]uint64{major, minor}] = "/dev/" + name
		}
	}
}
