// Command nri-security confines every container in the runtime: the runtime
// default seccomp profile for containers that would run unconfined, named
// profiles by annotation, complain mode to try them, a user-namespace
// policy, and a validator that refuses what other NRI plugins do to weaken a
// container. See README.md.
package main

import (
	"flag"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/security/nriplugin"
)

func main() {
	opts := nriplugin.Options{Proc: "/proc"}
	validate := true
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&opts.Proc, "proc", opts.Proc, "proc file system in which the host's namespaces are found (/proc/1/ns)")
		fs.BoolVar(&validate, "validator", validate,
			"also validate other plugins' adjustments (left out anyway on runtimes whose NRI predates validation, such as CRI-O v1.34)")
	}
	factory := func(deps plugin.Deps) (any, error) {
		opts.NoValidator = !validate
		return nriplugin.New(deps, opts)
	}
	plugin.Main(catalog.Security.Name, factory,
		plugin.WithIdx(catalog.Security.Index),
		plugin.WithHTTPAddr(catalog.Security.LoopbackAddr()),
		plugin.WithFlags(flags))
}
