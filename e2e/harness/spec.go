package harness

import (
	"strings"
	"testing"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

// Spec is a snapshot of a container's OCI spec with accessors for what NRI
// plugins change. Accessors return zero values for absent parts, so tests
// can compare directly.
type Spec struct {
	*rspec.Spec
}

// Env returns the value of the environment variable key and whether it is set.
func (s Spec) Env(key string) (string, bool) {
	if s.Process == nil {
		return "", false
	}
	for _, kv := range s.Process.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Args are the process arguments.
func (s Spec) Args() []string {
	if s.Process == nil {
		return nil
	}
	return s.Process.Args
}

// Annotation returns the annotation key and whether it is set.
func (s Spec) Annotation(key string) (string, bool) {
	v, ok := s.Annotations[key]
	return v, ok
}

// Mount returns the mount at destination, or nil.
func (s Spec) Mount(destination string) *rspec.Mount {
	for i := range s.Mounts {
		if s.Mounts[i].Destination == destination {
			return &s.Mounts[i]
		}
	}
	return nil
}

// Device returns the Linux device node at path, or nil.
func (s Spec) Device(path string) *rspec.LinuxDevice {
	if s.Linux == nil {
		return nil
	}
	for i := range s.Linux.Devices {
		if s.Linux.Devices[i].Path == path {
			return &s.Linux.Devices[i]
		}
	}
	return nil
}

func (s Spec) cpu() *rspec.LinuxCPU {
	if s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.CPU == nil {
		return &rspec.LinuxCPU{}
	}
	return s.Linux.Resources.CPU
}

func (s Spec) memory() *rspec.LinuxMemory {
	if s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.Memory == nil {
		return &rspec.LinuxMemory{}
	}
	return s.Linux.Resources.Memory
}

// CPUs is cpuset.cpus ("" when unset).
func (s Spec) CPUs() string { return s.cpu().Cpus }

// Mems is cpuset.mems ("" when unset).
func (s Spec) Mems() string { return s.cpu().Mems }

// CPUShares is the CPU weight in shares (0 when unset).
func (s Spec) CPUShares() uint64 { return deref(s.cpu().Shares) }

// CPUQuota is the CFS quota in microseconds (0 when unset).
func (s Spec) CPUQuota() int64 { return deref(s.cpu().Quota) }

// CPUPeriod is the CFS period in microseconds (0 when unset).
func (s Spec) CPUPeriod() uint64 { return deref(s.cpu().Period) }

// MemoryLimit is the memory limit in bytes (0 when unset).
func (s Spec) MemoryLimit() int64 { return deref(s.memory().Limit) }

// HugepageLimit is the limit for a page size such as "2MB" and whether one is set.
func (s Spec) HugepageLimit(pageSize string) (uint64, bool) {
	if s.Linux == nil || s.Linux.Resources == nil {
		return 0, false
	}
	for _, l := range s.Linux.Resources.HugepageLimits {
		if l.Pagesize == pageSize {
			return l.Limit, true
		}
	}
	return 0, false
}

// OOMScoreAdj is the process's OOM score adjustment and whether it is set.
func (s Spec) OOMScoreAdj() (int, bool) {
	if s.Process == nil || s.Process.OOMScoreAdj == nil {
		return 0, false
	}
	return *s.Process.OOMScoreAdj, true
}

// CgroupsPath is the container's cgroups path.
func (s Spec) CgroupsPath() string {
	if s.Linux == nil {
		return ""
	}
	return s.Linux.CgroupsPath
}

// Seccomp is the seccomp policy, or nil.
func (s Spec) Seccomp() *rspec.LinuxSeccomp {
	if s.Linux == nil {
		return nil
	}
	return s.Linux.Seccomp
}

// Hooks are the OCI hooks, never nil.
func (s Spec) Hooks() *rspec.Hooks {
	if s.Spec.Hooks == nil {
		return &rspec.Hooks{}
	}
	return s.Spec.Hooks
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// RequireEnv fails the test unless the container's spec sets key to value.
func (c *Container) RequireEnv(t testing.TB, key, value string) {
	t.Helper()
	got, ok := c.Spec().Env(key)
	if !ok {
		t.Fatalf("container %s: env %s is not set, expected %q", c.Name(), key, value)
	}
	if got != value {
		t.Fatalf("container %s: env %s=%q, expected %q", c.Name(), key, got, value)
	}
}

// RequireNoEnv fails the test if the container's spec sets key.
func (c *Container) RequireNoEnv(t testing.TB, key string) {
	t.Helper()
	if got, ok := c.Spec().Env(key); ok {
		t.Fatalf("container %s: env %s=%q is set, expected it unset", c.Name(), key, got)
	}
}

// RequireCPUs fails the test unless the container's cpuset.cpus is cpus.
func (c *Container) RequireCPUs(t testing.TB, cpus string) {
	t.Helper()
	if got := c.Spec().CPUs(); got != cpus {
		t.Fatalf("container %s: cpuset.cpus %q, expected %q", c.Name(), got, cpus)
	}
}

// RequireDevice fails the test unless the container has a device node at
// path, and returns it.
func (c *Container) RequireDevice(t testing.TB, path string) *rspec.LinuxDevice {
	t.Helper()
	d := c.Spec().Device(path)
	if d == nil {
		t.Fatalf("container %s: no device node at %s", c.Name(), path)
	}
	return d
}
