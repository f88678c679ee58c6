// Package netdev reads the interface counters of a network namespace from
// /proc/<pid>/net/dev, as cAdvisor reads those of a pod's sandbox and of
// the node (pid 1).
package netdev

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Interface is one interface's counters, the eight cAdvisor serves.
type Interface struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// ignoredPrefixes are the interfaces cAdvisor leaves out (container/libcontainer
// handler.go, ignoredDevicePrefixes), matched on the lower-cased name: loopback,
// the host ends of veth pairs, and Docker's and nerdctl's bridges.
var ignoredPrefixes = []string{"lo", "veth", "docker", "nerdctl"}

func ignored(name string) bool {
	lower := strings.ToLower(name)
	for _, p := range ignoredPrefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// Read reads <proc>/<pid>/net/dev: the interfaces of the network namespace
// process pid is in, less those cAdvisor ignores.
func Read(proc string, pid uint32) ([]Interface, error) {
	path := filepath.Join(proc, strconv.FormatUint(uint64(pid), 10), "net", "dev")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading network counters: %w", err)
	}
	ifaces, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ifaces, nil
}

// Parse parses the text of /proc/net/dev: two header lines, then one line
// per interface, "name: " and 16 counters (8 received, 8 transmitted). It
// keeps the file's order and leaves out the interfaces cAdvisor ignores. As
// cAdvisor, any malformed line fails the whole file. Not prometheus/procfs'
// NetDev: v0.22.0's parser indexes the counters unchecked and panics on a
// short line, where this one (fuzzed: FuzzParse) returns an error.
func Parse(data []byte) ([]Interface, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for range 2 {
		if !sc.Scan() {
			return nil, headerError(sc.Err())
		}
	}
	out := []Interface{}
	for n := 3; sc.Scan(); n++ {
		name, counters, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		fields := strings.Fields(counters)
		if !ok || name == "" || strings.ContainsAny(name, " \t") || len(fields) != 16 {
			return nil, fmt.Errorf("line %d: %q, expected \"<interface>: <16 counters>\"", n, sc.Text())
		}
		if ignored(name) {
			continue
		}
		iface := Interface{Name: name}
		// Received: bytes packets errs drop (fifo frame compressed multicast);
		// transmitted from field 8 on, the same four first.
		targets := []*uint64{&iface.RxBytes, &iface.RxPackets, &iface.RxErrors, &iface.RxDropped,
			&iface.TxBytes, &iface.TxPackets, &iface.TxErrors, &iface.TxDropped}
		for i, target := range targets {
			field := fields[i%4+i/4*8]
			v, err := strconv.ParseUint(field, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: interface %s: counter %q, expected an unsigned integer", n, name, field)
			}
			*target = v
		}
		out = append(out, iface)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	return out, nil
}

func headerError(err error) error {
	if err != nil {
		return fmt.Errorf("reading the header: %w", err)
	}
	return fmt.Errorf("no header, expected two header lines before the interfaces")
}
