// Command nri-sandbox is what `make run` starts: a real node (container
// runtime with NRI, standalone kubelet) on private sockets, the suite's
// plugin binaries connected as external plugins, and a demo workload of
// static pods. It prints what each plugin did to each container and serves
// until SIGINT or SIGTERM (or exits after the report with --once), then
// tears everything down.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

type options struct {
	runtime     string
	baseDir     string
	workload    string
	plugins     []string
	configs     map[string]string // plugin name -> config file
	once        bool
	waitTimeout time.Duration
	logLevel    string
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "nri-sandbox:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout); err != nil {
		// An interrupt while starting is how a person stops `make run`
		// early: after the teardown, that is not a failure.
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "nri-sandbox: interrupted")
			return
		}
		fmt.Fprintln(os.Stderr, "nri-sandbox:", err)
		os.Exit(1)
	}
}

// repeated collects a flag given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func parseFlags(args []string, errOut io.Writer) (options, error) {
	fs := flag.NewFlagSet("nri-sandbox", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var opts options
	var plugins, configs repeated
	fs.StringVar(&opts.runtime, "runtime", "containerd", "container runtime: "+strings.Join(sandbox.RuntimeNames(), ", "))
	fs.StringVar(&opts.baseDir, "base-dir", "/run", "directory for the sandbox's run dir (keep it short: socket paths)")
	fs.StringVar(&opts.workload, "workload", "e2e/runtime/testdata/demo", "directory of static pod manifests (*.yaml)")
	fs.Var(&plugins, "plugin", "plugin binary to connect as an external plugin (repeatable); its name is the file name without \"nri-\"")
	fs.Var(&configs, "plugin-config", "NAME=FILE: configuration file of plugin NAME (repeatable)")
	fs.BoolVar(&opts.once, "once", false, "exit after the report instead of serving until interrupted")
	fs.DurationVar(&opts.waitTimeout, "wait", 2*time.Minute, "how long to wait for the sandbox and the workload")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level of the sandbox (stderr)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q: every input is a flag", fs.Args())
	}
	opts.plugins = plugins
	opts.configs = map[string]string{}
	for _, c := range configs {
		name, file, ok := strings.Cut(c, "=")
		if !ok || name == "" || file == "" {
			return options{}, fmt.Errorf("flag --plugin-config %q: expected NAME=FILE", c)
		}
		opts.configs[name] = file
	}
	return opts, nil
}

// pluginSpecs turns the plugin flags into specs with names, indexes and
// configurations.
func pluginSpecs(opts options) ([]sandbox.PluginSpec, error) {
	specs := make([]sandbox.PluginSpec, 0, len(opts.plugins))
	used := map[string]bool{}
	next := 50
	for _, bin := range opts.plugins {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return nil, fmt.Errorf("flag --plugin %q: %w", bin, err)
		}
		name := strings.TrimPrefix(filepath.Base(abs), "nri-")
		if used[name] {
			return nil, fmt.Errorf("flag --plugin %q: plugin %s given twice", bin, name)
		}
		used[name] = true
		idx, ok := knownIdx[name]
		if !ok {
			idx = fmt.Sprintf("%02d", next)
			next++
		}
		spec := sandbox.PluginSpec{Binary: abs, Name: name, Idx: idx, Args: knownArgs(name)}
		if file, ok := opts.configs[name]; ok {
			if spec.Config, err = os.ReadFile(file); err != nil {
				return nil, fmt.Errorf("reading configuration of plugin %s: %w", name, err)
			}
		}
		specs = append(specs, spec)
	}
	for name := range opts.configs {
		if !used[name] {
			return nil, fmt.Errorf("flag --plugin-config: no --plugin named %s", name)
		}
	}
	return specs, nil
}

func run(ctx context.Context, opts options, out io.Writer) (err error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	level, err := logrus.ParseLevel(opts.logLevel)
	if err != nil {
		return fmt.Errorf("flag --log-level: %w", err)
	}
	log.SetLevel(level)
	specs, err := pluginSpecs(opts)
	if err != nil {
		return err
	}
	pods, err := sandbox.LoadPods(opts.workload)
	if err != nil {
		return err
	}

	startCtx, cancel := context.WithTimeout(ctx, opts.waitTimeout)
	defer cancel()
	// The shipped containerd drop-in refuses containers while security is
	// not connected: without it, the demo's pods tolerate its absence.
	withoutSecurity := !slices.ContainsFunc(specs, func(s sandbox.PluginSpec) bool { return s.Name == "security" })
	sb, err := sandbox.Start(startCtx, sandbox.Options{Runtime: opts.runtime, BaseDir: opts.baseDir, Log: log,
		TolerateMissingPlugins: withoutSecurity})
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := sb.Close(); closeErr != nil {
			log.WithError(closeErr).Error("tearing down the sandbox")
			err = errors.Join(err, closeErr)
		}
	}()
	fmt.Fprintf(out, "sandbox: runtime %s, run dir %s, NRI socket %s, node %s\n",
		sb.Runtime().Name(), sb.Dir(), sb.NRI().Socket, sb.NodeName())

	if err := writeDemoDevice(sb); err != nil {
		return err
	}
	for _, spec := range specs {
		if spec.Config == nil {
			spec.Config = sandboxConfig(spec, specs, sb)
		}
		p, err := sb.StartPlugin(spec)
		if err != nil {
			return err
		}
		// External plugins register asynchronously; a pod created before a
		// plugin is ready would miss its adjustments.
		if err := p.WaitReady(startCtx); err != nil {
			return err
		}
		fmt.Fprintf(out, "plugin %s: idx %s, pid %d, http %s, log %s\n", spec.Name, spec.Idx, p.PID(), p.HTTPAddr(), p.LogPath)
	}

	var runnable []*corev1.Pod
	for _, pod := range pods {
		if reason := sb.CannotRun(pod); reason != "" {
			fmt.Fprintf(out, "pod %s/%s: left out on %s: %s\n", pod.Namespace, pod.Name, sb.Runtime().Name(), reason)
			continue
		}
		runnable = append(runnable, pod)
	}
	workload, err := startWorkload(startCtx, sb, runnable)
	if err != nil {
		return err
	}
	if err := printReport(startCtx, out, sb, workload); err != nil {
		return err
	}
	if opts.once {
		return nil
	}
	fmt.Fprintln(out, "serving; interrupt (Ctrl-C) or SIGTERM to tear down")
	<-ctx.Done()
	fmt.Fprintln(out, "tearing down")
	return nil
}
