package simulate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	sysfs, topology, config, workload, html string
	summary                                 bool
}

// Run is Main with its output streams: the report goes to stdout, errors
// to stderr, one a line.
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
		for _, e := range flatten(err) {
			fmt.Fprintf(stderr, "nri-topology-aware simulate: %v\n", e)
		}
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
	fs.BoolVar(&o.summary, "summary", false, "print a text summary, with the use of every NUMA node at the peak and at the end, instead of JSON")
	fs.StringVar(&o.html, "html", "", "also write a placement map of the end of the run to this HTML file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: nri-topology-aware simulate --sysfs DIR | --topology FILE [--config FILE] --workload FILE [--summary] [--html FILE]")
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
	var config []byte
	if o.config != "" {
		if config, err = os.ReadFile(o.config); err != nil {
			return fmt.Errorf("--config: %w", err)
		}
	}
	w, err := Load(o.workload)
	if err != nil {
		return err
	}
	sim, err := New(m, config, o.config)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sim.Close()) }()
	var sinks sinks
	if o.summary {
		sinks = append(sinks, newSummarySink(stdout))
	} else {
		sinks = append(sinks, newJSONSink(stdout))
	}
	if o.html != "" {
		sinks = append(sinks, &htmlSink{path: o.html, topo: m.Topology})
	}
	return sim.Run(w, sinks)
}

// sinks writes every record to each sink.
type sinks []Sink

func (s sinks) Write(r Record) error {
	var errs []error
	for _, sink := range s {
		errs = append(errs, sink.Write(r))
	}
	return errors.Join(errs...)
}
