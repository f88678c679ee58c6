package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/version"
)

// Option changes what Main does before the flags are parsed.
type Option func(*mainOptions)

type mainOptions struct {
	idx      string
	httpAddr string
	flags    []func(*flag.FlagSet)
}

// WithIdx sets the default of --idx, the plugin's place in the NRI order.
func WithIdx(idx string) Option {
	return func(o *mainOptions) { o.idx = idx }
}

// WithHTTPAddr sets the default of --http-addr; plugins pick distinct loopback ports.
func WithHTTPAddr(addr string) Option {
	return func(o *mainOptions) { o.httpAddr = addr }
}

// WithFlags lets the plugin add its own flags; their values are set before the Factory
// runs, so the Factory can read the variables they are bound to.
func WithFlags(add func(*flag.FlagSet)) Option {
	return func(o *mainOptions) { o.flags = append(o.flags, add) }
}

// Main runs the plugin of the given kind as the process: it parses os.Args, runs until
// SIGTERM or SIGINT and exits 0 after a clean stop, 1 on an error, 2 on bad usage.
// `nri-<plugin> probe URL` asks a running plugin's /readyz instead (see probe), and
// `nri-<plugin> uninstall ...` deletes the chart's DaemonSets (see uninstall).
func Main(plugin string, factory Factory, opts ...Option) {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:], os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	var code int
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		code = uninstall(ctx, os.Args[2:], os.Stdout)
	} else {
		code = runMain(ctx, plugin, factory, os.Args[1:], os.Stdout, logOutput(os.Stderr, PreRegisteredLogDir), opts...)
	}
	stop()
	os.Exit(code)
}

// runMain is Main without the process: it returns the exit code.
func runMain(ctx context.Context, plugin string, factory Factory, args []string, stdout, stderr io.Writer, opts ...Option) int {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := DefaultSettings(plugin)
	s.Idx, s.HTTPAddr, s.LogOutput = o.idx, o.httpAddr, stderr

	fs := flag.NewFlagSet("nri-"+plugin, flag.ContinueOnError)
	fs.SetOutput(stderr)
	s.AddFlags(fs)
	for _, add := range o.flags {
		add(fs)
	}
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Line("nri-"+plugin))
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nri-%s: unexpected arguments %q: expected flags only\n", plugin, fs.Args())
		return 2
	}

	r, err := New(s, factory)
	if err != nil {
		fmt.Fprintf(stderr, "nri-%s: %v\n", plugin, err)
		return 1
	}
	if err := r.Run(ctx); err != nil {
		logFailure(r.log, err)
		return 1
	}
	return 0
}

// reported is an error Run logged where it happened (a --config file that
// never applied): Main exits with it without printing it again.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// logFailure logs each of Run's errors that was not reported yet.
func logFailure(log *logrus.Entry, err error) {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, err := range errs {
		if !errors.As(err, new(reported)) {
			log.WithError(err).Error("plugin failed")
		}
	}
}
