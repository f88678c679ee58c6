package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// access is how a person reaches the serving cluster from the host: the
// kubeconfig (at a stable link if asked) and a kubectl wrapper script. The
// run dir changes with every run; the link and the script do not.
type access struct {
	kubeconfig string // the link, or the run dir's kubeconfig
	kubectl    string // the script; "" when none was asked for
	written    []string
}

// writeAccess makes the --kubeconfig-link and the --kubectl-script.
func writeAccess(sb *sandbox.Sandbox, opts options) (*access, error) {
	a := &access{kubeconfig: sb.Kubeconfig()}
	if opts.kubeconfigLink != "" {
		// A run that was killed left its link behind.
		if err := os.Remove(opts.kubeconfigLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("replacing the kubeconfig link: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(opts.kubeconfigLink), 0o755); err != nil {
			return nil, fmt.Errorf("creating the kubeconfig link: %w", err)
		}
		if err := os.Symlink(sb.Kubeconfig(), opts.kubeconfigLink); err != nil {
			return nil, fmt.Errorf("creating the kubeconfig link: %w", err)
		}
		a.written = append(a.written, opts.kubeconfigLink)
		abs, err := filepath.Abs(opts.kubeconfigLink)
		if err != nil {
			return nil, fmt.Errorf("creating the kubeconfig link: %w", err)
		}
		a.kubeconfig = abs
	}
	if opts.kubectlScript != "" {
		if err := os.MkdirAll(filepath.Dir(opts.kubectlScript), 0o755); err != nil {
			return nil, fmt.Errorf("writing the kubectl script: %w", err)
		}
		script := kubectlScript(sandbox.DefaultCache().Bin("kubectl"), a.kubeconfig)
		if err := os.WriteFile(opts.kubectlScript, []byte(script), 0o755); err != nil {
			return nil, fmt.Errorf("writing the kubectl script: %w", err)
		}
		a.written = append(a.written, opts.kubectlScript)
		a.kubectl = opts.kubectlScript
	}
	return a, nil
}

// kubectlScript is a shell script that runs kubectl against the cluster
// whose kubeconfig is at kubeconfig.
func kubectlScript(kubectl, kubeconfig string) string {
	return "#!/bin/sh\n" +
		"# Written by nri-sandbox (make run): kubectl of its cluster, while it serves.\n" +
		"exec " + shellQuote(kubectl) + " --kubeconfig " + shellQuote(kubeconfig) + ` "$@"` + "\n"
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// remove removes what writeAccess wrote: neither works once the cluster is
// gone. The host lock keeps any other sandbox from having replaced them.
func (a *access) remove(log logrus.FieldLogger) {
	for _, path := range a.written {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.WithError(err).Warn("removing what make run wrote for the cluster")
		}
	}
}

// printUsage tells how to use the cluster from the host, with a running
// pod of the report as the example.
func (a *access) printUsage(out io.Writer, pods []corev1.Pod) {
	example := "default/NAME"
	if i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); i >= 0 {
		example = pods[i].Namespace + "/" + pods[i].Name
	}
	kubectl := a.kubectl
	if kubectl == "" {
		kubectl = shellQuote(sandbox.DefaultCache().Bin("kubectl")) + " --kubeconfig " + shellQuote(a.kubeconfig)
	}
	fmt.Fprintf(out, `
the cluster, from the host while this serves:
  kubeconfig  %[1]s (export KUBECONFIG=%[1]s for a kubectl of your own)
  kubectl     %[2]s get pods -A      or: make kubectl ARGS='get pods -A'
  report      make report POD=%[3]s      or: nri-sandbox report --kubeconfig %[1]s --pod %[3]s
  your pod    %[2]s apply -f my-pod.yaml, then make report POD=default/<its name>
              (images are local only: image %[4]s with imagePullPolicy: Never)
  usage       %[2]s top pods -A      (metrics-server, fed by nri-stats)
`, a.kubeconfig, kubectl, example, sandbox.BusyboxImage)
}
