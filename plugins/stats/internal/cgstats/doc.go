// Package cgstats reads a container's resource usage from its cgroup with
// github.com/containerd/cgroups/v3, on cgroup v1, hybrid (v1 controllers
// plus the v2 hierarchy at <root>/unified, where the kernel keeps PSI) and
// v2 hosts, and turns it into one neutral Sample whatever the version.
//
// Everything is read under a root directory (normally /sys/fs/cgroup), so the
// same code reads the host and fixture trees in tests. Library parsers are
// used for every file they cover; this package parses only what the library
// has no entry point for: the spec files (cpu.shares, cpu.cfs_quota_us,
// cpu.max, cpu.weight), cpusets, the pressure files on hybrid hosts, and
// /proc/meminfo for the memory usage of a v2 host's root cgroup; and
// cgroup.procs, whose library reader walks the whole cgroup directory.
package cgstats
