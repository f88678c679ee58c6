package runtime

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/deployments"
)

// Runtime is a CRI container runtime with NRI that a Sandbox can run under its
// kubelet. Implementations keep every socket and state directory under
// RuntimeEnv.Dir, so that the kubelet part of the sandbox needs nothing but
// the CRI endpoint.
type Runtime interface {
	// Name is the short name used in test names and flags ("containerd").
	Name() string
	// Binaries lists the executables the runtime needs in the cache's bin dir.
	Binaries() []string
	// Start writes the configuration, starts the runtime, waits until its CRI
	// answers and loads env.Images so that pods never pull.
	Start(ctx context.Context, env RuntimeEnv) error
	// Restart kills the runtime with SIGKILL, leaving its containers to their
	// shims, starts it again with the same configuration and waits for its CRI.
	Restart(ctx context.Context) error
	// Stop stops the runtime (SIGTERM, then SIGKILL after grace). Containers
	// are not stopped: the sandbox does that through CRI before.
	Stop(ctx context.Context, grace time.Duration) error
	// Endpoint is the CRI endpoint, "unix:///path".
	Endpoint() string
	// HostDirs lists host directories the runtime may create whatever its
	// configuration says; the sandbox removes those that did not exist.
	HostDirs() []string
	// PID is the process id of the runtime daemon, 0 when it is not running.
	PID() int
}

// RuntimeEnv is what the sandbox hands to a Runtime at Start.
type RuntimeEnv struct {
	// Dir is the runtime's private directory (created, empty at first start).
	Dir string
	// Cache locates the binaries.
	Cache Cache
	// Images are loaded into the runtime's CRI image store.
	Images []Image
	// PauseImage is the sandbox (infra) image reference.
	PauseImage string
	// NRI is where the runtime serves NRI and finds pre-registered plugins.
	NRI NRIConfig
	// CDISpecDirs are the directories the runtime reads CDI specs from.
	CDISpecDirs []string
	// BlockIOConfig is the runtime's blockio_config_file; "" for none.
	BlockIOConfig string
	// Netns is the network namespace the runtime runs in (a cluster
	// sandbox's, see Options.Cluster); "" is the sandbox's own.
	Netns string
	// CNIDir holds the CNI plugins (bin/) and network configuration (net.d/)
	// for pods off the host network; "" gives the runtime empty ones of its
	// own, so that /etc/cni never applies and only host-network pods run.
	CNIDir string
	// Log receives the runtime's lifecycle messages.
	Log logrus.FieldLogger
}

// NRIConfig is the runtime side of NRI: the socket plugins connect to, the
// pre-registered plugin directories and the timeouts. The runtimes take the
// timeouts from the shipped drop-ins (deployments/): the fields say what
// those set, and the runtimes' config tests check it.
type NRIConfig struct {
	Socket              string
	PluginPath          string
	PluginConfigPath    string
	RegistrationTimeout time.Duration
	RequestTimeout      time.Duration
}

// deploymentPaths are the paths to put into a shipped drop-in in place of
// the production ones.
func (n NRIConfig) deploymentPaths(cdiSpecDirs []string) deployments.Paths {
	return deployments.Paths{NRISocket: n.Socket, PluginDir: n.PluginPath, PluginConfigDir: n.PluginConfigPath, CDISpecDirs: cdiSpecDirs}
}

// runtimes maps a runtime's name to its constructor; a new runtime adds itself
// here and every table-driven test over RuntimeNames picks it up.
// AltRuntimeHandler is the second runtime handler every sandbox runtime has
// beside its default: the same runc under another name, as a RuntimeClass
// would select (CRI.RunPodSandboxOn).
const AltRuntimeHandler = "runc-alt"

var runtimes = map[string]func() Runtime{
	"containerd": func() Runtime { return NewContainerd() },
	"crio":       func() Runtime { return NewCRIO() },
}

// RuntimeNames returns the names of the supported runtimes, sorted.
func RuntimeNames() []string {
	names := make([]string, 0, len(runtimes))
	for name := range runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// NewRuntime returns a fresh Runtime by name.
func NewRuntime(name string) (Runtime, error) {
	newRuntime, ok := runtimes[name]
	if !ok {
		return nil, fmt.Errorf("unknown runtime %q: expected one of %s", name, strings.Join(RuntimeNames(), ", "))
	}
	return newRuntime(), nil
}
