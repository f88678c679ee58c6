// Command nri-sandbox is what `make run` starts: a one-node Kubernetes
// cluster (etcd, kube-apiserver, controller-manager, scheduler, a kubelet on
// containerd or CRI-O with NRI) in a network namespace of its own, the
// suite installed with its Helm chart from the images `make images` wrote,
// and a demo workload applied through the API (a Deployment, a Guaranteed
// pod and a Job with a native sidecar). It prints what each plugin did to
// each container and how to reach the cluster from the host, and serves
// until SIGINT or SIGTERM (or exits after the report with --once), then
// tears everything down.
//
// `nri-sandbox report --kubeconfig FILE --pod NAMESPACE/NAME` prints the
// same report for one pod of the running cluster, such as one applied with
// kubectl.
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
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/version"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
)

type options struct {
	runtime        string
	baseDir        string
	images         string
	chart          string
	workload       string
	kubeconfigLink string
	kubectlScript  string
	once           bool
	version        bool
	waitTimeout    time.Duration
	logLevel       string
}

// reportOptions are those of `nri-sandbox report`.
type reportOptions struct {
	kubeconfig     string
	namespace      string
	pod            string
	sharedDir      string
	suiteNamespace string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// An interrupt while starting is how a person stops `make run`
		// early: after the teardown, that is not a failure.
		fmt.Fprintln(os.Stderr, "nri-sandbox: interrupted")
	default:
		fmt.Fprintln(os.Stderr, "nri-sandbox:", err)
		os.Exit(1)
	}
}

// dispatch runs the report subcommand or the sandbox, as args say.
func dispatch(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "report" {
		opts, err := parseReportFlags(args[1:], os.Stderr)
		if err != nil {
			return err
		}
		return reportPod(ctx, opts, os.Stdout)
	}
	opts, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if opts.version {
		_, err := fmt.Fprintln(os.Stdout, version.Line("nri-sandbox"))
		return err
	}
	return run(ctx, opts, os.Stdout)
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	fs := flag.NewFlagSet("nri-sandbox", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var opts options
	fs.StringVar(&opts.runtime, "runtime", "containerd", "container runtime: "+strings.Join(sandbox.RuntimeNames(), ", "))
	fs.StringVar(&opts.baseDir, "base-dir", "/run", "directory for the sandbox's run dir (keep it short: socket paths)")
	fs.StringVar(&opts.images, "images", "_out/images", "directory of the plugin images `make images` wrote (nri-*.tar)")
	fs.StringVar(&opts.chart, "chart", suite.ChartDir, "the suite's Helm chart")
	fs.StringVar(&opts.workload, "workload", "e2e/runtime/testdata/demo", "directory of manifests (*.yaml: a Pod, Deployment or Job each), applied in file name order")
	fs.StringVar(&opts.kubeconfigLink, "kubeconfig-link", "", "symlink to make to the cluster's kubeconfig while it serves (none if empty)")
	fs.StringVar(&opts.kubectlScript, "kubectl-script", "", "kubectl wrapper script to write for the cluster while it serves (none if empty)")
	fs.BoolVar(&opts.once, "once", false, "exit after the report instead of serving until interrupted")
	fs.DurationVar(&opts.waitTimeout, "wait", 5*time.Minute, "how long to wait for the host lock, the cluster, the suite and the workload")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level of the sandbox (stderr)")
	fs.BoolVar(&opts.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q: every input is a flag (or the subcommand report)", fs.Args())
	}
	return opts, nil
}

func parseReportFlags(args []string, errOut io.Writer) (reportOptions, error) {
	fs := flag.NewFlagSet("nri-sandbox report", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var opts reportOptions
	var pod string
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (make run links it at _out/kubeconfig)")
	fs.StringVar(&pod, "pod", "", "the pod to report on, as NAMESPACE/NAME (or NAME in namespace default)")
	fs.StringVar(&opts.sharedDir, "shared-dir", state.DefaultDir, "the plugins' shared state directory on this node (the chart's sharedDir)")
	fs.StringVar(&opts.suiteNamespace, "suite-namespace", suite.Release, "namespace of the suite's DaemonSets")
	if err := fs.Parse(args); err != nil {
		return reportOptions{}, err
	}
	if fs.NArg() > 0 {
		return reportOptions{}, fmt.Errorf("report: unexpected arguments %q: every input is a flag", fs.Args())
	}
	if opts.kubeconfig == "" {
		return reportOptions{}, errors.New("report: flag --kubeconfig is empty, expected the cluster's kubeconfig")
	}
	var err error
	if opts.namespace, opts.pod, err = parsePodRef(pod); err != nil {
		return reportOptions{}, fmt.Errorf("report: flag --pod: %w", err)
	}
	return opts, nil
}

// parsePodRef splits NAMESPACE/NAME; a bare NAME is in namespace default.
func parsePodRef(ref string) (namespace, name string, err error) {
	namespace, name, found := strings.Cut(ref, "/")
	if !found {
		namespace, name = "default", ref
	}
	if namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: expected NAMESPACE/NAME or NAME", ref)
	}
	return namespace, name, nil
}

func run(ctx context.Context, opts options, out io.Writer) (err error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	level, err := logrus.ParseLevel(opts.logLevel)
	if err != nil {
		return fmt.Errorf("flag --log-level: %w", err)
	}
	log.SetLevel(level)
	images, err := suite.LoadImages(opts.images)
	if err != nil {
		return err
	}
	workload, err := loadWorkload(opts.workload)
	if err != nil {
		return err
	}

	startCtx, cancel := context.WithTimeout(ctx, opts.waitTimeout)
	defer cancel()
	sb, err := sandbox.Start(startCtx, sandbox.Options{Runtime: opts.runtime, BaseDir: opts.baseDir, Log: log,
		Cluster: true, Images: images})
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := sb.Close(); closeErr != nil {
			log.WithError(closeErr).Error("tearing down the sandbox")
			err = errors.Join(err, closeErr)
		}
	}()
	fmt.Fprintf(out, "sandbox: runtime %s, run dir %s, node %s\n", sb.Runtime().Name(), sb.Dir(), sb.NodeName())

	pods, err := deploy(startCtx, sb, opts.chart, workload, out)
	if err != nil {
		return err
	}
	rep, err := newReporter(sb.Kubeconfig(), state.DefaultDir, suite.Release)
	if err != nil {
		return err
	}
	if err := rep.print(startCtx, out, pods); err != nil {
		return err
	}

	access, err := writeAccess(sb, opts)
	if err != nil {
		return err
	}
	defer access.remove(log)
	access.printUsage(out, pods)
	if opts.once {
		return nil
	}
	fmt.Fprintln(out, "serving; interrupt (Ctrl-C) or SIGTERM to tear down")
	<-ctx.Done()
	fmt.Fprintln(out, "tearing down")
	return nil
}

// deploy installs the demo device and the suite into the sandbox and
// applies the workload, but what the runtime cannot run here, and returns
// the workload's pods.
func deploy(ctx context.Context, sb *sandbox.Sandbox, chart string, workload []manifest, out io.Writer) ([]corev1.Pod, error) {
	if err := writeDemoDevice(sb); err != nil {
		return nil, err
	}
	daemonSets, err := suite.Install(ctx, sb, chart)
	if err != nil {
		return nil, err
	}
	for _, ds := range daemonSets {
		fmt.Fprintf(out, "daemonset %s/%s: %d of %d pods ready\n", ds.Namespace, ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
	}
	// kubectl top, from nri-stats in the kubelet's place.
	if err := sb.StartMetricsServer(ctx, sandbox.MetricsServerOptions{KubeletPort: suite.StatsPort, KubeletCAFile: sb.PKI().CACert}); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "metrics-server: reads nri-stats on the node's port %d\n", suite.StatsPort)
	var runnable []manifest
	for _, m := range workload {
		if reason := sb.CannotRun(m.pod); reason != "" {
			fmt.Fprintf(out, "%s: left out on %s: %s\n", m.describe(), sb.Runtime().Name(), reason)
			continue
		}
		runnable = append(runnable, m)
	}
	return applyWorkload(ctx, sb, runnable, out)
}

// reportPod is `nri-sandbox report`: the report on one pod of a running cluster.
func reportPod(ctx context.Context, opts reportOptions, out io.Writer) error {
	rep, err := newReporter(opts.kubeconfig, opts.sharedDir, opts.suiteNamespace)
	if err != nil {
		return err
	}
	pod, err := rep.pod(ctx, opts.namespace, opts.pod)
	if err != nil {
		return err
	}
	return rep.printPod(ctx, out, pod)
}

// The demo device: a CDI spec in the sandbox's spec directory that gives
// /dev/null to containers as /dev/demo-null, with an env variable, so that
// device-injector has something to inject on any machine.
const (
	demoDevice     = "nri-suite.io/demo=null"
	demoDeviceSpec = `cdiVersion: 0.6.0
kind: nri-suite.io/demo
devices:
  - name: "null"
    containerEdits:
      deviceNodes:
        - path: /dev/demo-null
          hostPath: /dev/null
      env:
        - NRI_SUITE_DEMO_DEVICE=null
`
)

// writeDemoDevice installs the demo device's CDI spec in the sandbox.
func writeDemoDevice(sb *sandbox.Sandbox) error {
	path := filepath.Join(sb.CDISpecDir(), "nri-suite-demo.yaml")
	if err := os.WriteFile(path, []byte(demoDeviceSpec), 0o644); err != nil {
		return fmt.Errorf("writing the demo device's CDI spec: %w", err)
	}
	return nil
}
