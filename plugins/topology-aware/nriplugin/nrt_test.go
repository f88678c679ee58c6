package nriplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// newNRTPlugin is a plugin that publishes its NodeResourceTopology through
// the API server of kubeconfig (empty: the pod's service account), logging
// to hook.
func newNRTPlugin(t *testing.T, kubeconfig string) (*Plugin, *prometheus.Registry, *logtest.Hook) {
	t.Helper()
	root := fixtureRoot("snc-2s-4n-80c")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	logger, hook := logtest.NewNullLogger()
	reg := prometheus.NewRegistry()
	p, err := New(plugin.Deps{Name: "topology-aware", Log: logrus.NewEntry(logger), Registry: reg, MetricsNamespace: "test",
		SharedDir: t.TempDir(), NodeName: "worker", Kubeconfig: kubeconfig},
		Options{Topology: topo, SysfsRoot: root, StateDir: t.TempDir(), PublishNRT: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p, reg, hook
}

// messages are the hook's entries at level, by message.
func messages(hook *logtest.Hook, level logrus.Level) []string {
	var out []string
	for _, e := range hook.AllEntries() {
		if e.Level == level {
			out = append(out, e.Message)
		}
	}
	return out
}

// Without an API server (no kubeconfig, not in a pod) the plugin says so
// once and places containers as without the flag.
func TestNRTWithoutAPIServer(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	p, reg, hook := newNRTPlugin(t, "")
	assert.Nil(t, p.nrt)
	assert.Equal(t, []string{"the NodeResourceTopology is not published: no API server to publish it to"}, messages(hook, logrus.InfoLevel))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		assert.NotContains(t, f.GetName(), "nrt_", "no NodeResourceTopology metrics without publishing")
	}

	view := newRuntimeView()
	_, err = p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	_, err = view.create(t, p, "guaranteed-2cpu.yaml", "app")
	require.NoError(t, err)
}

// An API server that does not answer (a closed port) fails every update:
// the handlers place containers meanwhile, the publisher retries with its
// backoff and warns once for the whole run of failures.
func TestNRTAPIServerDown(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := listener.Addr().String()
	require.NoError(t, listener.Close())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: down, user: u}}]
current-context: c
`), 0o600))
	p, reg, hook := newNRTPlugin(t, kubeconfig)
	require.NotNil(t, p.nrt)

	view := newRuntimeView()
	_, err = p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	for file, container := range map[string]string{"guaranteed-2cpu.yaml": "app", "guaranteed-4cpu.yaml": "app", "burstable.yaml": "web"} {
		_, err := view.create(t, p, file, container)
		require.NoError(t, err, "%s is placed while the API server is down", file)
	}
	require.Eventually(t, func() bool { return failedUpdates(t, reg) >= 3 }, 30*time.Second, 50*time.Millisecond,
		"the publisher keeps trying")
	var warnings []string
	for _, m := range messages(hook, logrus.WarnLevel) {
		if strings.Contains(m, "NodeResourceTopology") {
			warnings = append(warnings, m)
		}
	}
	assert.Len(t, warnings, 1, "one warning for the run of failures")
}

// failedUpdates is nrt_updates_total{outcome="error"}.
func failedUpdates(t *testing.T, reg *prometheus.Registry) float64 {
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "test_nrt_updates_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "error" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
