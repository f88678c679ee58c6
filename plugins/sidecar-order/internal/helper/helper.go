// Package helper is the program the plugin puts in front of every container
// of an annotated pod. It runs as the container's first process, with the
// container's original command after "--":
//
//	/.nri-sidecar-order/helper --role main --container app -- /app --flag
//
// As a main container it waits until every sidecar is ready (or its timeout
// applies), then execve's the original command: same PID, same signals, same
// exit code, and nothing of the helper left in the process but one open
// descriptor holding a lock, by which the sidecars learn that the main exited.
//
// As a sidecar it waits for the previous sidecar to be ready, starts the
// original command as its child, reports readiness, forwards signals, and
// stops the child after the mains have exited, after the later sidecars,
// with a grace period. It exits with the child's exit code.
//
// Everything the helpers share goes through the coordination directory
// (package coord). The helper is linked statically and uses no shell and no
// file of the image but the commands it is told to run.
package helper

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// Where the plugin mounts the helper and the pod's coordination directory
// inside each container.
const (
	MountDir   = "/.nri-sidecar-order"
	BinaryPath = MountDir + "/helper"
	DirPath    = MountDir + "/pod"
)

// Roles of a container.
const (
	RoleMain    = "main"
	RoleSidecar = "sidecar"
)

// Exit codes of the helper's own failures, chosen like a shell's and
// runc's: 125 the helper failed (bad usage, unreadable directory, a sidecar
// timeout with on-timeout "fail"), 126 the command cannot be executed, 127
// the command was not found.
const (
	ExitFailed        = 125
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// Options are one run of the helper.
type Options struct {
	Dir       coord.Dir
	Container string
	Role      string
	Argv      []string // the container's original command
	// Poll is how often the helper looks at the coordination directory and
	// at readiness; default 50ms.
	Poll   time.Duration
	Stderr io.Writer
}

// Main runs the helper with the process' arguments (without the program
// name) and returns the exit code. A main container's helper does not
// return when the exec succeeds.
func Main(args []string) int {
	o, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nri-sidecar-helper: %v\n", err)
		return ExitFailed
	}
	return Run(o)
}

// ParseArgs parses "--role R --container NAME [--dir D] [--poll P] -- CMD...".
func ParseArgs(args []string) (Options, error) {
	o := Options{Dir: coord.Dir{Path: DirPath}, Poll: 50 * time.Millisecond, Stderr: os.Stderr}
	fs := flag.NewFlagSet("nri-sidecar-helper", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Dir.Path, "dir", o.Dir.Path, "the pod's coordination directory")
	fs.StringVar(&o.Container, "container", "", "this container's name")
	fs.StringVar(&o.Role, "role", "", "main or sidecar")
	fs.DurationVar(&o.Poll, "poll", o.Poll, "how often to look at the coordination directory")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("parsing arguments %q: %w", args, err)
	}
	o.Argv = fs.Args()
	switch {
	case o.Role != RoleMain && o.Role != RoleSidecar:
		return o, fmt.Errorf("--role %q: expected main or sidecar", o.Role)
	case o.Container == "":
		return o, errors.New("missing --container: expected this container's name")
	case len(o.Argv) == 0:
		return o, errors.New("missing command: expected the container's command after --")
	case o.Poll <= 0:
		return o, fmt.Errorf("--poll %s: expected a positive duration", o.Poll)
	}
	return o, nil
}

// Run runs the helper and returns the exit code.
func Run(o Options) int {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Role == RoleMain {
		return runMain(o)
	}
	return runSidecar(o)
}

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Stderr, "nri-sidecar-helper: %s: "+format+"\n", append([]any{o.Container}, args...)...)
}

// resolve finds the program the way runc does for a container's process:
// argv[0] as is when it has a slash, else searched in the container's PATH.
// The exit code is for when it fails.
func resolve(argv0 string) (string, int, error) {
	path, err := exec.LookPath(argv0)
	if err == nil {
		return path, 0, nil
	}
	if errors.Is(err, os.ErrPermission) {
		return "", ExitNotExecutable, fmt.Errorf("resolving command %q: %w", argv0, err)
	}
	return "", ExitNotFound, fmt.Errorf("resolving command %q: %w", argv0, err)
}

// execCommand replaces the helper with argv; it returns only on failure.
// keep are files that must stay open until the exec (their finalizers
// would otherwise close them).
func execCommand(argv []string, keep ...*os.File) (int, error) {
	path, code, err := resolve(argv[0])
	if err != nil {
		return code, err
	}
	err = syscall.Exec(path, argv, os.Environ())
	runtime.KeepAlive(keep)
	if errors.Is(err, syscall.ENOENT) {
		return ExitNotFound, fmt.Errorf("executing %q: %w", path, err)
	}
	return ExitNotExecutable, fmt.Errorf("executing %q: %w", path, err)
}

// signalExit is the exit code of a process ended by sig, as shells and the
// runtimes report it.
func signalExit(sig syscall.Signal) int { return 128 + int(sig) }
