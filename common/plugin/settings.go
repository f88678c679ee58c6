package plugin

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/incluster"
	"github.com/nri-suite/nri-suite/common/state"
)

// Settings are the runner's knobs; every field but Plugin and LogOutput is a flag.
type Settings struct {
	// Plugin is the plugin's kind, fixed by its main (e.g. "topology-aware"). It names
	// the metrics, so dashboards survive a renamed registration.
	Plugin string
	// Name is the name registered with NRI (--name, default Plugin).
	Name string
	// Idx is the two-digit NRI index that orders plugins (--idx).
	Idx string
	// SocketPath is the runtime's NRI socket for an external plugin (--socket).
	SocketPath string
	// ConfigFile is an optional YAML file handed to the plugin at start (--config).
	ConfigFile string
	// LogLevel is a logrus level name (--log-level).
	LogLevel string
	// LogFormat is text or json (--log-format).
	LogFormat string
	// HTTPAddr is where /metrics, /healthz and /readyz listen, one address or several
	// separated by commas; empty disables (--http-addr).
	HTTPAddr string
	// SharedDir is the node-local shared state directory where the plugin's status and
	// the plugin's own records are published; empty disables (--shared-dir).
	SharedDir string
	// DaemonSet is "namespace/name" of the DaemonSet that runs the plugin in a
	// cluster (--daemonset): stopped while it is being deleted, the plugin removes its
	// node state (see NodeStateRemover); empty, it never asks.
	DaemonSet string
	// NodeName is the node's name, for the API server (--node-name; default
	// $NODE_NAME, which the chart sets from spec.nodeName).
	NodeName string
	// Kubeconfig is a kubeconfig file for the API server (--kubeconfig); empty
	// means the pod's service account.
	Kubeconfig string
	// APIEvents posts Events about pods (refusals, device health) and
	// device-injector's node condition to the API server, when the plugin
	// can reach it (--api-events).
	APIEvents bool
	// LogOutput receives the logs; nil means stderr.
	LogOutput io.Writer
}

// DefaultSettings returns the settings of a plugin kind before any flag is parsed.
func DefaultSettings(plugin string) Settings {
	return Settings{
		Plugin:     plugin,
		Name:       plugin,
		SocketPath: api.DefaultSocketPath,
		LogLevel:   "info",
		LogFormat:  "text",
		SharedDir:  state.DefaultDir,
		NodeName:   os.Getenv("NODE_NAME"),
		APIEvents:  true,
	}
}

// AddFlags binds the common flags to s; the current values of s are the defaults.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Name, "name", s.Name, "plugin name to register with NRI")
	fs.StringVar(&s.Idx, "idx", s.Idx, "plugin index to register with NRI (two digits, orders the plugins)")
	fs.StringVar(&s.SocketPath, "socket", s.SocketPath, "NRI socket of the runtime (external plugins)")
	fs.StringVar(&s.ConfigFile, "config", s.ConfigFile, "YAML configuration file (a regular file of at most 1 MiB)")
	fs.StringVar(&s.LogLevel, "log-level", s.LogLevel, "log level: trace, debug, info, warning, error")
	fs.StringVar(&s.LogFormat, "log-format", s.LogFormat, "log format: text or json")
	fs.StringVar(&s.HTTPAddr, "http-addr", s.HTTPAddr, "address of /metrics, /healthz and /readyz, or several, comma-separated; empty disables")
	fs.StringVar(&s.SharedDir, "shared-dir", s.SharedDir, "node-local state shared between the suite's plugins; empty disables")
	fs.StringVar(&s.NodeName, "node-name", s.NodeName, "the node's name, for the API server (default $NODE_NAME)")
	fs.StringVar(&s.Kubeconfig, "kubeconfig", s.Kubeconfig, "kubeconfig of the API server; empty: the pod's service account")
	fs.BoolVar(&s.APIEvents, "api-events", s.APIEvents, "post Events about pods (refusals, device health) and device-injector's node condition to the API server, when there is one (--kubeconfig or the pod's service account)")
	fs.StringVar(&s.DaemonSet, "daemonset", s.DaemonSet, "namespace/name of the DaemonSet running the plugin: stopped while it is deleted (uninstall), the plugin removes its node state; empty never asks")
}

// metricsNamespaceRE matches what Prometheus accepts in a metric name prefix.
var metricsNamespaceRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// MetricsNamespace is the prefix of every metric of a plugin kind: nri_suite_<plugin>
// with dashes turned into underscores.
func MetricsNamespace(plugin string) string {
	return "nri_suite_" + strings.ReplaceAll(plugin, "-", "_")
}

// preRegistered reports whether the runtime launched this process from its plugin
// directory: it then passes the connection on a file descriptor, name and index in env.
func preRegistered() bool {
	return os.Getenv(api.PluginSocketEnvVar) != ""
}

// validate checks the settings that the stub would otherwise reject late and vaguely.
func (s *Settings) validate(preRegistered bool) error {
	if !metricsNamespaceRE.MatchString(MetricsNamespace(s.Plugin)) {
		return fmt.Errorf("invalid plugin kind %q: expected letters, digits, '-' and '_'", s.Plugin)
	}
	if err := s.checkPaths(); err != nil {
		return err
	}
	if s.DaemonSet != "" {
		if _, err := incluster.ParseDaemonSetRef(s.DaemonSet); err != nil {
			return fmt.Errorf("--daemonset: %w", err)
		}
	}
	if preRegistered {
		// The runtime chose name and index from the file name; flags do not apply.
		return nil
	}
	if err := api.CheckPluginName(s.Name); err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	if s.Idx == "" {
		return fmt.Errorf("missing --idx: expected a two-digit plugin index such as 30")
	}
	if err := api.CheckPluginIndex(s.Idx); err != nil {
		return fmt.Errorf("--idx: %w", err)
	}
	if s.SocketPath == "" {
		return fmt.Errorf("empty --socket: expected the path of the runtime's NRI socket")
	}
	return CheckPath("--socket", s.SocketPath)
}

// checkPaths checks the path flags that are set (empty disables them).
func (s *Settings) checkPaths() error {
	for _, f := range []struct{ flag, value string }{{"--config", s.ConfigFile}, {"--shared-dir", s.SharedDir}, {"--kubeconfig", s.Kubeconfig}} {
		if f.value == "" {
			continue
		}
		if err := CheckPath(f.flag, f.value); err != nil {
			return err
		}
	}
	return nil
}

// newLogger builds the runner's own logger, so that runners in one test process do not
// share logrus' global state.
func (s *Settings) newLogger() (*logrus.Logger, error) {
	level, err := logrus.ParseLevel(s.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: expected trace, debug, info, warning, error, fatal or panic", s.LogLevel)
	}
	log := logrus.New()
	log.SetLevel(level)
	switch s.LogFormat {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("invalid --log-format %q: expected text or json", s.LogFormat)
	}
	if s.LogOutput != nil {
		log.SetOutput(s.LogOutput)
	}
	return log, nil
}
