package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/state"
)

// Options configure a Sandbox; the zero value is usable.
type Options struct {
	// Runtime names the container runtime (see RuntimeNames); default containerd.
	Runtime string
	// BaseDir holds the run dir; default /run. Keep it short: unix socket
	// paths under it are limited.
	BaseDir string
	// Cache locates binaries and images; default DefaultCache().
	Cache Cache
	// NodeName is the kubelet's --hostname-override; default "nri-sandbox".
	NodeName string
	// Images are image archives the runtime loads at start besides the
	// cache's (Cache.Images), the same way on every runtime; their
	// references must be qualified (ParseImageRef).
	Images []Image
	// PreRegistered plugins are installed into the runtime's plugin dir
	// before it starts, so that the runtime launches them itself.
	PreRegistered []PluginSpec
	// Launch says who starts the plugins StartPlugin is asked for: the
	// sandbox (LaunchExternal, the default) or the runtime (LaunchByRuntime).
	Launch Launch
	// KeepRunDir leaves the run dir (logs, configs) after teardown.
	KeepRunDir bool
	// NoKubelet leaves the kubelet out: the node is the runtime alone, and
	// pods are made through CRI (Sandbox.CRI). A kubelet stops every pod it
	// did not create at its next housekeeping (every 2 s), so pods made
	// through raw CRI need this; with a kubelet, CRI.RunPodSandbox refuses.
	NoKubelet bool
	// TolerateMissingPlugins marks every pod the sandbox makes (WritePod,
	// CRI.RunPodSandbox and CreateContainer) with the annotation
	// deployments.TolerateMissingPlugins: "true", unless the pod sets that
	// key itself. The shipped containerd drop-in, which the sandbox runs as
	// it is, refuses every other container while the security plugin is not
	// connected: a scenario that does not start security sets this, as the
	// suite's own pods carry the annotation.
	TolerateMissingPlugins bool
	// Cluster makes the sandbox a one-node Kubernetes cluster: etcd,
	// kube-apiserver, kube-controller-manager and kube-scheduler beside the
	// runtime, the kubelet registered to them as the node with kube-proxy,
	// pods off the host network on a CNI bridge, all inside a network namespace of the
	// sandbox's own, which has no route out. The host reaches the API server
	// through Kubeconfig (a forwarded loopback port) and Client. Without
	// it the kubelet is standalone and every pod is on the host network.
	Cluster bool
	// BlockIOConfig is the runtime's block I/O class configuration in
	// goresctrl's format (containerd's and CRI-O's blockio_config_file),
	// with which the runtime resolves a container's block I/O class into
	// its spec; nil: none. Both runtimes read it when they start, and
	// resolve its device patterns then.
	BlockIOConfig []byte
	// Log receives the sandbox's progress; default logrus' standard logger.
	Log logrus.FieldLogger
}

// Sandbox is a running node: a container runtime with NRI and a standalone
// kubelet, all under one run dir. Close tears it down.
type Sandbox struct {
	opts    Options
	rt      Runtime
	images  []Image
	dir     string
	nri     NRIConfig
	cdiDir  string
	cri     *CRI
	kubelet *kubelet
	host    *hostState
	cluster *cluster // nil without Options.Cluster
	lock    *os.File
	log     logrus.FieldLogger

	mu      sync.Mutex
	plugins []*Plugin
	closed  bool
}

// DefaultNodeName is the kubelet's node name unless Options.NodeName says otherwise.
const DefaultNodeName = "nri-sandbox"

// Start starts a sandbox and returns once the runtime and the kubelet
// answer. On error, whatever was started is torn down again.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.Launch != LaunchExternal && opts.Launch != LaunchByRuntime {
		return nil, fmt.Errorf("starting sandbox: launch %s: expected LaunchExternal or LaunchByRuntime", opts.Launch)
	}
	if opts.Runtime == "" {
		opts.Runtime = "containerd"
	}
	if opts.BaseDir == "" {
		opts.BaseDir = "/run"
	}
	if opts.Cache.Root == "" {
		opts.Cache = DefaultCache()
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	rt, err := NewRuntime(opts.Runtime)
	if err != nil {
		return nil, fmt.Errorf("starting sandbox: %w", err)
	}
	if err := CheckPrereqs(rt, opts.Cache, opts.Cluster); err != nil {
		return nil, fmt.Errorf("starting sandbox: %w", err)
	}
	for _, spec := range opts.PreRegistered {
		if err := spec.validatePreRegistered(); err != nil {
			return nil, fmt.Errorf("starting sandbox: %w", err)
		}
	}
	images, err := sandboxImages(opts.Cache, opts.Images)
	if err != nil {
		return nil, fmt.Errorf("starting sandbox: %w", err)
	}
	s := &Sandbox{opts: opts, rt: rt, images: images, log: opts.Log.WithField("runtime", rt.Name())}
	if err := s.start(ctx); err != nil {
		if closeErr := s.Close(); closeErr != nil {
			s.log.WithError(closeErr).Error("tearing down the half-started sandbox")
		}
		return nil, fmt.Errorf("starting %s sandbox: %w", rt.Name(), err)
	}
	return s, nil
}

func (s *Sandbox) start(ctx context.Context) error {
	lock, err := lockHost(ctx, hostLockPath, func(msg string) { s.log.Info(msg) })
	if err != nil {
		return err
	}
	s.lock = lock
	if err := sweepStale(s.opts.BaseDir, s.log); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp(s.opts.BaseDir, runDirPrefix); err != nil {
		return fmt.Errorf("creating run dir: %w", err)
	}
	// Traversable, not listable: user-namespaced containers reach their
	// rootfs below it as an unprivileged host uid.
	if err := os.Chmod(s.dir, 0o711); err != nil {
		return fmt.Errorf("creating run dir: %w", err)
	}
	s.log = s.log.WithField("dir", s.dir)
	hostDirs := slices.Concat(kubeletHostDirs, preRegisteredHostDirs, s.rt.HostDirs())
	if s.opts.Cluster {
		hostDirs = append(hostDirs, clusterHostDirs...)
	}
	if s.host, err = recordHost(hostDirs); err != nil {
		return err
	}
	// Before the cgroup root is made, so that it exists in the new
	// hierarchies too; the state is saved even after a failed mount.
	var mountErr error
	if user, ok := s.rt.(cgroupV1User); ok {
		s.host.CgroupMounts, mountErr = mountCgroupsV1(cgroupV1MountBase, user.CgroupV1Controllers())
	}
	if err := s.host.save(s.dir); err != nil {
		return errors.Join(err, mountErr)
	}
	if mountErr != nil {
		return mountErr
	}
	if err := createCgroupRoot(cgroupRootFor(s.dir)); err != nil {
		return err
	}
	s.nri = NRIConfig{
		Socket:              filepath.Join(s.dir, "nri", "nri.sock"),
		PluginPath:          filepath.Join(s.dir, "nri", "plugins"),
		PluginConfigPath:    filepath.Join(s.dir, "nri", "conf.d"),
		RegistrationTimeout: 5 * time.Second,
		RequestTimeout:      2 * time.Second,
	}
	s.cdiDir = filepath.Join(s.dir, "cdi")
	cdiDirs := s.CDISpecDirs()
	for _, dir := range append([]string{s.nri.PluginPath, s.nri.PluginConfigPath, filepath.Join(s.dir, "plugins"), filepath.Join(s.dir, "cri")}, cdiDirs...) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating sandbox directory: %w", err)
		}
	}
	for _, spec := range s.opts.PreRegistered {
		if err := installPreRegistered(spec, s.nri, s.cdiDir); err != nil {
			return err
		}
	}
	env := RuntimeEnv{
		Dir:         filepath.Join(s.dir, s.rt.Name()),
		Cache:       s.opts.Cache,
		Images:      s.images,
		PauseImage:  PauseImage,
		NRI:         s.nri,
		CDISpecDirs: cdiDirs,
		Log:         s.log,
	}
	if s.opts.BlockIOConfig != nil {
		env.BlockIOConfig = filepath.Join(s.dir, "blockio.yaml")
		if err := os.WriteFile(env.BlockIOConfig, s.opts.BlockIOConfig, 0o644); err != nil {
			return fmt.Errorf("writing the runtime's block I/O configuration: %w", err)
		}
	}
	if s.opts.Cluster {
		if err := s.startCluster(ctx); err != nil {
			return err
		}
		env.Netns, env.CNIDir = s.cluster.ns.Path(), s.cluster.cni
	}
	if err := s.rt.Start(ctx, env); err != nil {
		return err
	}
	if s.cri, err = newCRI(s.opts.Cache.Bin("crictl"), s.rt.Endpoint(), filepath.Join(s.dir, "cri"), env.Netns, !s.opts.NoKubelet, s.opts.TolerateMissingPlugins); err != nil {
		return err
	}
	if s.opts.NoKubelet {
		return nil
	}
	settings, err := s.kubeletSettings()
	if err != nil {
		return err
	}
	if s.kubelet, err = startKubelet(ctx, s.opts.Cache.Bin("kubelet"), settings, s.log); err != nil {
		return err
	}
	if s.cluster != nil {
		if err := s.cluster.control.startProxy(ctx, s.opts.NodeName, clusterPodCIDR); err != nil {
			return err
		}
		return s.cluster.waitNodeReady(ctx, s.opts.NodeName)
	}
	return nil
}

// kubeletSettings are the kubelet's: in a cluster, its node address and
// the default ports in the sandbox's network namespace; standalone, the
// host's address (only reported: it listens on loopback) and free ports.
func (s *Sandbox) kubeletSettings() (kubeletSettings, error) {
	settings := kubeletSettings{
		Dir:        filepath.Join(s.dir, "kubelet"),
		Endpoint:   s.rt.Endpoint(),
		CgroupRoot: cgroupRootFor(s.dir),
		NodeName:   s.opts.NodeName,
	}
	if c := s.cluster; c != nil {
		settings.NodeIP, settings.Port, settings.HealthzPort = clusterNodeAddr.IP.String(), 10250, 10248
		settings.Cluster, settings.Netns, settings.HTTP = c.kubelet(), c.ns.Path(), c.http
		return settings, nil
	}
	var err error
	if settings.NodeIP, err = nodeIP(); err != nil {
		return settings, err
	}
	if settings.Port, err = freePort(); err != nil {
		return settings, err
	}
	settings.HealthzPort, err = freePort()
	return settings, err
}

// Dir is the sandbox's run dir.
func (s *Sandbox) Dir() string { return s.dir }

// Runtime is the sandbox's container runtime.
func (s *Sandbox) Runtime() Runtime { return s.rt }

// NRI is where the runtime serves NRI.
func (s *Sandbox) NRI() NRIConfig { return s.nri }

// CDISpecDir is a directory the runtime reads CDI specs from.
func (s *Sandbox) CDISpecDir() string { return s.cdiDir }

// CDISpecDirs are the directories the runtime reads CDI specs from: the
// shipped drop-ins name two (/etc/cdi, /var/run/cdi), CDISpecDir stands for
// the first, cdi-run in the run dir for the second.
func (s *Sandbox) CDISpecDirs() []string { return []string{s.cdiDir, filepath.Join(s.dir, "cdi-run")} }

// CRI talks to the runtime directly.
func (s *Sandbox) CRI() *CRI { return s.cri }

// NodeName is the kubelet's node name.
func (s *Sandbox) NodeName() string { return s.opts.NodeName }

// CgroupRoot is the kubelet's cgroup root; pods live in CgroupRoot/kubepods.
func (s *Sandbox) CgroupRoot() string { return cgroupRootFor(s.dir) }

// KubeletAddr is the loopback host:port where the kubelet serves HTTPS
// (self-signed, anonymous access): /metrics/cadvisor, /metrics/resource,
// /stats/summary. With Options.Cluster it is the loopback of the cluster's
// network namespace, and the kubelet asks the API server who may read it
// (KubeletGet does). "" without a kubelet.
func (s *Sandbox) KubeletAddr() string {
	if s.kubelet == nil {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(s.kubelet.port)
}

// KubeletLog returns the path of the kubelet's log; "" without a kubelet.
func (s *Sandbox) KubeletLog() string {
	if s.kubelet == nil {
		return ""
	}
	return s.kubelet.process.logPath
}

// RestartRuntime kills the runtime with SIGKILL and starts it again; the
// containers stay up in their shims and the kubelet reconnects by itself.
// With LaunchByRuntime it also waits until the plugins the runtime launched
// before are gone and it has launched each StartPlugin'ed plugin again, as
// a new process, connected and ready; their Plugin handles follow.
func (s *Sandbox) RestartRuntime(ctx context.Context) error {
	if s.opts.Launch == LaunchByRuntime {
		return s.relaunch(ctx)
	}
	return s.restartRuntime(ctx)
}

func (s *Sandbox) restartRuntime(ctx context.Context) error {
	if err := s.rt.Restart(ctx); err != nil {
		return fmt.Errorf("restarting %s: %w", s.rt.Name(), err)
	}
	return nil
}

// StartPlugin starts spec as an external plugin connected to the sandbox's
// NRI socket. Its log, its configuration and whatever its Args put in
// PluginDir live in <run dir>/plugins/<idx>-<name>; starting the same spec
// again (after Plugin.Kill or Stop) reuses that directory and appends to the
// log.
//
// With LaunchByRuntime it lays spec out as `make install` does instead (the
// suite's plugins through deployments/preregistered/install.sh, with
// install.sh's helpers found next to spec.Binary; others by hand), with
// spec.Config as its NN-name.conf in place of the shipped one, restarts the
// runtime and returns once the runtime has launched it, connected and
// ready (see LaunchByRuntime).
func (s *Sandbox) StartPlugin(spec PluginSpec) (*Plugin, error) {
	if s.opts.Launch == LaunchByRuntime {
		return s.startByRuntime(spec)
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	dir := s.PluginDir(spec)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating directory of plugin %s: %w", spec.Name, err)
	}
	configPath := ""
	if len(spec.Config) > 0 {
		configPath = filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(configPath, spec.Config, 0o644); err != nil {
			return nil, fmt.Errorf("writing configuration of plugin %s: %w", spec.Name, err)
		}
	}
	p, err := startProcess(command{name: "plugin " + spec.Name, logPath: filepath.Join(dir, "plugin.log"),
		argv: pluginArgs(spec, s.nri.Socket, configPath, s.SharedDir(), dir)})
	if err != nil {
		return nil, err
	}
	s.log.WithFields(logrus.Fields{"plugin": spec.Name, "pid": p.PID()}).Info("plugin started")
	plugin := &Plugin{Spec: spec, LogPath: p.logPath, process: p}
	s.mu.Lock()
	s.plugins = append(s.plugins, plugin)
	s.mu.Unlock()
	return plugin, nil
}

// PluginNamed returns the running plugin started with that name,
// the newest if it was restarted; nil if none.
func (s *Sandbox) PluginNamed(name string) *Plugin {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.plugins) - 1; i >= 0; i-- {
		if p := s.plugins[i]; p.Spec.Name == name && p.Running() {
			return p
		}
	}
	return nil
}

// PluginDir is the private directory of a plugin in the run dir, what
// PluginDir in its Args stands for; StartPlugin makes it in either Launch.
func (s *Sandbox) PluginDir(spec PluginSpec) string {
	return filepath.Join(s.dir, "plugins", spec.id())
}

// SharedDir is the shared state directory of the plugins StartPlugin starts:
// their status records and what they publish for each other. External ones
// get <run dir>/shared (--shared-dir); those the runtime launches get no
// flags and use the host's default, state.DefaultDir (see
// preRegisteredHostDirs).
func (s *Sandbox) SharedDir() string {
	if s.opts.Launch == LaunchByRuntime {
		return state.DefaultDir
	}
	return filepath.Join(s.dir, "shared")
}

// Close tears the sandbox down: plugins, kubelet, every pod through CRI, the
// runtime, then whatever is left by PID, mount and cgroup; it restores the
// host's sysctls and removes the host directories the run created. It is
// safe to call more than once.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	plugins := s.plugins
	s.mu.Unlock()

	start := time.Now()
	var errs []error
	for _, p := range plugins {
		p.Stop(3 * time.Second)
		if l, ok := p.process.(*launched); ok {
			l.release()
		}
	}
	s.kubelet.stop(10 * time.Second)
	if s.cri != nil && s.rt.PID() != 0 {
		// A runtime that was killed just before may not be reaped yet: its
		// CRI then fails, and the host cleanup below does the work by PID.
		if err := s.removeAllPods(); err != nil && !s.runtimeExits(time.Second) {
			errs = append(errs, err)
		}
	}
	if err := s.rt.Stop(context.Background(), 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := s.cluster.close(); err != nil {
		errs = append(errs, err)
	}
	if s.dir != "" {
		if err := hostCleanup(s.dir, s.host, s.opts.KeepRunDir, s.log); err != nil {
			errs = append(errs, err)
		}
	}
	if s.lock != nil {
		s.lock.Close()
	}
	s.log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("sandbox torn down")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down sandbox: %w", err)
	}
	return nil
}

// runtimeExits reports whether the runtime daemon is gone within d.
func (s *Sandbox) runtimeExits(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.rt.PID() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// removeAllPods stops and removes every pod sandbox, so that the runtime
// stops the containers and their shims exit.
func (s *Sandbox) removeAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pods, err := s.cri.PodSandboxes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if err := s.cri.RemovePodSandbox(ctx, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what the sandbox left on the host after Close: processes,
// mounts, cgroups, changed sysctls, host directories, the run dir. Empty
// means the host is as it was.
func (s *Sandbox) Leftovers() []string {
	if s.dir == "" {
		return nil
	}
	return leftovers(s.dir, s.host, s.opts.KeepRunDir)
}
