package resolve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// MaxSpecSize bounds a CDI spec file; a larger one is a spec error. Specs
// of a node's GPUs, with every partition, are tens of KiB.
const MaxSpecSize = 4 << 20

// snapshot is one scan of the spec directories: the specs that loaded, the
// devices they define and why the others did not load. It never changes
// once made, so that resolutions read it without a lock while the next scan
// is made beside it.
//
// The CDI library's own cache is not used: its scan reads every file with
// os.ReadFile under the lock every lookup takes, so that a FIFO in a spec
// directory blocks every resolution, and its lookups rescan on the
// request path. The scan here reads each file with fsread (regular files of
// at most MaxSpecSize, without blocking) and hands the bytes to the library
// (ReadSpec) to parse and validate; priorities, conflicts and injection are
// the library's own rules, redone on its exported types.
type snapshot struct {
	dirs    []string
	devices map[string]*cdi.Device // by qualified name
	specs   map[string][]*cdi.Spec // by vendor
	paths   map[*cdi.Spec]string   // each spec's file
	// errors are the spec files' errors by path: files that are not
	// regular or too large, specs that do not parse or validate, and
	// devices two specs of the same priority define.
	errors map[string][]error
	// problems are the spec directories that exist but cannot be listed.
	problems []string
}

// scan reads the spec directories, lowest priority first. Like the CDI
// library's scan, it reads the .json and .yaml files of each directory, not
// its subdirectories, and stops at a directory that cannot be listed: a
// runtime resolving the same names with the library (runtime mode) then
// sees what the plugin sees.
func scan(dirs []string) *snapshot {
	s := &snapshot{dirs: dirs, devices: map[string]*cdi.Device{}, specs: map[string][]*cdi.Spec{},
		paths: map[*cdi.Spec]string{}, errors: map[string][]error{}}
	conflicts := map[string]bool{}
	for priority, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.problems = append(s.problems, dirProblem(dir, err))
			break
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); e.IsDir() || ext != ".json" && ext != ".yaml" {
				continue
			}
			path := filepath.Join(dir, e.Name())
			spec, err := readSpec(path, priority)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				s.errors[path] = append(s.errors[path], fmt.Errorf("failed to load CDI Spec: %w", err))
				continue
			}
			s.add(spec, path, conflicts)
		}
	}
	for name := range conflicts {
		delete(s.devices, name)
	}
	return s
}

// add adds a spec's devices: one of a later directory replaces one of the
// same name, two of the same directory conflict and neither is kept.
func (s *snapshot) add(spec *cdi.Spec, path string, conflicts map[string]bool) {
	s.paths[spec] = path
	s.specs[spec.GetVendor()] = append(s.specs[spec.GetVendor()], spec)
	for _, d := range spec.Devices {
		dev := spec.GetDevice(d.Name)
		name := dev.GetQualifiedName()
		if old, ok := s.devices[name]; ok && old.GetSpec().GetPriority() == spec.GetPriority() {
			oldPath := s.paths[old.GetSpec()]
			err := fmt.Errorf("conflicting device %q (specs %q, %q)", name, path, oldPath)
			s.errors[path] = append(s.errors[path], err)
			s.errors[oldPath] = append(s.errors[oldPath], err)
			conflicts[name] = true
			continue
		}
		s.devices[name] = dev
	}
}

// readSpec reads the spec file at path with fsread and parses it with the
// CDI library, which reads only from a path: the bytes read are handed to
// it in a memfd, so that what it parses is exactly what was checked.
func readSpec(path string, priority int) (*cdi.Spec, error) {
	data, err := fsread.File(path, MaxSpecSize)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("cdi-spec", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("reading CDI Spec %q: %w", path, err)
	}
	mem := os.NewFile(uintptr(fd), path)
	defer mem.Close()
	if _, err := mem.Write(data); err != nil {
		return nil, fmt.Errorf("reading CDI Spec %q: %w", path, err)
	}
	memPath := fmt.Sprintf("/proc/self/fd/%d", fd)
	spec, err := cdi.ReadSpec(memPath, priority)
	if err != nil {
		// The library's message names the memfd: name the file instead.
		return nil, errors.New(strings.ReplaceAll(err.Error(), strconv.Quote(memPath), strconv.Quote(path)))
	}
	return spec, nil
}

// inject applies the device's edits and those of its spec to spec, as the
// library's Cache.InjectDevices does.
func (s *snapshot) inject(spec *rspec.Spec, name string) error {
	d := s.devices[name]
	if d == nil {
		return fmt.Errorf("unresolvable CDI device %s", name)
	}
	edits := (&cdi.ContainerEdits{}).
		Append(&cdi.ContainerEdits{ContainerEdits: &d.GetSpec().ContainerEdits}).
		Append(&cdi.ContainerEdits{ContainerEdits: &d.ContainerEdits})
	if err := edits.Apply(spec); err != nil {
		return fmt.Errorf("failed to inject devices: %w", err)
	}
	return nil
}

// specErrors counts the spec files' errors and the directory problems.
func (s *snapshot) specErrors() int {
	n := len(s.problems)
	for _, errs := range s.errors {
		n += len(errs)
	}
	return n
}

func dirProblem(dir string, err error) string {
	return fmt.Sprintf("spec directory %s cannot be read (specs in it and in later directories are ignored): %v", dir, err)
}
