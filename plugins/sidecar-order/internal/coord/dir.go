package coord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// Files in the coordination directory. Container names are DNS labels
// (lowercase letters, digits, '-'), so they are safe in file names.
const (
	specFile      = "pod.json"
	mainPrefix    = "main-"
	sidecarPrefix = "sidecar-"
	reportPrefix  = "report-"
	registered    = ".registered" // the plugin created this main container
	lockSuffix    = ".lock"       // held by the container's helper while it lives; not empty once a main's helper ran
	ready         = ".ready"      // this sidecar passed its readiness check
	// ownerMark is made by the plugin with the directory, before anything
	// else: the plugin removes, or writes into, only directories that hold
	// it, so that a state directory shared with other files loses none.
	ownerMark = ".nri-sidecar-order"
)

// Dir is one pod's coordination directory.
type Dir struct{ Path string }

func (d Dir) file(name string) string { return filepath.Join(d.Path, name) }

// writeAtomic writes data to name through a temporary file and a rename, so
// that a reader in another container never sees half a file.
func (d Dir) writeAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(d.Path, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", d.file(name), err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), d.file(name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", d.file(name), err)
	}
	return nil
}

// Make creates the directory, writable by every container of the pod
// whatever user it runs as (it is mounted into this pod's containers only),
// and marks it as the plugin's. An existing directory is taken only if it
// is the plugin's (Owned).
func (d Dir) Make() error {
	err := os.Mkdir(d.Path, 0o777)
	if errors.Is(err, fs.ErrExist) && !d.Owned() {
		return fmt.Errorf("making the coordination directory: %s exists and was not made by sidecar-order (it holds no %s): left alone", d.Path, ownerMark)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("making the coordination directory: %w", err)
	}
	if err := os.Chmod(d.Path, 0o777); err != nil {
		return fmt.Errorf("making the coordination directory: %w", err)
	}
	if regular(d.file(ownerMark)) {
		return nil
	}
	// A directory made before the mark existed gets it now.
	return d.writeAtomic(ownerMark, nil)
}

// Owned reports whether the plugin made the directory: it holds the mark,
// or, made by a version of the plugin that did not mark its directories
// yet, the pod's spec. Only regular files count, looked at without opening
// them (a FIFO in their place cannot block the caller).
func (d Dir) Owned() bool {
	return regular(d.file(ownerMark)) || regular(d.file(specFile))
}

func regular(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Mode().IsRegular()
}

// WriteSpec stores the pod's spec.
func (d Dir) WriteSpec(p *Pod) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the pod's sidecar spec: %w", err)
	}
	return d.writeAtomic(specFile, append(data, '\n'))
}

// ReadSpec loads the pod's spec.
func (d Dir) ReadSpec() (*Pod, error) {
	// Containers can write into the directory: the spec may be anything.
	data, err := fsread.NoFollow(d.file(specFile), maxReportSize)
	if err != nil {
		return nil, fmt.Errorf("reading the pod's sidecar spec: %w", err)
	}
	var p Pod
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decoding the pod's sidecar spec %s: %w", d.file(specFile), err)
	}
	return &p, nil
}

// Exists reports whether the directory still holds the pod's spec; it is
// gone when the directory was removed or replaced under the helper.
func (d Dir) Exists() bool {
	_, err := os.Stat(d.file(specFile))
	return err == nil
}

// RegisterMain records that the main container name was created, so that
// sidecars wait for it before they count the mains as exited.
func (d Dir) RegisterMain(name string) error {
	return d.writeAtomic(mainPrefix+name+registered, nil)
}

// lock opens path and takes an exclusive flock on it, waiting for a previous
// holder (an exiting instance of the same container). cloexec false keeps
// the descriptor, and with it the lock, across execve.
func lock(path string, cloexec bool) (*os.File, error) {
	flags := syscall.O_RDWR | syscall.O_CREAT
	if cloexec {
		flags |= syscall.O_CLOEXEC
	}
	fd, err := syscall.Open(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	// Only the owner may chmod; a lock file made by another container's
	// user keeps its mode, which is readable by everyone.
	_ = syscall.Fchmod(fd, 0o644)
	f := os.NewFile(uintptr(fd), path)
	if err := flock(fd, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// flock retries flock(2) interrupted by a signal.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// held reports whether some process holds the lock on path.
func held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	err = flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		_ = flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// startedMark is what a main's lock file holds once its helper ran: a lock
// file that is free and not empty belongs to a main that has exited. (The
// mark goes into the lock file, not a file of its own, because every file
// created here costs the main's start a few hundred microseconds.)
var startedMark = []byte("started\n")

// LockMain takes the main container name's lock and marks it started. The
// returned file must stay open, without close-on-exec, in the process that
// execs the main's command: the kernel releases the lock when the main's
// process, and every child that inherited the descriptor, has exited.
func (d Dir) LockMain(name string) (*os.File, error) {
	f, err := lock(d.file(mainPrefix+name+lockSuffix), false)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(startedMark, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("marking main %s started: %w", name, err)
	}
	return f, nil
}

// LockSidecar takes the sidecar name's lock, held by its helper while it lives.
func (d Dir) LockSidecar(name string) (*os.File, error) {
	return lock(d.file(sidecarPrefix+name+lockSuffix), true)
}

// MarkReady records that the sidecar name passed its readiness check.
func (d Dir) MarkReady(name string) error {
	return d.writeAtomic(sidecarPrefix+name+ready, nil)
}

// ClearReady removes the sidecar's ready marker.
func (d Dir) ClearReady(name string) error {
	err := os.Remove(d.file(sidecarPrefix + name + ready))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clearing the ready marker of sidecar %s: %w", name, err)
	}
	return nil
}

// SidecarAlive reports whether the sidecar's helper runs.
func (d Dir) SidecarAlive(name string) bool {
	return held(d.file(sidecarPrefix + name + lockSuffix))
}

// SidecarReady reports whether the sidecar is ready: marked ready by a
// helper that still runs (a marker left by a killed helper does not count).
func (d Dir) SidecarReady(name string) bool {
	if _, err := os.Stat(d.file(sidecarPrefix + name + ready)); err != nil {
		return false
	}
	return d.SidecarAlive(name)
}

// MainState is where a main container is in its life.
type MainState int

const (
	MainUnknown MainState = iota // never created (as far as the directory shows)
	MainCreated                  // created, its helper has not run yet
	MainRunning                  // its helper or command runs
	MainExited                   // it ran and has exited
)

// Main returns the state of the main container name.
func (d Dir) Main(name string) MainState {
	lockPath := d.file(mainPrefix + name + lockSuffix)
	switch {
	case held(lockPath):
		return MainRunning
	case nonEmpty(lockPath):
		return MainExited
	case exists(d.file(mainPrefix + name + registered)):
		return MainCreated
	}
	return MainUnknown
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func nonEmpty(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Size() > 0
}

// Mains returns the names of the main containers the sidecars wait for:
// p.Mains if set, else every main the plugin registered so far.
func (d Dir) Mains(p *Pod) ([]string, error) {
	if len(p.Mains) > 0 {
		return p.Mains, nil
	}
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, fmt.Errorf("listing the main containers in %s: %w", d.Path, err)
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), mainPrefix); ok {
			if n, ok := strings.CutSuffix(n, registered); ok {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

// MainsExited reports whether there is at least one main and every main has
// run and exited.
func (d Dir) MainsExited(p *Pod) (bool, error) {
	names, err := d.Mains(p)
	if err != nil || len(names) == 0 {
		return false, err
	}
	for _, n := range names {
		if d.Main(n) != MainExited {
			return false, nil
		}
	}
	return true, nil
}

// MainsRunning reports whether any main container's helper or command runs.
// A main that was created but never started does not count: after a pod's
// deletion began, the kubelet does not start it any more.
func (d Dir) MainsRunning(p *Pod) bool {
	names, err := d.Mains(p)
	if err != nil {
		return false
	}
	for _, n := range names {
		if d.Main(n) == MainRunning {
			return true
		}
	}
	return false
}

// InUse reports whether a container of the pod still needs the directory:
// a helper or main command runs (its lock is held), a main was created and
// has not started yet, or a sidecar of the spec has not run yet (its
// container may be created and waiting to start). A spec that cannot be
// read counts as in use: only a directory known to be idle may go.
func (d Dir) InUse() bool {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, lockSuffix) && held(d.file(name)) {
			return true
		}
		if rest, ok := strings.CutPrefix(name, mainPrefix); ok {
			if main, ok := strings.CutSuffix(rest, registered); ok && d.Main(main) == MainCreated {
				return true
			}
		}
	}
	spec, err := d.ReadSpec()
	if err != nil {
		return true
	}
	for _, s := range spec.Sidecars {
		if !exists(d.file(sidecarPrefix + s.Name + lockSuffix)) {
			return true
		}
	}
	return false
}

// Report is what a helper tells the plugin about one run of its container;
// the plugin turns reports into metrics.
type Report struct {
	Container string `json:"container"`
	Role      string `json:"role"` // "main" or "sidecar"
	// Waited is how long the container waited for the sidecars before it
	// (all of them for a main, the previous one for a sidecar).
	Waited Duration `json:"waited"`
	// TimedOut are the sidecars that were not ready in time, and Action
	// what was done about it (OnTimeoutStart or OnTimeoutFail).
	TimedOut []string `json:"timedOut,omitempty"`
	Action   string   `json:"action,omitempty"`
	// Stop is why a sidecar was stopped by its helper: StopMainsExited or
	// StopSignal; empty when it exited on its own.
	Stop string `json:"stop,omitempty"`
	// ExitCode is the sidecar's exit code (sidecars only: a main's helper
	// is gone once the main's command runs).
	ExitCode int `json:"exitCode,omitempty"`
}

// Why a sidecar's helper stopped its sidecar.
const (
	StopMainsExited = "mains-exited"
	StopSignal      = "signal"
)

// WriteReport stores r under a name of its own.
func (d Dir) WriteReport(r Report) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the report of %s: %w", r.Container, err)
	}
	name := reportPrefix + r.Container + "-" + strconv.FormatInt(time.Now().UnixNano(), 10) + ".json"
	return d.writeAtomic(name, data)
}

// maxReportSize bounds a report and the pod's spec, which containers can
// replace; a real one is about 200 bytes.
const maxReportSize = 64 << 10

// TakeReports returns the reports written so far and removes them, so that
// each is counted once. A report that cannot be read or decoded is removed
// and returned as an error beside the others. The containers write the
// reports, so only regular files are read (a FIFO would block the plugin's
// request until someone wrote to it) and links are not followed (one could
// lead anywhere on the host).
func (d Dir) TakeReports() ([]Report, error) {
	entries, err := os.ReadDir(d.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing reports in %s: %w", d.Path, err)
	}
	var reports []Report
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), reportPrefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := d.file(e.Name())
		data, err := fsread.NoFollow(path, maxReportSize)
		if err == nil {
			var r Report
			if err = json.Unmarshal(data, &r); err == nil {
				reports = append(reports, r)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading report %s: %w", path, err))
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing report %s: %w", path, err))
		}
	}
	return reports, errors.Join(errs...)
}
