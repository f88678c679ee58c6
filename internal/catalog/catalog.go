// Package catalog is the one table of the suite's plugins: the name each
// registers with NRI (and its binary, nri-<name>), its NRI index, which
// orders the plugins in every request, and the loopback port its runner
// serves /metrics, /healthz and /readyz on by default. Every main.go takes
// its defaults from here; the sandbox, the deploy tests and the chart's
// tests hold install.sh, the pre-registered configurations and the chart's
// values to it.
package catalog

import (
	"net"
	"strconv"
)

// Plugin is one plugin's identity and defaults.
type Plugin struct {
	Name  string
	Index string // two digits
	Port  int
}

// The plugins, in NRI index order.
var (
	DeviceInjector = Plugin{Name: "device-injector", Index: "10", Port: 9110}
	SidecarOrder   = Plugin{Name: "sidecar-order", Index: "20", Port: 9120}
	TopologyAware  = Plugin{Name: "topology-aware", Index: "30", Port: 9130}
	Security       = Plugin{Name: "security", Index: "40", Port: 9140}
	Stats          = Plugin{Name: "stats", Index: "90", Port: 9190}
)

// StatsPort is stats' second listener, the container metrics
// (/metrics/cadvisor, /metrics/resource, /stats/pods): its own port so
// that it can be opened to metrics-server and Prometheus, with the
// kubelet's authentication, while the runner's stays on loopback.
const StatsPort = 9191

// All is every plugin, in NRI index order.
var All = []Plugin{DeviceInjector, SidecarOrder, TopologyAware, Security, Stats}

// ID is how the runtime knows the plugin: "<index>-<name>", the name of its
// pre-registered binary and configuration.
func (p Plugin) ID() string { return p.Index + "-" + p.Name }

// Addr is the runner's HTTP address on host.
func (p Plugin) Addr(host string) string { return net.JoinHostPort(host, strconv.Itoa(p.Port)) }

// LoopbackAddr is the runner's default HTTP address.
func (p Plugin) LoopbackAddr() string { return p.Addr("127.0.0.1") }

// Names are the plugins' names, in NRI index order.
func Names() []string {
	names := make([]string, len(All))
	for i, p := range All {
		names[i] = p.Name
	}
	return names
}

// ByName is the plugins by name.
func ByName() map[string]Plugin {
	byName := make(map[string]Plugin, len(All))
	for _, p := range All {
		byName[p.Name] = p
	}
	return byName
}
