package simulate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nri-suite/nri-suite/plugins/topology-aware/config"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// Exit codes of the simulate subcommand.
const (
	ExitOK      = 0
	ExitFailure = 1 // unreadable or invalid input, a violated invariant
	ExitUsage   = 2 // bad flags
)

// errUsage marks errors in the command line.
var errUsage = errors.New("usage")

// Main runs `nri-topology-aware simulate` with args (without the
// subcommand) and returns the exit code.
func Main(args []string) int {
	return Run(args, os.Stdout, os.Stderr)
}

// options are the subcommand's flags.
type options struct {
	sysfs, topology, config, workload string
	summary                           bool
}

// Run is Main with its output streams: the report goes to stdout, errors
// to stderr.
func Run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "nri-topology-aware simulate: %v\n", err)
		return ExitUsage
	}
	if err := run(opts, stdout); err != nil {
		fmt.Fprintf(stderr, "nri-topology-aware simulate: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.sysfs, "sysfs", "", "sysfs tree of the machine (/sys, or a recorded machine's tree); exclusive with --topology")
	fs.StringVar(&o.topology, "topology", "", "topology description (YAML, common/topology/description) of the machine; exclusive with --sysfs")
	fs.StringVar(&o.config, "config", "", "the plugin's configuration file (default: the built-in defaults)")
	fs.StringVar(&o.workload, "workload", "", "workload file: the steps to run (required)")
	fs.BoolVar(&o.summary, "summary", false, "print a text summary instead of JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nri-topology-aware simulate --sysfs DIR | --topology FILE [--config FILE] --workload FILE [--summary]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("%w: unexpected argument %q: expected only flags", errUsage, fs.Arg(0))
	case (o.sysfs == "") == (o.topology == ""):
		return o, fmt.Errorf("%w: expected exactly one of --sysfs DIR or --topology FILE", errUsage)
	case o.workload == "":
		return o, fmt.Errorf("%w: --workload FILE is required", errUsage)
	}
	return o, nil
}

func run(o options, stdout io.Writer) (err error) {
	var m *Machine
	if o.sysfs != "" {
		m, err = MachineFromSysfs(o.sysfs)
	} else {
		m, err = MachineFromDescription(o.topology)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	cfg, err := loadConfig(o.config, m)
	if err != nil {
		return err
	}
	w, err := Load(o.workload)
	if err != nil {
		return err
	}
	sim, err := New(m, cfg)
	if err != nil {
		return err
	}
	report, err := sim.Run(w)
	if err != nil {
		return fmt.Errorf("workload %s: %w", o.workload, err)
	}
	if o.summary {
		return report.WriteSummary(stdout)
	}
	return report.WriteJSON(stdout)
}

// loadConfig reads the plugin's configuration as the plugin does, checked
// against the machine.
func loadConfig(path string, m *Machine) (policy.Config, error) {
	var data []byte
	source := "built-in defaults"
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return policy.Config{}, fmt.Errorf("--config: %w", err)
		}
		source = path
	}
	cfg, err := config.Load(data, source, m.Topology)
	return cfg.Config, err
}
