package cgstats

import (
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// createdControllers are the v1 controllers whose directories cAdvisor's
// raw handler dates a cgroup by: those it supports, but perf_event,
// which the kubelet does not enable.
var createdControllers = []string{"blkio", "cpu", "cpuacct", "cpuset", "devices", "hugetlb", "memory", "pids"}

// Created is when the cgroup name was created, as cAdvisor dates a raw
// cgroup (the kubelet's root and pod cgroups): the oldest modification
// time of its directories and of their cgroup.clone_children (v1) or
// cgroup.events (v2), which change less often than a directory (where
// every child created changes it), not before the boot (to the minute,
// as cAdvisor). Zero when none of them exists. The root's pids directory
// is left out, as cAdvisor leaves it out.
func (r *Reader) Created(name string) time.Time {
	var dirs []string
	file := "cgroup.events"
	if r.layout.Mode == ModeV2 {
		dirs = []string{filepath.Join(r.layout.Unified, name)}
	} else {
		file = "cgroup.clone_children"
		for _, c := range createdControllers {
			if c != "pids" || name != "/" {
				dirs = append(dirs, filepath.Join(r.layout.Root, c, name))
			}
		}
	}
	var oldest time.Time
	for _, dir := range dirs {
		for _, path := range []string{dir, filepath.Join(dir, file)} {
			if fi, err := os.Stat(path); err == nil && (oldest.IsZero() || fi.ModTime().Before(oldest)) {
				oldest = fi.ModTime()
			}
		}
	}
	if !oldest.IsZero() && oldest.Before(r.boot) {
		return r.boot
	}
	return oldest
}

// bootTime is when the host booted, to the minute, as cAdvisor computes
// it; the zero time if the kernel does not say.
func bootTime(now time.Time) time.Time {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return time.Time{}
	}
	return now.Add(-time.Duration(info.Uptime) * time.Second).Truncate(time.Minute)
}
