// Command nri-stats serves container, pod and node metrics read from the
// containers' cgroups under cAdvisor's and the kubelet's metric names,
// labelled from NRI with the Kubernetes names, plus the suite's view of each
// container (placement, device health) and the other plugins' readiness.
// It only observes (NRI index 90, last). See README.md.
package main

import (
	"flag"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/stats/nriplugin"
)

func main() {
	opts := nriplugin.DefaultOptions()
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&opts.CgroupRoot, "cgroup-root", opts.CgroupRoot, "where the host's cgroups are mounted (v1 controllers, hybrid or v2)")
		fs.StringVar(&opts.ResctrlRoot, "resctrl-root", opts.ResctrlRoot, "where the host's resctrl filesystem is mounted, if it is: the containers' cache occupancy and memory bandwidth are read there")
		fs.StringVar(&opts.HostRoot, "host-root", opts.HostRoot, "where the host's root filesystem is seen, with its mounts: the usage of the node's filesystems (container_fs_usage_bytes and limit, inodes) is read there; empty: not read")
		fs.StringVar(&opts.Machine.Etc, "host-etc", opts.Machine.Etc, "where the host's machine-id and os-release are (machine_* labels, cadvisor_version_info)")
		fs.StringVar(&opts.Server.Addr, "stats-addr", opts.Server.Addr, "address of /metrics/cadvisor, /metrics/resource, /metrics and /stats/pods, the only endpoints with container metrics; empty disables")
		fs.BoolVar(&opts.Server.CAdvisor, "stats-cadvisor", opts.Server.CAdvisor, "serve /metrics/cadvisor; false leaves the cAdvisor-named series to the kubelet's")
		opts.Server.Auth.AddFlags(fs)
	}
	factory := func(deps plugin.Deps) (any, error) { return nriplugin.New(deps, opts) }
	plugin.Main(catalog.Stats.Name, factory,
		plugin.WithIdx(catalog.Stats.Index),
		plugin.WithHTTPAddr(catalog.Stats.LoopbackAddr()),
		plugin.WithFlags(flags))
}
