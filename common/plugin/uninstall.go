package plugin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nri-suite/nri-suite/common/incluster"
)

// uninstallPollInterval is how often uninstall looks whether the
// DaemonSets are gone.
const uninstallPollInterval = 500 * time.Millisecond

// uninstall is `nri-<plugin> uninstall --namespace NS --selector SEL
// [--timeout D]`, the chart's pre-delete hook: it deletes the release's
// DaemonSets in the foreground and waits until they are gone, so that
// every plugin stops while its DaemonSet is being deleted and its service
// account still works, and so removes its node state (leaveNode). It exits
// 0 once they are gone, 1 on an error (helm uninstall then stops and says
// so; --no-hooks skips it) and 2 on bad usage.
func uninstall(ctx context.Context, args []string, out io.Writer) int {
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	fs.SetOutput(out)
	namespace := fs.String("namespace", "", "namespace of the DaemonSets")
	selector := fs.String("selector", "", "label selector of the DaemonSets")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for them to go")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := checkUninstallFlags(*namespace, *selector, *timeout, fs.Args()); err != nil {
		fmt.Fprintf(out, "uninstall: %v\n", err)
		return 2
	}
	client, err := incluster.Client()
	if err != nil {
		fmt.Fprintf(out, "uninstall: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	names, err := incluster.DeleteDaemonSets(ctx, client, *namespace, *selector, uninstallPollInterval)
	if err != nil {
		fmt.Fprintf(out, "uninstall: %v\n", err)
		return 1
	}
	fmt.Fprintf(out, "uninstall: DaemonSets %s of namespace %s gone after %s\n", strings.Join(names, ", "), *namespace,
		time.Since(start).Round(time.Millisecond))
	return 0
}

// checkUninstallFlags says what is wrong with uninstall's flags.
func checkUninstallFlags(namespace, selector string, timeout time.Duration, rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments %q: expected flags only", rest)
	case len(validation.IsDNS1123Label(namespace)) > 0:
		return fmt.Errorf("--namespace %q: expected a namespace name", namespace)
	case selector == "":
		return fmt.Errorf("--selector is empty: expected the release's label selector, so that only its DaemonSets go")
	case timeout <= 0:
		return fmt.Errorf("--timeout %s: expected a positive duration", timeout)
	}
	if _, err := labels.Parse(selector); err != nil {
		return fmt.Errorf("--selector %q: %w", selector, err)
	}
	return nil
}
