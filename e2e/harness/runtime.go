package harness

import (
	"context"
	"errors"
	"fmt"
	"github.com/intel/goresctrl/pkg/blockio"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-suite/nri-suite/common/kubepod"
)

// Name and version the runtime reports to plugins in Configure.
const (
	RuntimeName    = "nri-suite-harness"
	RuntimeVersion = "v0.0.0-harness"
)

// Runtime is an in-process container runtime: an NRI adaptation on a private
// socket and the pods and containers it runs. Its methods are safe for
// concurrent use; like containerd, it holds one lock across every NRI call.
type Runtime struct {
	t    testing.TB
	opts options

	socket    string // public, served by proxy
	private   string // the adaptation's own socket
	pluginDir string
	configDir string
	sharedDir string // the plugins' --shared-dir (common/state records)
	reg       *registry

	mu         sync.Mutex
	nri        *adaptation.Adaptation
	proxy      *socketProxy
	pods       []*Pod
	containers []*Container // live (created, running or stopped, not removed), in creation order
	// byID indexes containers: an update names its container by id, and an
	// exclusive CPU grant updates hundreds of them in one call.
	byID  map[string]*Container
	clock int64
	// lostSyncs is how many Synchronize replies are still to be lost.
	lostSyncs int
}

// Option configures a Runtime.
type Option func(*options)

type options struct {
	node    kubepod.Config
	plugins []PreRegisteredPlugin
	cdi     func(*rspec.Spec, []string) error
	builtin []*builtin.BuiltinPlugin
	// dropUntilStart: updates of a created container are lost until it runs.
	dropUntilStart bool
	// blockIO is goresctrl's block I/O configuration of the runtime (a
	// containerd's blockio_config_file); nil: none.
	blockIO []byte
}

// WithNode sets what the kubelet knows of its node (cgroup driver, memory
// capacity, hugepage sizes, node name).
func WithNode(cfg kubepod.Config) Option {
	return func(o *options) { o.node = cfg }
}

// WithPreRegistered installs a plugin in the runtime's plugin directory as
// NN-name with its config in the config directory as NN-name.conf, so that
// the runtime launches it at start (and again at every restart).
func WithPreRegistered(p PreRegisteredPlugin) Option {
	return func(o *options) { o.plugins = append(o.plugins, p) }
}

// WithCDIInjector sets how CDI devices that plugins ask for are injected into
// a spec (containerd resolves them with its CDI cache). Without it the
// runtime only records the requested names (Container.CDIDevices).
func WithCDIInjector(fn func(spec *rspec.Spec, devices []string) error) Option {
	return func(o *options) { o.cdi = fn }
}

// WithBuiltin adds in-process plugins (the adaptation's builtin plugins):
// handlers written in the test, run in index order among the real plugins.
// Useful to provoke what a test plugin binary does not do, such as updates.
func WithBuiltin(plugins ...*builtin.BuiltinPlugin) Option {
	return func(o *options) { o.builtin = append(o.builtin, plugins...) }
}

// WithDroppedUpdatesUntilStart makes the runtime lose, as containerd can,
// every update of a container between its creation and its start: containerd
// ignores an update of a container it has not stored yet (it stores it only
// after the plugins answered CreateContainer), and from the creation of its
// task until the task runs an update reaches the stored spec but not the
// cgroup. Without it the runtime applies them to the spec, which is then what
// the container starts with. Container.DroppedUpdates counts the losses.
func WithDroppedUpdatesUntilStart() Option {
	return func(o *options) { o.dropUntilStart = true }
}

// WithBlockIOConfig gives the runtime a block I/O class configuration in
// goresctrl's format, as containerd's blockio_config_file does: the runtime
// resolves a container's block I/O class with it into the spec's
// linux.resources.blockIO, and fails a creation whose class it lacks, as
// containerd does (a runtime without one fails every class). goresctrl keeps
// it per process: one runtime with such a configuration at a time.
func WithBlockIOConfig(data []byte) Option {
	return func(o *options) { o.blockIO = data }
}

// New starts a runtime for the test with a private socket, plugin directory
// and plugin config directory, and stops it when the test ends. Pre-registered
// plugins must have registered and synchronized when New returns.
func New(t testing.TB, opts ...Option) *Runtime {
	t.Helper()
	rt := &Runtime{t: t, reg: newRegistry(), byID: map[string]*Container{}}
	for _, o := range opts {
		o(&rt.opts)
	}
	dir := t.TempDir()
	// A unix socket path is limited to 108 bytes; test temp dirs can be longer.
	sockDir, err := os.MkdirTemp("", "nri-harness-")
	if err != nil {
		t.Fatalf("creating the socket directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	rt.socket = filepath.Join(sockDir, "nri.sock")
	rt.private = filepath.Join(sockDir, "runtime.sock")
	rt.pluginDir = filepath.Join(dir, "plugins")
	rt.configDir = filepath.Join(dir, "conf.d")
	rt.sharedDir = filepath.Join(dir, "shared")
	for _, d := range []string{rt.pluginDir, rt.configDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("creating runtime directory: %v", err)
		}
	}
	for _, p := range rt.opts.plugins {
		if err := rt.install(p, dir); err != nil {
			t.Fatalf("installing pre-registered plugin %s-%s: %v", p.Index, p.Name, err)
		}
	}
	if err := blockio.SetConfigFromData(rt.opts.blockIO, false); err != nil {
		t.Fatalf("the runtime's block I/O configuration: %v", err)
	}
	t.Cleanup(func() { _ = blockio.SetConfig(nil, false) })
	t.Cleanup(rt.stop)
	rt.start(t)
	return rt
}

// Socket is the path of the runtime's NRI socket, for external plugins.
func (rt *Runtime) Socket() string { return rt.socket }

// PluginDir is where pre-registered plugins are installed.
func (rt *Runtime) PluginDir() string { return rt.pluginDir }

// ConfigDir is the drop-in directory of pre-registered plugins' configs.
func (rt *Runtime) ConfigDir() string { return rt.configDir }

// SharedDir is the shared state directory every plugin is started with
// (--shared-dir), where tests read the records plugins publish.
func (rt *Runtime) SharedDir() string { return rt.sharedDir }

// SyncCount is how many Synchronize calls the plugin registered as
// "NN-name" has completed with this runtime, across restarts.
func (rt *Runtime) SyncCount(plugin string) int { return rt.reg.syncCount(plugin) }

// PluginLatency is how long the last call of op (an NRI event name such as
// "CreateContainer", or "Synchronize") to the plugin "NN-name" took, as the
// runtime measured it: the request sent, the plugin's handler, the response
// received. 0 before the first call.
func (rt *Runtime) PluginLatency(plugin, op string) time.Duration {
	return rt.reg.lastLatency(plugin, op)
}

func (rt *Runtime) start(t testing.TB) {
	t.Helper()
	before := map[string]int{}
	for _, p := range rt.opts.plugins {
		before[p.qualified()] = rt.reg.syncCount(p.qualified())
	}
	nri, err := adaptation.New(RuntimeName, RuntimeVersion, rt.synchronize, rt.updateFromPlugin,
		adaptation.WithSocketPath(rt.private),
		adaptation.WithPluginPath(rt.pluginDir),
		adaptation.WithPluginConfigPath(rt.configDir),
		adaptation.WithMetrics(rt.reg),
		adaptation.WithBuiltinPlugins(rt.opts.builtin...),
	)
	if err != nil {
		t.Fatalf("creating the NRI adaptation: %v", err)
	}
	// Start launches and synchronizes pre-registered plugins before it
	// returns; it calls back into synchronize, so rt.mu must be free.
	if err := nri.Start(); err != nil {
		t.Fatalf("starting the NRI adaptation: %v", err)
	}
	proxy, err := listenProxy(rt.socket, rt.private)
	if err != nil {
		nri.Stop()
		t.Fatalf("starting the runtime: %v", err)
	}
	rt.mu.Lock()
	rt.nri = nri
	rt.proxy = proxy
	rt.mu.Unlock()
	// The adaptation only logs a pre-registered plugin that failed to start.
	for _, p := range rt.opts.plugins {
		if rt.reg.syncCount(p.qualified()) <= before[p.qualified()] {
			t.Fatalf("pre-registered plugin %s did not register and synchronize; its log:\n%s", p.qualified(), readLog(p.logPath))
		}
	}
}

func (rt *Runtime) stop() {
	rt.mu.Lock()
	nri, proxy := rt.nri, rt.proxy
	rt.nri, rt.proxy = nil, nil
	rt.mu.Unlock()
	if proxy != nil {
		// First, so that plugins see the connection drop as at a runtime exit.
		proxy.close()
		os.Remove(rt.socket)
	}
	if nri != nil {
		nri.Stop()
	}
}

// Restart stops the runtime's NRI side and starts a new one on the same
// socket and directories with the same live pods and containers, as a
// containerd restart does: pre-registered plugins are launched again and
// every plugin is synchronized with the survivors. External plugins must
// reconnect on their own (Plugin.WaitSynchronized).
func (rt *Runtime) Restart(t testing.TB) {
	t.Helper()
	rt.Stop()
	rt.Start(t)
}

// Stop stops the runtime's NRI side as containerd's exit does: external
// plugins see their connection drop, pre-registered ones are killed. The
// pods and containers stay. Restart is Stop then Start; the two steps let a
// test act, or measure, in between.
func (rt *Runtime) Stop() { rt.stop() }

// Start starts a stopped runtime's NRI side again, as Restart does after
// stopping it: it returns once the pre-registered plugins are launched and
// synchronized. Starting a running runtime fails the test.
func (rt *Runtime) Start(t testing.TB) {
	t.Helper()
	rt.mu.Lock()
	running := rt.nri != nil
	rt.mu.Unlock()
	if running {
		t.Fatalf("starting the runtime: it is running")
	}
	rt.start(t)
}

// adaptation returns the running adaptation; callers hold rt.mu.
func (rt *Runtime) adaptation() (*adaptation.Adaptation, error) {
	if rt.nri == nil {
		return nil, fmt.Errorf("the runtime is stopped")
	}
	return rt.nri, nil
}

// synchronize answers a plugin's registration with the live pods and
// containers (containerd's syncPlugin: exited containers are left out) and
// applies the updates the plugins return.
func (rt *Runtime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var pods []*api.PodSandbox
	for _, p := range rt.pods {
		pods = append(pods, kubepod.NRIPodSandbox(p.Def))
	}
	var ctrs []*api.Container
	for _, c := range rt.containers {
		if c.status.State == api.ContainerState_CONTAINER_CREATED || c.status.State == api.ContainerState_CONTAINER_RUNNING {
			ctrs = append(ctrs, c.nriLocked())
		}
	}
	updates, err := cb(ctx, pods, ctrs)
	rt.reg.syncDone(err == nil)
	if err != nil {
		return err
	}
	if rt.lostSyncs > 0 {
		rt.lostSyncs--
		return errors.New("harness: the Synchronize reply came after NRI's deadline; none of its updates is applied")
	}
	rt.applyUpdatesLocked(updates)
	return nil
}

// LoseSyncReplies makes the runtime lose the next n Synchronize replies of
// external plugins, as when a plugin answers after NRI's deadline: none of
// their updates is applied and the adaptation drops the plugin, which
// registers again (the plugin still counts as synchronized once, see
// Plugin.WaitSynchronized). The plugin cannot tell: it answered.
func (rt *Runtime) LoseSyncReplies(n int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.lostSyncs += n
}

// updateFromPlugin applies updates a plugin asks for outside of any request.
func (rt *Runtime) updateFromPlugin(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.applyUpdatesLocked(updates), nil
}

// applyUpdatesLocked applies container updates as containerd does: an update
// of a container it does not know is ignored, and so is one of a container
// not started yet under WithDroppedUpdatesUntilStart. containerd has no
// failure to report here either (its UpdateContainerResources only rewrites
// the spec of a container without a task), so nothing is ever returned as
// failed.
func (rt *Runtime) applyUpdatesLocked(updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	for _, u := range updates {
		c := rt.containerLocked(u.GetContainerId())
		switch {
		case c == nil:
		case rt.opts.dropUntilStart && c.status.State == api.ContainerState_CONTAINER_CREATED:
			c.dropped++
		default:
			c.applyUpdateLocked(u.GetLinux().GetResources())
		}
	}
	return nil
}

func (rt *Runtime) containerLocked(id string) *Container {
	return rt.byID[id]
}

// addContainerLocked makes a created container live.
func (rt *Runtime) addContainerLocked(c *Container) {
	rt.containers = append(rt.containers, c)
	if _, dup := rt.byID[c.ID()]; !dup { // the oldest of equal ids wins, as in creation order
		rt.byID[c.ID()] = c
	}
}

// removeContainerLocked forgets a removed container.
func (rt *Runtime) removeContainerLocked(c *Container) {
	rt.containers = slices.DeleteFunc(rt.containers, func(x *Container) bool { return x == c })
	if rt.byID[c.ID()] != c {
		return
	}
	delete(rt.byID, c.ID())
	for _, x := range rt.containers {
		if x.ID() == c.ID() {
			rt.byID[x.ID()] = x
			return
		}
	}
}

// tick is a logical clock for container timestamps: deterministic and ordered.
func (rt *Runtime) tick() int64 {
	rt.clock++
	return rt.clock
}
