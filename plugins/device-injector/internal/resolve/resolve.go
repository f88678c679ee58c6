// Package resolve turns CDI device names into what they do to a container,
// with the CDI library (tags.cncf.io/container-device-interface): spec
// directories scanned in order (later ones win), rescanned in the
// background when they change (scan.go, watch.go). Resolutions read the
// last scan and never wait for the next. Each device is injected alone into
// a scratch OCI spec by the library, so that its edits (device nodes,
// mounts, env, hooks) are known per device: the caller checks them against
// each other and the container, applies them as plain NRI adjustments
// (plugin mode), or only locates their device nodes (runtime mode).
package resolve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// ErrUnresolvable is wrapped by the error for a name the last scan does not
// resolve.
var ErrUnresolvable = errors.New("unresolvable CDI device")

// Resolver resolves CDI names from a set of spec directories. It is safe for
// concurrent use.
type Resolver struct {
	log     logrus.FieldLogger
	current atomic.Pointer[snapshot]
	// mu serializes scans and guards dirs.
	mu           sync.Mutex
	dirs         []string
	reconfigured chan struct{} // tells the watcher that dirs changed
	stop         context.CancelFunc
	stopped      chan struct{}
}

// New reads the spec directories, lowest priority first, and watches them.
func New(dirs []string, log logrus.FieldLogger) *Resolver {
	ctx, stop := context.WithCancel(context.Background())
	r := &Resolver{log: log, dirs: cleanDirs(dirs), reconfigured: make(chan struct{}, 1), stop: stop, stopped: make(chan struct{})}
	r.rescan()
	go func() {
		defer close(r.stopped)
		r.watch(ctx)
	}()
	return r
}

// SetSpecDirs switches to other spec directories and rescans them.
func (r *Resolver) SetSpecDirs(dirs []string) {
	r.mu.Lock()
	r.dirs = cleanDirs(dirs)
	r.mu.Unlock()
	r.rescan()
	select {
	case r.reconfigured <- struct{}{}:
	default: // the watcher has not taken the last one yet
	}
}

// Close stops watching the spec directories.
func (r *Resolver) Close() {
	r.stop()
	<-r.stopped
}

func cleanDirs(dirs []string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Clean(d)
	}
	return out
}

// specDirs are the directories as configured now.
func (r *Resolver) specDirs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs
}

// rescan replaces the snapshot with a new scan and logs the spec files whose
// errors are new: files not read, specs that do not load, conflicts.
func (r *Resolver) rescan() {
	r.mu.Lock()
	next := scan(r.dirs)
	prev := r.current.Swap(next)
	r.mu.Unlock()
	for _, path := range slices.Sorted(maps.Keys(next.errors)) {
		err := errors.Join(next.errors[path]...)
		if prev != nil && prev.errors[path] != nil && errors.Join(prev.errors[path]...).Error() == err.Error() {
			continue
		}
		r.log.WithField("spec", path).WithError(err).Warn("CDI spec error")
	}
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
// edits. A name the last scan does not resolve fails with ErrUnresolvable
// and every error of the specs that could have defined it (its vendor's,
// and those that did not load), and the spec directories that cannot be
// read.
func (r *Resolver) Resolve(names []string, owner Owner) ([]Device, error) {
	snap := r.current.Load()
	out := make([]Device, 0, len(names))
	var errs []error
	for _, name := range names {
		d, err := snap.resolve(name, owner)
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

func (s *snapshot) resolve(name string, owner Owner) (Device, error) {
	if s.devices[name] == nil {
		return Device{}, s.unresolvable(name)
	}
	scratch := &rspec.Spec{
		Process: &rspec.Process{User: rspec.User{UID: owner.UID, GID: owner.GID}},
		Linux:   &rspec.Linux{},
	}
	if err := s.inject(scratch, name); err != nil {
		// A node the host lacks.
		return Device{}, fmt.Errorf("resolve CDI device %s: %w", name, err)
	}
	return fromSpec(name, scratch), nil
}

// fromSpec reads what inject wrote into an empty spec.
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

// unresolvable explains why name does not resolve, with the scan's errors.
func (s *snapshot) unresolvable(name string) error {
	vendor, _, _, err := parser.ParseQualifiedName(name)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrUnresolvable, name, err)
	}
	// Errors of the vendor's specs (a device two of them define) and of
	// specs that did not load at all (they might have defined it).
	relevant := map[string]bool{}
	loaded := map[string]bool{}
	for v, specs := range s.specs {
		for _, spec := range specs {
			loaded[s.paths[spec]] = true
			relevant[s.paths[spec]] = v == vendor
		}
	}
	var reasons []string
	for _, path := range slices.Sorted(maps.Keys(s.errors)) {
		if relevant[path] || !loaded[path] {
			reasons = append(reasons, fmt.Sprintf("%s: %v", path, errors.Join(s.errors[path]...)))
		}
	}
	reasons = append(reasons, s.problems...)
	msg := fmt.Sprintf("no spec in %s defines it", strings.Join(s.dirs, ", "))
	if len(reasons) > 0 {
		msg += "; spec errors: " + strings.Join(reasons, "; ")
	}
	return fmt.Errorf("%w %s: %s", ErrUnresolvable, name, msg)
}

// SpecErrors counts the errors of spec files in the last scan, and the
// spec directories that exist but cannot be read.
func (r *Resolver) SpecErrors() int { return r.current.Load().specErrors() }

// Devices counts the devices the spec directories define.
func (r *Resolver) Devices() int { return len(r.current.Load().devices) }

// DirProblems describes the spec directories that exist but cannot be
// listed. The scan stops at such a directory, as the CDI library's does,
// so that the specs of later directories are missing too; saying so is the
// only way to make that visible. A directory that does not exist is fine
// (/var/run/cdi often does not).
func DirProblems(dirs []string) []string {
	var out []string
	for _, dir := range dirs {
		if _, err := os.ReadDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, dirProblem(dir, err))
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

// Defined is a CDI device the scan resolves, with the spec file that
// defines it and the host nodes of its own and its spec's edits.
type Defined struct {
	Name     string
	SpecPath string
	Nodes    []Node
}

// Inventory is the last scan: the devices it resolves, and the
// errors of spec files (by path) that did not load or conflict.
type Inventory struct {
	Devices    []Defined
	SpecErrors map[string]error
}

// Inventory is the last scan's view, cheap to poll: nothing is read.
func (r *Resolver) Inventory() Inventory {
	snap := r.current.Load()
	inv := Inventory{SpecErrors: map[string]error{}}
	for path, errs := range snap.errors {
		inv.SpecErrors[path] = errors.Join(errs...)
	}
	for _, name := range slices.Sorted(maps.Keys(snap.devices)) {
		d := snap.devices[name]
		def := Defined{Name: name, SpecPath: snap.paths[d.GetSpec()]}
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
