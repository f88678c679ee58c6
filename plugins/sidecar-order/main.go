// Command nri-sidecar-order starts the main containers of an annotated pod
// after their sidecars are ready and stops the sidecars after their mains,
// by putting a static helper (nri-sidecar-helper) in front of each
// container's command. See README.md.
package main

import (
	"flag"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/nriplugin"
)

func main() {
	opts := nriplugin.Options{StateDir: nriplugin.DefaultStateDir}
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&opts.HelperPath, "helper", "",
			"static helper binary mounted into the containers (default: "+nriplugin.HelperName+" next to this binary)")
		fs.StringVar(&opts.StateDir, "state-dir", opts.StateDir,
			"directory of the pods' coordination directories")
	}
	factory := func(deps plugin.Deps) (any, error) { return nriplugin.New(deps, opts) }
	plugin.Main(catalog.SidecarOrder.Name, factory,
		plugin.WithIdx(catalog.SidecarOrder.Index),
		plugin.WithHTTPAddr(catalog.SidecarOrder.LoopbackAddr()),
		plugin.WithFlags(flags))
}
