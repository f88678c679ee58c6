// Package privileged tells a privileged container from its NRI view. NRI
// does not pass the CRI's privileged flag nor a container's capabilities, so
// the package looks for what containerd and CRI-O do only to a privileged
// container, and what an unprivileged pod cannot ask for:
//
//   - a device-cgroup rule that allows every device (type "a" or none, any
//     major and minor, rwm): both runtimes replace their default deny-all
//     rule with it. A pod spec cannot add device-cgroup rules; device
//     requests and device plugins add rules for single devices.
//   - /sys mounted as sysfs read-write: both runtimes mount it read-only
//     otherwise. A pod can bind the host's /sys (a hostPath volume), but
//     that is a bind mount, not a sysfs one.
//
// Both must hold. Measured on containerd v2.4.2 and CRI-O v1.34.0 (see the
// security plugin's README). Another NRI plugin of lower index could add
// both to an unprivileged container; the security plugin's validator, which
// sees the container as the runtime made it, catches that.
package privileged

import (
	"slices"

	"github.com/containerd/nri/pkg/api"
)

// Signs says which of the two signs a container shows.
type Signs struct {
	AllDevicesAllowed bool
	SysfsWritable     bool
}

// Privileged reports whether both signs are there.
func (s Signs) Privileged() bool { return s.AllDevicesAllowed && s.SysfsWritable }

// Of reads the signs of ctr.
func Of(ctr *api.Container) Signs {
	return Signs{AllDevicesAllowed: allDevicesAllowed(ctr), SysfsWritable: sysfsWritable(ctr)}
}

func allDevicesAllowed(ctr *api.Container) bool {
	for _, r := range ctr.GetLinux().GetResources().GetDevices() {
		if r.GetAllow() && (r.GetType() == "" || r.GetType() == "a") && r.GetMajor() == nil && r.GetMinor() == nil &&
			hasAll(r.GetAccess(), "rwm") {
			return true
		}
	}
	return false
}

func hasAll(access, want string) bool {
	for _, c := range want {
		if !slices.Contains([]rune(access), c) {
			return false
		}
	}
	return true
}

func sysfsWritable(ctr *api.Container) bool {
	for _, m := range ctr.GetMounts() {
		if m.GetDestination() == "/sys" && m.GetType() == "sysfs" {
			return !slices.Contains(m.GetOptions(), "ro")
		}
	}
	return false
}
