// Package nriplugin is the stats plugin's NRI side: it observes every pod
// and container event (it never adjusts anything) to keep the inventory the
// collector reads, and owns the collector and the stats endpoints.
package nriplugin

import (
	"context"
	"fmt"
	"slices"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/endpointauth"
	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
	"github.com/nri-suite/nri-suite/plugins/stats/config"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/machine"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/nodefs"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/resctrl"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/server"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

// Options are the plugin's flags.
type Options struct {
	// CgroupRoot is where the host's cgroups are mounted.
	CgroupRoot string
	// ProcSwaps is the host's /proc/swaps: without swap, v1's memsw files
	// are not read.
	ProcSwaps string
	// ProcMeminfo is the host's /proc/meminfo: on v2 the root cgroup's
	// memory usage (node_memory_working_set_bytes) comes from it.
	ProcMeminfo string
	// SysBlock is the host's /sys/block, where the block devices of the
	// block I/O series get their names; empty: they have none.
	SysBlock string
	// ResctrlRoot is where the host's resctrl filesystem is mounted: the
	// containers' monitoring groups are read there, where it has them.
	ResctrlRoot string
	// Proc is the host's /proc (the plugin runs in the host's PID
	// namespace): the node's and the pod sandboxes' network counters are
	// read from <pid>/net/dev there, and the open files of the cgroups'
	// processes counted in <pid>/fd; empty: neither is.
	Proc string
	// HostRoot is where the host's root filesystem is seen, with its
	// mounts: the node's filesystems' usage is read there (statfs); empty:
	// only their disks' counters are served.
	HostRoot string
	// Machine is where the node's machine info is read, at start.
	Machine machine.Paths
	// Server is the stats endpoints' listener.
	Server server.Options
}

// DefaultOptions are the flags' defaults: the host's files where the
// plugin runs on the host, the stats listener on loopback.
func DefaultOptions() Options {
	return Options{CgroupRoot: cgstats.DefaultRoot, ProcSwaps: "/proc/swaps", ProcMeminfo: cgstats.DefaultMeminfo,
		SysBlock: cgstats.DefaultSysBlock, ResctrlRoot: resctrl.DefaultRoot, Proc: "/proc", HostRoot: "/",
		Machine: machine.Paths{Sys: machine.DefaultSys, Proc: machine.DefaultProc, Etc: machine.DefaultEtc},
		Server:  server.Options{Addr: server.DefaultAddr, Auth: endpointauth.Options{Listener: server.Listener}, CAdvisor: true}}
}

// Plugin observes the runtime and serves the stats.
type Plugin struct {
	log       *logrus.Entry
	inv       *inventory.Inventory
	collector *collect.Collector
	listener  *listener
}

// New detects the cgroup layout, registers the operational metrics on the
// runner's registry and starts the stats endpoints, which serve the rest.
func New(deps plugin.Deps, opts Options) (*Plugin, error) {
	if err := plugin.CheckAbsPath("--cgroup-root", opts.CgroupRoot); err != nil {
		return nil, fmt.Errorf("create stats plugin: %w", err)
	}
	if err := opts.Server.Check(); err != nil {
		return nil, fmt.Errorf("create stats plugin: %w", err)
	}
	layout, err := cgstats.Detect(opts.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("--cgroup-root: %w", err)
	}
	swap, err := cgstats.SwapActive(opts.ProcSwaps)
	if err != nil {
		deps.Log.WithError(err).Warn("assuming swap is on")
		swap = true
	}
	reader, err := cgstats.NewReader(layout, cgstats.Options{Swap: swap, SpecMaxAge: cgstats.DefaultSpecMaxAge, Meminfo: opts.ProcMeminfo,
		SysBlock: opts.SysBlock, Proc: opts.Proc})
	if err != nil {
		return nil, err
	}
	if err := plugin.CheckAbsPath("--resctrl-root", opts.ResctrlRoot); err != nil {
		return nil, fmt.Errorf("create stats plugin: %w", err)
	}
	if err := plugin.CheckAbsPath("--host-etc", opts.Machine.Etc); err != nil {
		return nil, fmt.Errorf("create stats plugin: %w", err)
	}
	if opts.HostRoot != "" {
		if err := plugin.CheckAbsPath("--host-root", opts.HostRoot); err != nil {
			return nil, fmt.Errorf("create stats plugin: %w", err)
		}
	}
	p := &Plugin{log: deps.Log, inv: inventory.New()}
	copts := collect.DefaultOptions()
	copts.SharedDir = deps.SharedDir
	copts.Resctrl = resctrl.NewReader(opts.ResctrlRoot)
	copts.Proc = opts.Proc
	copts.Machine, copts.Version = readMachine(opts.Machine, deps.Log)
	copts.Filesystems = readFilesystems(opts, deps.Log)
	if p.collector, err = collect.New(p.inv, reader, copts, deps.MetricsNamespace, deps.Log); err != nil {
		return nil, err
	}
	// The runner's listener has no authentication: it gets the series that
	// name no pod, namespace or container, and only those. The others are
	// served by the stats listener alone, behind its TLS and authentication.
	denied := endpointauth.NewMetrics(deps.MetricsNamespace)
	operational := slices.Concat([]prometheus.Collector{collect.NewSuiteNode(p.collector, deps.MetricsNamespace)},
		p.collector.Metrics(), denied.Collectors())
	if err := plugin.RegisterMetrics(deps.Registry, operational...); err != nil {
		return nil, fmt.Errorf("create stats plugin: %w", err)
	}
	deps.Log.WithFields(logrus.Fields{"mode": layout.Mode, "root": layout.Root, "unified": layout.Unified, "swap": swap,
		"resctrl_monitoring": copts.Resctrl != nil}).Info("reading container stats from the host's cgroups")
	if opts.Server.Addr == "" {
		deps.Log.Info("--stats-addr is empty: no container metrics are served")
		return p, nil
	}
	suiteReg := prometheus.NewRegistry()
	if err := plugin.RegisterMetrics(suiteReg, append(operational, collect.NewSuiteContainers(p.collector, deps.MetricsNamespace))...); err != nil {
		return nil, fmt.Errorf("create stats plugin: suite endpoint: %w", err)
	}
	endpoints := server.Endpoints{
		CAdvisor: collect.NewCAdvisor(p.collector), Resource: registryOf(collect.NewResource(p.collector)), Suite: suiteReg,
		Pods: func() any { return collect.NewReport(p.collector.Snapshot()) },
	}
	cluster := endpointauth.Cluster{Kubeconfig: deps.Kubeconfig, NodeName: deps.NodeName}
	p.listener = serve(func() (*server.Server, error) {
		return server.Start(opts.Server, cluster, endpoints, denied, deps.Log)
	}, deps.NotReady, deps.Log)
	return p, nil
}

func registryOf(c prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return reg
}

// SetRuntime implements plugin.RuntimeAware: the runtime decides the
// container label of the sandboxes' network series.
func (p *Plugin) SetRuntime(name, _ string) { p.collector.SetRuntime(name) }

// Configure implements plugin.Configurable.
func (p *Plugin) Configure(data []byte, source string) error {
	cfg, err := config.Parse(data, source)
	if err != nil {
		return err
	}
	p.collector.Configure(cfg.Cache, cfg.Interval, cfg.Workers)
	p.log.WithFields(logrus.Fields{"cache": cfg.Cache, "interval": cfg.Interval, "workers": cfg.Workers}).Info("configured stats collection")
	return nil
}

// Synchronize rebuilds the inventory from what the runtime runs now.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	p.inv.Replace(pods, containers)
	p.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(containers)}).Info("inventory rebuilt from the runtime")
	return nil, nil
}

// RunPodSandbox adds a pod.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.inv.SetPod(pod)
	return nil
}

// StopPodSandbox stops reading the pod's network counters: its sandbox
// process is gone.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.inv.StopPod(pod.GetId())
	return nil
}

// RemovePodSandbox forgets a pod.
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.inv.RemovePod(pod.GetId())
	return nil
}

// CreateContainer records a container; it is read once started.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.inv.SetContainer(pod, ctr)
	return nil, nil, nil
}

// StartContainer starts reading a container's cgroup.
func (p *Plugin) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.inv.SetContainer(pod, ctr)
	p.inv.SetRunning(ctr.GetId(), true)
	p.log.WithFields(k8s.IdentityOf(pod, ctr).Fields()).WithField("cgroup", ctr.GetLinux().GetCgroupsPath()).
		Info("reading the container's stats")
	return nil
}

// StopContainer stops reading a container's cgroup, which goes with it.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.inv.SetRunning(ctr.GetId(), false)
	p.log.WithFields(k8s.IdentityOf(pod, ctr).Fields()).Info("container stopped; no longer reading its stats")
	return nil, nil
}

// RemoveContainer forgets a container.
func (p *Plugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	p.inv.RemoveContainer(ctr.GetId())
	return nil
}

// Close stops the stats endpoints and the background reading.
func (p *Plugin) Close() error {
	p.collector.Close()
	if p.listener == nil {
		return nil
	}
	return p.listener.Close()
}

// readMachine reads the node's machine info once, as the kubelet does; a
// failure is logged and served as machine_scrape_error 1.
func readMachine(paths machine.Paths, log *logrus.Entry) (*machine.Info, *machine.Version) {
	version := machine.ReadVersion(paths.Etc)
	info, err := machine.Read(paths)
	if err != nil {
		log.WithError(err).Warn("no machine_* metrics")
		return nil, &version
	}
	log.WithFields(logrus.Fields{"cores": info.Cores, "memory_bytes": info.MemoryBytes, "machine_id": info.MachineID,
		"system_uuid": info.SystemUUID, "boot_id": info.BootID, "kernel": version.Kernel, "os": version.OS}).Info("machine info read")
	return info, &version
}

// readFilesystems lists the node's filesystems once, as the kubelet's
// cAdvisor does when it starts; nil (no container_fs_* series of the
// root) without the host's /proc.
func readFilesystems(opts Options, log *logrus.Entry) *nodefs.Reader {
	if opts.Proc == "" {
		return nil
	}
	r, err := nodefs.NewReader(nodefs.Paths{Proc: opts.Proc, Sys: opts.Machine.Sys, HostRoot: opts.HostRoot})
	if err != nil {
		log.WithError(err).Warn("no container_fs_* metrics of the node's filesystems")
		return nil
	}
	devices := make([]string, 0, len(r.Partitions()))
	for _, p := range r.Partitions() {
		devices = append(devices, p.Device)
	}
	log.WithFields(logrus.Fields{"filesystems": devices, "usage_read": opts.HostRoot != ""}).Info("node filesystems listed")
	return r
}
