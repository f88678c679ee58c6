package runtime

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"
)

// kubelet is the sandbox's kubelet: standalone (no API server, pods only
// from the static manifest directory), or a cluster's node (kubeletCluster).
// Every path and port is private to the sandbox; it needs nothing of the
// runtime but its CRI endpoint.
type kubelet struct {
	dir         string
	staticPods  string
	port        int // HTTPS: /metrics/cadvisor, /metrics/resource, /stats/summary
	healthzPort int
	http        *http.Client // reaches healthzPort
	process     *process
	log         logrus.FieldLogger
}

// kubeletSettings are the per-sandbox values of the kubelet's configuration.
type kubeletSettings struct {
	Dir         string // the kubelet's directory in the run dir
	Endpoint    string // CRI endpoint
	CgroupRoot  string
	NodeName    string
	NodeIP      string
	Port        int
	HealthzPort int
	// Cluster joins the kubelet to an API server; nil: standalone.
	Cluster *kubeletCluster
	// Netns is the network namespace the kubelet runs in; "" the sandbox's.
	Netns string
	// HTTP reaches the kubelet's loopback (inside Netns); nil: the default client.
	HTTP *http.Client
}

// kubeletCluster is what a kubelet needs to be a cluster's node: its
// credentials for the API server, and the CA and serving certificate with
// which the API server (logs, exec) and metrics readers reach it.
type kubeletCluster struct {
	Kubeconfig   string
	ClientCAFile string
	TLSCertFile  string
	TLSKeyFile   string
}

// kubeletConfiguration is the part of KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) the sandbox sets; the kubelet decodes it
// strictly, so the names must be exact.
type kubeletConfiguration struct {
	Kind                        string            `json:"kind"`
	APIVersion                  string            `json:"apiVersion"`
	CgroupDriver                string            `json:"cgroupDriver"`
	CgroupRoot                  string            `json:"cgroupRoot"`
	FailCgroupV1                bool              `json:"failCgroupV1"`
	FailSwapOn                  bool              `json:"failSwapOn"`
	StaticPodPath               string            `json:"staticPodPath"`
	FileCheckFrequency          string            `json:"fileCheckFrequency"`
	ContainerRuntimeEndpoint    string            `json:"containerRuntimeEndpoint"`
	Address                     string            `json:"address"`
	Port                        int               `json:"port"`
	ReadOnlyPort                int               `json:"readOnlyPort"`
	HealthzBindAddress          string            `json:"healthzBindAddress"`
	HealthzPort                 int               `json:"healthzPort"`
	Authentication              kubeletAuthn      `json:"authentication"`
	Authorization               kubeletAuthz      `json:"authorization"`
	ResolvConf                  string            `json:"resolvConf"`
	PodLogsDir                  string            `json:"podLogsDir"`
	VolumePluginDir             string            `json:"volumePluginDir"`
	ImageGCHighThresholdPercent int               `json:"imageGCHighThresholdPercent"`
	EvictionHard                map[string]string `json:"evictionHard"`
	OOMScoreAdj                 int               `json:"oomScoreAdj"`
	CPUManagerPolicy            string            `json:"cpuManagerPolicy"`
	MemoryManagerPolicy         string            `json:"memoryManagerPolicy"`
	TLSCertFile                 string            `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile           string            `json:"tlsPrivateKeyFile,omitempty"`
}

type kubeletAuthn struct {
	Anonymous struct {
		Enabled bool `json:"enabled"`
	} `json:"anonymous"`
	Webhook struct {
		Enabled bool `json:"enabled"`
	} `json:"webhook"`
	X509 struct {
		ClientCAFile string `json:"clientCAFile,omitempty"`
	} `json:"x509,omitzero"` // a standalone kubelet has no client CA
}

type kubeletAuthz struct {
	Mode string `json:"mode"`
}

// kubeletConfig returns the kubelet's configuration file for a sandbox as
// the notes on these machines prescribe: cgroupfs on a v1 host, no swap
// check, static pods polled every second, loopback only, anonymous access
// (loopback only), no resolv.conf, no image GC (local images cannot be pulled
// again), tiny eviction thresholds, no oom_score_adj below 0, and the CPU and
// Memory Managers off so that NRI plugins own placement. A cluster's kubelet
// serves on every address of its network namespace, where the API server
// reaches it, with the API server's authentication and authorization
// (webhook) and client certificates from the cluster CA, as kubeadm sets it.
func kubeletConfig(s kubeletSettings) ([]byte, error) {
	cfg := kubeletConfiguration{
		Kind:                        "KubeletConfiguration",
		APIVersion:                  "kubelet.config.k8s.io/v1beta1",
		CgroupDriver:                "cgroupfs",
		CgroupRoot:                  s.CgroupRoot,
		FailCgroupV1:                false,
		FailSwapOn:                  false,
		StaticPodPath:               filepath.Join(s.Dir, "manifests"),
		FileCheckFrequency:          "1s",
		ContainerRuntimeEndpoint:    s.Endpoint,
		Address:                     "127.0.0.1",
		Port:                        s.Port,
		ReadOnlyPort:                0,
		HealthzBindAddress:          "127.0.0.1",
		HealthzPort:                 s.HealthzPort,
		ResolvConf:                  "",
		PodLogsDir:                  filepath.Join(s.Dir, "pod-logs"),
		VolumePluginDir:             filepath.Join(s.Dir, "volume-plugins"),
		ImageGCHighThresholdPercent: 100,
		EvictionHard: map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "1%",
		},
		OOMScoreAdj:         0,
		CPUManagerPolicy:    "none",
		MemoryManagerPolicy: "None",
	}
	cfg.Authentication.Anonymous.Enabled = true
	cfg.Authentication.Webhook.Enabled = false
	cfg.Authorization.Mode = "AlwaysAllow"
	if c := s.Cluster; c != nil {
		cfg.Address = "0.0.0.0"
		cfg.TLSCertFile, cfg.TLSPrivateKeyFile = c.TLSCertFile, c.TLSKeyFile
		cfg.Authentication.Anonymous.Enabled = false
		cfg.Authentication.Webhook.Enabled = true
		cfg.Authentication.X509.ClientCAFile = c.ClientCAFile
		cfg.Authorization.Mode = "Webhook"
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet configuration: %w", err)
	}
	return data, nil
}

// kubeletArgs are the flags that have no configuration-file form.
func kubeletArgs(bin, configPath string, s kubeletSettings) []string {
	args := []string{bin,
		"--config", configPath,
		"--root-dir", filepath.Join(s.Dir, "root"),
		"--cert-dir", filepath.Join(s.Dir, "pki"),
		"--hostname-override", s.NodeName,
		"--node-ip", s.NodeIP,
		"--v", "2",
	}
	if s.Cluster != nil {
		args = append(args, "--kubeconfig", s.Cluster.Kubeconfig)
	}
	return args
}

// startKubelet writes the configuration and starts the kubelet, returning
// once its health endpoint answers.
func startKubelet(ctx context.Context, bin string, s kubeletSettings, log logrus.FieldLogger) (*kubelet, error) {
	k := &kubelet{dir: s.Dir, staticPods: filepath.Join(s.Dir, "manifests"), port: s.Port, healthzPort: s.HealthzPort,
		http: cmp.Or(s.HTTP, http.DefaultClient), log: log}
	workDir := kubeletWorkDir(s.Dir)
	for _, dir := range []string{k.staticPods, filepath.Join(s.Dir, "root"), filepath.Join(s.Dir, "pki"),
		filepath.Join(s.Dir, "pod-logs"), filepath.Join(s.Dir, "volume-plugins"), workDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating kubelet directory: %w", err)
		}
	}
	cfg, err := kubeletConfig(s)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(s.Dir, "config.yaml")
	if err := os.WriteFile(configPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("writing kubelet configuration: %w", err)
	}
	p, err := startProcess(command{name: "kubelet", argv: kubeletArgs(bin, configPath, s),
		logPath: filepath.Join(s.Dir, "kubelet.log"), dir: workDir, netns: s.Netns})
	if err != nil {
		return nil, err
	}
	k.process = p
	log.WithField("pid", p.PID()).Info("kubelet started")
	if err := p.waitFor(ctx, "the kubelet's health endpoint", k.healthy); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	return k, nil
}

// kubeletWorkDir is the kubelet's working directory: empty, and nothing
// else's. Its container log cleanup removes LogPath+"*" relative to it when a
// container has no log path, which next to kubelet.log and config.yaml
// would remove those.
func kubeletWorkDir(dir string) string { return filepath.Join(dir, "workdir") }

func (k *kubelet) healthy(ctx context.Context) error {
	return httpOK(ctx, k.http, "http://127.0.0.1:"+strconv.Itoa(k.healthzPort)+"/healthz")
}

// httpOK returns nil when a GET of url answers 200 within 2 s.
func httpOK(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := get(ctx, client, url)
	return err
}

// stop stops the kubelet; its pods keep running until the sandbox removes
// them through CRI.
func (k *kubelet) stop(grace time.Duration) {
	if k != nil && k.process != nil {
		k.process.stop(grace)
	}
}
