// Package resolve turns CDI device names into what they do to a container,
// with the CDI library's own cache (tags.cncf.io/container-device-interface):
// spec directories scanned in order (later ones win), refreshed when they
// change. Each device is injected alone into a scratch OCI spec by the
// library, so that its edits (device nodes, mounts, env, hooks) are known
// per device: the caller checks them against each other and the container,
// applies them as plain NRI adjustments (plugin mode), or only locates their
// device nodes (runtime mode).
package resolve

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// ErrUnresolvable is wrapped by the error for a name the cache does not
// resolve.
var ErrUnresolvable = errors.New("unresolvable CDI device")

// Resolver resolves CDI names from a set of spec directories. It is safe for
// concurrent use.
type Resolver struct {
	cache *cdi.Cache
}

// New watches and reads the spec directories, lowest priority first.
func New(dirs []string) (*Resolver, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(true))
	if err != nil {
		return nil, fmt.Errorf("create CDI cache on %s: %w", strings.Join(dirs, ", "), err)
	}
	return &Resolver{cache: cache}, nil
}

// SetSpecDirs switches to other spec directories and rescans them.
func (r *Resolver) SetSpecDirs(dirs []string) error {
	if err := r.cache.Configure(cdi.WithSpecDirs(dirs...)); err != nil {
		return fmt.Errorf("reconfigure CDI cache on %s: %w", strings.Join(dirs, ", "), err)
	}
	return nil
}

// Close stops watching the spec directories.
func (r *Resolver) Close() {
	// Turning auto-refresh off is the cache's only way to stop its watcher.
	_ = r.cache.Configure(cdi.WithAutoRefresh(false))
}

// Hook is an OCI hook and the stage it runs at, in CDI's names
// (prestart, createRuntime, createContainer, startContainer, poststart,
// poststop).
type Hook struct {
	Stage string
	rspec.Hook
}

// Device is what one CDI device does to a container: its own edits and
// those of its spec file.
type Device struct {
	Name   string
	Nodes  []rspec.LinuxDevice
	Mounts []rspec.Mount
	Env    []string
	Hooks  []Hook
	// Unsupported names the edits NRI cannot apply as plain adjustments
	// (additional GIDs, Intel RDT, network devices): a runtime must apply
	// this device.
	Unsupported []string
}

// Owner is the container's user: device nodes without an owner of their
// own get it, as when a runtime injects CDI devices.
type Owner struct {
	UID, GID uint32
}

// Resolve resolves each name (fully qualified, without duplicates) into its
// edits. A name the cache does not resolve fails with ErrUnresolvable and
// every error the cache reports for the specs that could have defined it
// (its vendor's, and those that did not load), and the spec directories
// that cannot be read.
func (r *Resolver) Resolve(names []string, owner Owner) ([]Device, error) {
	out := make([]Device, 0, len(names))
	var errs []error
	for _, name := range names {
		d, err := r.resolve(name, owner)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Resolver) resolve(name string, owner Owner) (Device, error) {
	if r.cache.GetDevice(name) == nil {
		return Device{}, r.unresolvable(name)
	}
	scratch := &rspec.Spec{
		Process: &rspec.Process{User: rspec.User{UID: owner.UID, GID: owner.GID}},
		Linux:   &rspec.Linux{},
	}
	if _, err := r.cache.InjectDevices(scratch, name); err != nil {
		// Removed since GetDevice, or a node the host lacks.
		if r.cache.GetDevice(name) == nil {
			return Device{}, r.unresolvable(name)
		}
		return Device{}, fmt.Errorf("resolve CDI device %s: %w", name, err)
	}
	return fromSpec(name, scratch), nil
}

// fromSpec reads what InjectDevices wrote into an empty spec.
func fromSpec(name string, s *rspec.Spec) Device {
	d := Device{Name: name, Env: s.Process.Env, Mounts: s.Mounts, Nodes: s.Linux.Devices}
	if h := s.Hooks; h != nil {
		for _, stage := range []struct {
			name  string
			hooks []rspec.Hook
		}{
			//lint:ignore SA1019 CDI specs may still use the deprecated prestart stage
			{cdi.PrestartHook, h.Prestart},
			{cdi.CreateRuntimeHook, h.CreateRuntime},
			{cdi.CreateContainerHook, h.CreateContainer},
			{cdi.StartContainerHook, h.StartContainer},
			{cdi.PoststartHook, h.Poststart},
			{cdi.PoststopHook, h.Poststop},
		} {
			for _, hook := range stage.hooks {
				d.Hooks = append(d.Hooks, Hook{Stage: stage.name, Hook: hook})
			}
		}
	}
	if len(s.Process.User.AdditionalGids) > 0 {
		d.Unsupported = append(d.Unsupported, "additionalGids")
	}
	if s.Linux.IntelRdt != nil {
		d.Unsupported = append(d.Unsupported, "intelRdt")
	}
	if len(s.Linux.NetDevices) > 0 {
		d.Unsupported = append(d.Unsupported, "netDevices")
	}
	return d
}

// unresolvable explains why name does not resolve, with the cache's errors.
func (r *Resolver) unresolvable(name string) error {
	vendor, _, _, err := parser.ParseQualifiedName(name)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrUnresolvable, name, err)
	}
	// Errors of the vendor's specs (a device two of them define) and of
	// specs that did not load at all (they might have defined it).
	relevant := map[string]bool{}
	loaded := map[string]bool{}
	for _, v := range r.cache.ListVendors() {
		for _, s := range r.cache.GetVendorSpecs(v) {
			loaded[s.GetPath()] = true
			relevant[s.GetPath()] = v == vendor
		}
	}
	errs := r.cache.GetErrors()
	dirs := r.cache.GetSpecDirectories()
	var reasons []string
	for _, path := range slices.Sorted(maps.Keys(errs)) {
		if slices.Contains(dirs, path) {
			continue // watch errors: see DirProblems
		}
		if relevant[path] || !loaded[path] {
			reasons = append(reasons, fmt.Sprintf("%s: %v", path, errors.Join(errs[path]...)))
		}
	}
	reasons = append(reasons, DirProblems(dirs)...)
	msg := fmt.Sprintf("no spec in %s defines it", strings.Join(dirs, ", "))
	if len(reasons) > 0 {
		msg += "; spec errors: " + strings.Join(reasons, "; ")
	}
	return fmt.Errorf("%w %s: %s", ErrUnresolvable, name, msg)
}

// SpecErrors counts the errors the cache reports for spec files, and the
// spec directories that exist but cannot be read.
func (r *Resolver) SpecErrors() int {
	dirs := r.cache.GetSpecDirectories()
	n := len(DirProblems(dirs))
	for path, errs := range r.cache.GetErrors() {
		if !slices.Contains(dirs, path) {
			n += len(errs)
		}
	}
	return n
}

// Devices counts the devices the cache resolves.
func (r *Resolver) Devices() int { return len(r.cache.ListDevices()) }

// DirProblems describes the spec directories that exist but cannot be
// listed. The cache stops its scan at such a directory without a word, so
// that the specs of later directories are missing too; saying so is the
// only way to make that visible. A directory that does not exist is fine
// (/var/run/cdi often does not).
func DirProblems(dirs []string) []string {
	var out []string
	for _, dir := range dirs {
		if _, err := os.ReadDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, fmt.Sprintf("spec directory %s cannot be read (specs in it and in later directories are ignored): %v", dir, err))
		}
	}
	return out
}

// Node is a host device node a CDI device puts into containers. Type, Major
// and Minor are those the spec gives (empty or 0 when it leaves them to the
// host's node).
type Node struct {
	HostPath     string
	Type         string
	Major, Minor int64
}

// Defined is a CDI device the cache resolves, with the spec file that
// defines it and the host nodes of its own and its spec's edits.
type Defined struct {
	Name     string
	SpecPath string
	Nodes    []Node
}

// Inventory is the cache's current view: the devices it resolves, and the
// errors of spec files (by path) that did not load or conflict.
type Inventory struct {
	Devices    []Defined
	SpecErrors map[string]error
}

// Inventory reads the cache's devices and spec errors without rescanning
// (the watcher keeps the cache current), so it is cheap to poll.
func (r *Resolver) Inventory() Inventory {
	dirs := r.cache.GetSpecDirectories()
	inv := Inventory{SpecErrors: map[string]error{}}
	for path, errs := range r.cache.GetErrors() {
		if !slices.Contains(dirs, path) {
			inv.SpecErrors[path] = errors.Join(errs...)
		}
	}
	for _, name := range r.cache.ListDevices() {
		d := r.cache.GetDevice(name)
		if d == nil {
			continue // refreshed since ListDevices
		}
		def := Defined{Name: name, SpecPath: d.GetSpec().GetPath()}
		for _, n := range slices.Concat(d.ContainerEdits.DeviceNodes, d.GetSpec().ContainerEdits.DeviceNodes) {
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			def.Nodes = append(def.Nodes, Node{HostPath: host, Type: n.Type, Major: n.Major, Minor: n.Minor})
		}
		inv.Devices = append(inv.Devices, def)
	}
	return inv
}
