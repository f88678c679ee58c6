package runtime

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
)

// Fixed ports: the control plane has a network namespace to itself.
const (
	etcdClientPort        = 2379
	etcdPeerPort          = 2380
	apiServerPort         = 6443
	controllerManagerPort = 10257
	schedulerPort         = 10259
	proxyHealthzPort      = 10256
	proxyMetricsPort      = 10249
)

// controllers are the kube-controller-manager controllers the cluster's
// scenarios need. Each one costs a service-account token at start (about
// 5 s for the default 42), which delays the removal of the node's
// not-ready taint.
var controllers = []string{
	"serviceaccount-token-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"namespace-controller", "garbage-collector-controller", "node-lifecycle-controller", "taint-eviction-controller",
	"deployment-controller", "replicaset-controller", "daemonset-controller", "job-controller",
	"ttl-after-finished-controller", "pod-garbage-collector-controller", "endpointslice-controller", "service-cidr-controller",
}

// controlPlane is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler of a one-node cluster, listening on the loopback of the
// cluster's network namespace (the API server also on the node address).
type controlPlane struct {
	settings   controlPlaneSettings
	components []*component // in start order; stopped in reverse
	log        logrus.FieldLogger
}

// component is one process of the control plane, with what starts it again.
type component struct {
	cmd     command
	health  string // URL inside the namespace
	process *process
}

// controlPlaneSettings are what the control plane's flags are made of.
type controlPlaneSettings struct {
	Dir         string // the control plane's directory in the run dir
	Cache       Cache
	Files       *pki.Files
	NodeIP      string
	ServiceCIDR string
	Netns       string
	// HTTP reaches the namespace's loopback with the admin's client
	// certificate, for the readiness checks.
	HTTP *http.Client
}

func etcdArgs(bin string, s controlPlaneSettings) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(etcdClientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(etcdPeerPort)
	return []string{bin,
		"--name", "node",
		"--data-dir", filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "node=" + peer,
		// The run dir is on tmpfs: syncing it buys nothing and costs latency.
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}
}

func apiServerArgs(bin string, s controlPlaneSettings) []string {
	f := s.Files
	return []string{bin,
		"--etcd-servers", "http://127.0.0.1:" + strconv.Itoa(etcdClientPort),
		"--bind-address", "0.0.0.0",
		"--advertise-address", s.NodeIP,
		"--secure-port", strconv.Itoa(apiServerPort),
		"--tls-cert-file", f.APIServerCert, "--tls-private-key-file", f.APIServerKey,
		"--client-ca-file", f.CACert,
		"--service-cluster-ip-range", s.ServiceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", f.ServiceAccountPub,
		"--service-account-signing-key-file", f.ServiceAccountKey,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate", f.APIServerKubeletClientCert,
		"--kubelet-client-key", f.APIServerKubeletClientKey,
		"--kubelet-certificate-authority", f.CACert,
		"--kubelet-preferred-address-types", "InternalIP",
		// The front proxy, for aggregated APIs such as metrics-server's.
		"--requestheader-client-ca-file", f.FrontProxyCACert,
		"--requestheader-allowed-names", pki.FrontProxyClientName,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", f.FrontProxyClientCert,
		"--proxy-client-key-file", f.FrontProxyClientKey,
		"--enable-aggregator-routing=true",
		"--profiling=false",
		"--v", "1",
	}
}

// componentArgs are the flags kube-controller-manager and kube-scheduler
// share: their own kubeconfig, also for delegated authentication and
// authorization of their health and metrics endpoints, served on loopback
// with a certificate of the cluster CA, one instance (no leader election).
func componentArgs(bin, kubeconfig, cert, key string, port int) []string {
	return []string{bin,
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-private-key-file", key,
		"--leader-elect=false",
		"--profiling=false",
		"--v", "1",
	}
}

func controllerManagerArgs(bin string, s controlPlaneSettings) []string {
	f := s.Files
	return append(componentArgs(bin, f.ControllerManagerKubeconfig, f.ControllerManagerCert, f.ControllerManagerKey, controllerManagerPort),
		// Each controller with its own service account: the manager's own
		// identity may not remove the node's taints.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file", f.ServiceAccountKey,
		"--root-ca-file", f.CACert,
		"--cluster-signing-cert-file", f.CACert,
		"--cluster-signing-key-file", f.CAKey,
		"--controllers", strings.Join(controllers, ","),
	)
}

func schedulerArgs(bin string, s controlPlaneSettings) []string {
	f := s.Files
	return componentArgs(bin, f.SchedulerKubeconfig, f.SchedulerCert, f.SchedulerKey, schedulerPort)
}

// proxyArgs are kube-proxy's: nftables mode (rules in the cluster's
// network namespace only, which goes with them), the conntrack sysctls
// left as they are (some are the host's), endpoints on loopback.
func proxyArgs(bin string, s controlPlaneSettings, nodeName, podCIDR string) []string {
	return []string{bin,
		"--kubeconfig", s.Files.KubeProxyKubeconfig,
		"--hostname-override", nodeName,
		"--proxy-mode", "nftables",
		"--cluster-cidr", podCIDR,
		"--conntrack-max-per-core", "0",
		"--conntrack-tcp-timeout-established", "0",
		"--conntrack-tcp-timeout-close-wait", "0",
		"--healthz-bind-address", "127.0.0.1:" + strconv.Itoa(proxyHealthzPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(proxyMetricsPort),
		"--v", "1",
	}
}

// startProxy starts kube-proxy for the node, so that pods reach Services
// (the API server's own among them, as in-cluster clients do), and waits
// until it has programmed them. It waits for the node's object itself, so
// it is started once the kubelet is.
func (cp *controlPlane) startProxy(ctx context.Context, nodeName, podCIDR string) error {
	s := cp.settings
	c := &component{health: "http://127.0.0.1:" + strconv.Itoa(proxyHealthzPort) + "/healthz",
		cmd: command{name: "kube-proxy", argv: proxyArgs(s.Cache.Bin("kube-proxy"), s, nodeName, podCIDR),
			netns: s.Netns, logPath: filepath.Join(s.Dir, "kube-proxy.log")}}
	cp.components = append(cp.components, c)
	return cp.start(ctx, c)
}

// startControlPlane starts etcd, then the API server, then the controller
// manager and the scheduler, each once the one before answers its health
// check, and returns once all of them are healthy.
func startControlPlane(ctx context.Context, s controlPlaneSettings, log logrus.FieldLogger) (*controlPlane, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating control plane directory: %w", err)
	}
	steps := []struct {
		name   string
		argv   []string
		health string
	}{
		{"etcd", etcdArgs(s.Cache.Bin("etcd"), s), "http://127.0.0.1:" + strconv.Itoa(etcdClientPort) + "/health"},
		{"kube-apiserver", apiServerArgs(s.Cache.Bin("kube-apiserver"), s), "https://127.0.0.1:" + strconv.Itoa(apiServerPort) + "/readyz"},
		{"kube-controller-manager", controllerManagerArgs(s.Cache.Bin("kube-controller-manager"), s), "https://127.0.0.1:" + strconv.Itoa(controllerManagerPort) + "/healthz"},
		{"kube-scheduler", schedulerArgs(s.Cache.Bin("kube-scheduler"), s), "https://127.0.0.1:" + strconv.Itoa(schedulerPort) + "/healthz"},
	}
	cp := &controlPlane{settings: s, log: log}
	for _, step := range steps {
		c := &component{health: step.health, cmd: command{name: step.name, argv: step.argv, netns: s.Netns,
			logPath: filepath.Join(s.Dir, step.name+".log")}}
		cp.components = append(cp.components, c)
		if err := cp.start(ctx, c); err != nil {
			cp.stop()
			return nil, err
		}
	}
	return cp, nil
}

// start starts c and waits until it answers its health check.
func (cp *controlPlane) start(ctx context.Context, c *component) error {
	start := time.Now()
	p, err := startProcess(c.cmd)
	if err != nil {
		return err
	}
	c.process = p
	if err := p.waitFor(ctx, c.cmd.name+"'s health endpoint", func(ctx context.Context) error {
		return httpOK(ctx, cp.settings.HTTP, c.health)
	}); err != nil {
		return err
	}
	cp.log.WithFields(logrus.Fields{"pid": p.PID(), "took": time.Since(start).Round(time.Millisecond)}).Info(c.cmd.name + " healthy")
	return nil
}

// restart kills the component named name with SIGKILL, as a crash would,
// and starts it again with the same command (its log goes on), returning
// once it is healthy.
func (cp *controlPlane) restart(ctx context.Context, name string) error {
	for _, c := range cp.components {
		if c.cmd.name == name {
			c.process.kill()
			return cp.start(ctx, c)
		}
	}
	return fmt.Errorf("restarting %s: not a component of the control plane", name)
}

// stop stops the control plane in reverse start order.
func (cp *controlPlane) stop() {
	if cp == nil {
		return
	}
	for i := len(cp.components) - 1; i >= 0; i-- {
		if p := cp.components[i].process; p != nil {
			p.stop(5 * time.Second)
		}
	}
}
