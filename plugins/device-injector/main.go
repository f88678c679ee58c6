// Command nri-device-injector gives containers the CDI devices, host device
// nodes and mounts their pods ask for by annotation, resolving CDI names
// itself on runtimes that drop NRI's CDI adjustments, checks every request
// against a per-namespace policy, and publishes where each device sits
// (NUMA node, local CPUs) for topology-aware. See README.md.
package main

import (
	"flag"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/device-injector/nriplugin"
)

func main() {
	opts := nriplugin.Options{SysfsRoot: sysfs.DefaultRoot}
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&opts.SysfsRoot, "sysfs-root", opts.SysfsRoot,
			"sysfs tree where the NUMA node and local CPUs of injected devices are looked up")
	}
	factory := func(deps plugin.Deps) (any, error) { return nriplugin.New(deps, opts) }
	plugin.Main(catalog.DeviceInjector.Name, factory,
		plugin.WithIdx(catalog.DeviceInjector.Index),
		plugin.WithHTTPAddr(catalog.DeviceInjector.LoopbackAddr()),
		plugin.WithFlags(flags))
}
