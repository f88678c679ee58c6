// Command nri-topology-aware places containers on CPUs, memory nodes and
// devices of one NUMA topology: exclusive CPUs for Guaranteed containers,
// a shared pool for the others, memory on the nodes of the CPUs, alignment
// with the containers' devices, and placements that survive restarts. See
// README.md. `nri-topology-aware simulate ...` runs a workload through the
// same policy offline instead (package simulate).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/simulate"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "simulate" {
		os.Exit(simulate.Main(os.Args[2:]))
	}
	opts := nriplugin.Options{
		SysfsRoot: sysfs.DefaultRoot,
		StateDir:  nriplugin.DefaultStateDir,
	}
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&opts.SysfsRoot, "sysfs-root", opts.SysfsRoot,
			"sysfs tree to discover the topology and device locality from (a recorded machine's tree works too)")
		fs.StringVar(&opts.StateDir, "state-dir", opts.StateDir,
			"directory of the checkpoint; keep it on a tmpfs so that it survives plugin and runtime restarts but not a reboot")
		fs.BoolVar(&opts.PublishNRT, "node-resource-topology", opts.PublishNRT,
			"publish the node's NodeResourceTopology (topology.node.k8s.io/v1alpha2) through the API server (--kubeconfig, or the pod's service account)")
	}
	factory := func(deps plugin.Deps) (any, error) {
		if err := plugin.CheckAbsPath("--sysfs-root", opts.SysfsRoot); err != nil {
			return nil, err
		}
		topo, err := sysfs.Discover(opts.SysfsRoot)
		if err != nil {
			return nil, fmt.Errorf("--sysfs-root: %w", err)
		}
		opts.Topology = topo
		opts.Classes = classes.NewNode(deps.Log, classes.NodeOptions{RDT: true, BlockDevices: true})
		return nriplugin.New(deps, opts)
	}
	plugin.Main(catalog.TopologyAware.Name, factory,
		plugin.WithIdx(catalog.TopologyAware.Index),
		plugin.WithHTTPAddr(catalog.TopologyAware.LoopbackAddr()),
		plugin.WithFlags(flags))
}
