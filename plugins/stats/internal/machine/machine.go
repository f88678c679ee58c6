// Package machine reads what cAdvisor's machine and version info hold of
// the node for the kubelet's machine_* and cadvisor_version_info families:
// the CPU topology, the memory and swap installed, the DIMMs, the machine,
// boot and system ids, the kernel and the OS. The kubelet reads them once, at its
// start, and so does the plugin: none of them changes while the node runs
// but with a CPU or memory hot-plug or a swapon, which the kubelet does not
// see either.
package machine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// Paths are where the host's files are read.
type Paths struct {
	// Sys is the host's sysfs (DefaultSys): the CPU topology, the DIMMs
	// (devices/system/edac) and the system UUID (class/dmi).
	Sys string
	// Proc is the host's /proc (DefaultProc): meminfo, the boot id and, on
	// machines without DMI, the device tree's system id.
	Proc string
	// Etc holds the host's machine-id and os-release (DefaultEtc; a
	// DaemonSet mounts the host's files elsewhere: the container's own are
	// its image's).
	Etc string
}

// Defaults of Paths: the plugin's own view, the host's when it runs there.
const (
	DefaultSys  = sysfs.DefaultRoot
	DefaultProc = "/proc"
	DefaultEtc  = "/etc"
)

// DIMMs are the memory modules of one type (DDR4, ...).
type DIMMs struct {
	Count         int
	CapacityBytes uint64
}

// Info is the node as cAdvisor's machine info describes it.
type Info struct {
	// Cores are the online logical CPUs.
	Cores int
	// PhysicalCores and Sockets count the distinct core ids and package ids
	// of the online CPUs, as cAdvisor counts /proc/cpuinfo's "core id" and
	// "physical id": core ids repeat in every socket, so a machine of two
	// 8-core sockets has 8 "physical cores" for cAdvisor, and for the kubelet.
	PhysicalCores, Sockets int
	// MemoryBytes and SwapBytes are meminfo's MemTotal and SwapTotal.
	MemoryBytes, SwapBytes uint64
	// DIMMs by memory type, from the EDAC memory controllers; empty
	// where the kernel has none.
	DIMMs map[string]DIMMs
	// MachineID, SystemUUID and BootID label every machine_* series; empty
	// where the host has no such file.
	MachineID, SystemUUID, BootID string
}

// Version is what cadvisor_version_info says of the node.
type Version struct {
	// Kernel is the kernel's release; OS os-release's PRETTY_NAME ("Linux"
	// without one, "Unknown" without the file), as cAdvisor's.
	Kernel, OS string
}

// ReadVersion reads the kernel's release and the OS' name from
// <etc>/os-release.
func ReadVersion(etc string) Version {
	v := Version{Kernel: "Unknown", OS: "Unknown"}
	var uname unix.Utsname
	if unix.Uname(&uname) == nil {
		v.Kernel = unix.ByteSliceToString(uname.Release[:])
	}
	if data, err := os.ReadFile(filepath.Join(etc, "os-release")); err == nil {
		v.OS = PrettyName(data)
	}
	return v
}

// Read reads the machine's info. The topology, meminfo and the DIMMs must
// be readable (cAdvisor's machine info fails without them); a missing id
// leaves its label empty, as in cAdvisor.
func Read(p Paths) (*Info, error) {
	t, err := sysfs.Discover(p.Sys)
	if err != nil {
		return nil, fmt.Errorf("machine info: %w", err)
	}
	cores, sockets := map[int]bool{}, map[int]bool{}
	for _, c := range t.CPUList() {
		cores[c.Core], sockets[c.Socket] = true, true
	}
	info := &Info{Cores: t.CPUs().Size(), PhysicalCores: len(cores), Sockets: len(sockets)}
	meminfo := filepath.Join(p.Proc, "meminfo")
	data, err := os.ReadFile(meminfo)
	if err != nil {
		return nil, fmt.Errorf("machine info: %w", err)
	}
	m, err := cgstats.ParseMeminfo(data)
	if err != nil {
		return nil, fmt.Errorf("machine info from %s: %w", meminfo, err)
	}
	info.MemoryBytes, info.SwapBytes = m.MemTotal, m.SwapTotal
	if info.DIMMs, err = readDIMMs(filepath.Join(p.Sys, "devices/system/edac/mc")); err != nil {
		return nil, fmt.Errorf("machine info: %w", err)
	}
	machineID := filepath.Join(p.Etc, "machine-id")
	info.MachineID = firstID(machineID)
	info.BootID = firstID(filepath.Join(p.Proc, "sys/kernel/random/boot_id"))
	// cAdvisor's order, the machine-id last (its s390x source, tried on
	// every architecture).
	info.SystemUUID = firstID(filepath.Join(p.Sys, "class/dmi/id/product_uuid"), filepath.Join(p.Proc, "device-tree/system-id"),
		filepath.Join(p.Proc, "device-tree/vm,uuid"), machineID)
	return info, nil
}

// firstID is the content of the first of files that can be read, without
// surrounding space and a device tree's NUL; "" if none can.
func firstID(files ...string) string {
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			return strings.ToValidUTF8(strings.TrimSpace(strings.TrimRight(string(data), "\x00")), "\uFFFD")
		}
	}
	return ""
}

// PrettyName is os-release's PRETTY_NAME without its quotes, "Linux" when
// it has none, as cAdvisor's ContainerOsVersion; valid UTF-8 (a label value).
func PrettyName(osRelease []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(osRelease))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.ToValidUTF8(strings.Trim(v, `"`), "\uFFFD")
		}
	}
	return "Linux"
}

var (
	memoryController = regexp.MustCompile(`^mc[0-9]+$`)
	dimm             = regexp.MustCompile(`^dimm[0-9]+$`)
)

// readDIMMs counts the DIMMs under the EDAC memory controllers (dir,
// devices/system/edac/mc), and adds their sizes (MiB) by memory type, as
// cAdvisor's GetMachineMemoryByType. No such directory: none.
func readDIMMs(dir string) (map[string]DIMMs, error) {
	controllers, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]DIMMs{}
	for _, c := range controllers {
		if !memoryController.MatchString(c.Name()) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(dir, c.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !dimm.MatchString(e.Name()) {
				continue
			}
			base := filepath.Join(dir, c.Name(), e.Name())
			memType, err := os.ReadFile(filepath.Join(base, "dimm_mem_type"))
			if err != nil {
				return nil, err
			}
			sizeFile := filepath.Join(base, "size")
			size, err := os.ReadFile(sizeFile)
			if err != nil {
				return nil, err
			}
			mib, err := strconv.ParseUint(strings.TrimSpace(string(size)), 10, 44)
			if err != nil {
				return nil, fmt.Errorf("parse %s: %q, expected a size in MiB", sizeFile, strings.TrimSpace(string(size)))
			}
			// A label value: valid UTF-8.
			kind := strings.ToValidUTF8(strings.TrimSpace(string(memType)), "\uFFFD")
			d := out[kind]
			d.Count++
			d.CapacityBytes += mib << 20
			out[kind] = d
		}
	}
	return out, nil
}
