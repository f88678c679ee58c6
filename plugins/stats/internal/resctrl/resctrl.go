// Package resctrl reads the cache occupancy and memory bandwidth of
// containers from the resctrl filesystem's monitoring groups (Intel RDT CMT
// and MBM, AMD's QoS monitoring), where the node has them: runc makes a
// container its own group, mon_groups/<container id> in its class's
// control group, when its spec asks for monitoring (topology-aware does for
// a container in an RDT class).
//
// goresctrl reads these counters only of the groups it manages itself
// (pkg/monitor makes and removes them); the stats plugin only observes, so
// it reads the kernel's files directly, as it reads the cgroups.
package resctrl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DefaultRoot is where the kernel's resctrl filesystem is mounted.
const DefaultRoot = "/sys/fs/resctrl"

// Domain is what one monitoring domain (an L3 cache, mon_data/mon_L3_<id>)
// counts of a group. Has* say whether the counter was there and readable.
type Domain struct {
	// ID is the cache id, cAdvisor's node_id label.
	ID int
	// LLCOccupancy is the bytes of the last-level cache the group holds.
	LLCOccupancy    uint64
	HasLLCOccupancy bool
	// MemoryBandwidth is the total bytes the group moved to and from
	// memory since the group was made (mbm_total_bytes).
	MemoryBandwidth    uint64
	HasMemoryBandwidth bool
}

// Reader reads the monitoring groups under one resctrl mount.
type Reader struct {
	root string
}

// NewReader returns a reader of the resctrl filesystem at root, or nil when
// root has no monitoring (no resctrl mounted, or no L3 monitoring): there
// is then nothing to read.
func NewReader(root string) *Reader {
	if _, err := os.Stat(filepath.Join(root, "info", "L3_MON")); err != nil {
		return nil
	}
	return &Reader{root: root}
}

// Groups returns the monitoring groups by name (a container's is its id),
// in the root group and in every control group.
func (r *Reader) Groups() (map[string]string, error) {
	dirs, err := filepath.Glob(filepath.Join(r.root, "mon_groups", "*"))
	if err != nil {
		return nil, err
	}
	inClasses, err := filepath.Glob(filepath.Join(r.root, "*", "mon_groups", "*"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(dirs)+len(inClasses))
	for _, dir := range append(dirs, inClasses...) {
		out[filepath.Base(dir)] = dir
	}
	return out, nil
}

// Read returns the counters of the monitoring group in dir, one entry per
// domain, by cache id. A domain whose counters are unreadable ("Unavailable",
// as the kernel says for an RMID in limbo) is returned without them; an
// error says what could not be read.
func (r *Reader) Read(dir string) ([]Domain, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "mon_data"))
	if err != nil {
		return nil, fmt.Errorf("reading monitoring group %s: %w", dir, err)
	}
	var out []Domain
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "mon_L3_")
		if !ok || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		d := Domain{ID: n}
		domainDir := filepath.Join(dir, "mon_data", e.Name())
		d.LLCOccupancy, d.HasLLCOccupancy, err = readCounter(domainDir, "llc_occupancy")
		errs = append(errs, err)
		d.MemoryBandwidth, d.HasMemoryBandwidth, err = readCounter(domainDir, "mbm_total_bytes")
		errs = append(errs, err)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}

// readCounter reads one counter file. A file that is absent (a counter the
// CPU does not have) and one the kernel says is "Unavailable" (a group
// whose hardware counter is not assigned yet) are no error.
func readCounter(dir, name string) (uint64, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	text := strings.TrimSpace(string(data))
	if text == "Unavailable" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s/%s: %q: expected a count of bytes", dir, name, text)
	}
	return v, true, nil
}
