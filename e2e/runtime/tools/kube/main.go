// Command kube is the kubelet, kube-proxy, etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kubectl of one Kubernetes
// release in one binary: it runs the command its name (argv[0], a symlink)
// says. One binary links the shared Kubernetes code once, which halves the
// cold build of separate binaries.
//
// It is a module of its own so that k8s.io/kubernetes and its dependency graph
// never enter the main module. install.sh builds it with the committed go.mod
// and go.sum.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	_ "time/tzdata" // CronJob time zones, as the apiserver and controller-manager mains have it

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as every Kubernetes main registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
)

// commands maps each name this binary answers to to its Kubernetes command.
var commands = map[string]func() *cobra.Command{
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-proxy":              proxy.NewProxyCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	switch name {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kubectl":
		runKubectl()
	default:
		newCommand, ok := commands[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "kube: called as %q: expected one of %s (a symlink to this binary names the command)\n",
				name, strings.Join(names(), ", "))
			os.Exit(2)
		}
		os.Exit(cli.Run(newCommand()))
	}
}

// runKubectl is kubectl's main: its verbosity is set before the command is
// built, since building it already logs.
func runKubectl() {
	logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as kubectl's own main
	if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
}

func names() []string {
	all := []string{"etcd", "kubectl"}
	for name := range commands {
		all = append(all, name)
	}
	slices.Sort(all)
	return all
}
