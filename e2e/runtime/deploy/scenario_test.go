package deploy_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

// plugins are the suite's plugins by name, with their NRI index and the
// port the runner serves /readyz on by default (a pre-registered plugin
// gets no flags, so the defaults apply).
var plugins = catalog.ByName()

// statsPort is the stats plugin's listener's port (its default, and the chart's).
var statsPort = strconv.Itoa(catalog.StatsPort)

// The test's CDI device: /dev/null as /dev/deploy-null with an env variable.
const (
	device     = "nri-suite.io/deploy=null"
	deviceSpec = `cdiVersion: 0.6.0
kind: nri-suite.io/deploy
devices:
  - name: "null"
    containerEdits:
      deviceNodes:
        - path: /dev/deploy-null
          hostPath: /dev/null
      env:
        - NRI_SUITE_DEPLOY_DEVICE=null
`
)

// runScenario runs the scenario pods and checks that each installed plugin
// acted on them: the CDI device's node and env (device-injector), the helper
// in front of the sidecar (sidecar-order), a placement whose cpuset the
// container has, and an exclusive CPU for a Guaranteed pod (topology-aware),
// the runtime default seccomp profile (security), the pod's cAdvisor metrics
// and every plugin's readiness (stats). What the runtime cannot do skips,
// saying why.
func runScenario(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	rt := sb.Runtime().Name()
	web := sandbox.BusyboxPod("web", "app", "log-shipper")
	web.Annotations = map[string]string{
		"cdi-devices.nri-suite.io/container.app": device,
		"sidecar-order.nri-suite.io/sidecars":    "log-shipper",
	}
	writePod(ctx, t, sb, web)
	app, err := sb.WaitContainer(ctx, "web", "app")
	require.NoError(t, err)
	shipper, err := sb.WaitContainer(ctx, "web", "log-shipper")
	require.NoError(t, err)

	t.Run("device-injector", func(t *testing.T) {
		env, err := sb.Environ(ctx, app.ID)
		require.NoError(t, err)
		assert.Equal(t, "null", env["NRI_SUITE_DEPLOY_DEVICE"], "the CDI device's env")
		_, err = sb.CRI().Exec(ctx, app.ID, "test", "-c", "/dev/deploy-null")
		assert.NoError(t, err, "the CDI device's node")
	})
	t.Run("sidecar-order", func(t *testing.T) {
		if rt == "crio" {
			t.Skip("CRI-O v1.34's NRI drops args adjustments: the plugin leaves pods alone there (plugins/sidecar-order/README.md)")
		}
		cmdline, err := sb.ReadFile(ctx, shipper.ID, "/proc/1/cmdline")
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(cmdline, "/.nri-sidecar-order/helper\x00--role\x00sidecar"),
			"the sidecar runs under the installed helper, got %q", cmdline)
	})
	t.Run("topology-aware", func(t *testing.T) {
		status, err := sb.ProcStatus(ctx, app.ID)
		require.NoError(t, err)
		assert.Equal(t, placedCPUs(ctx, t, app.ID), status["Cpus_allowed_list"], "the container runs where the plugin placed it")
		if runtime.NumCPU() < 2 {
			t.Skip("an exclusive CPU needs 2 CPUs")
		}
		db := sandbox.BusyboxPod("db")
		one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		db.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
		if why := sb.CannotRun(db); why != "" {
			t.Skip(why)
		}
		writePod(ctx, t, sb, db)
		c, err := sb.WaitContainer(ctx, "db", "main")
		require.NoError(t, err)
		dbStatus, err := sb.ProcStatus(ctx, c.ID)
		require.NoError(t, err)
		exclusive := dbStatus["Cpus_allowed_list"]
		assert.Regexp(t, `^[0-9]+$`, exclusive, "one exclusive CPU")
		assert.Equal(t, placedCPUs(ctx, t, c.ID), exclusive)
		status, err = sb.ProcStatus(ctx, app.ID)
		require.NoError(t, err)
		assert.NotContains(t, strings.Split(status["Cpus_allowed_list"], ","), exclusive, "the shared container moved off the exclusive CPU")
	})
	t.Run("security", func(t *testing.T) {
		if sb.Runtime().Name() == "crio" {
			t.Skip("CRI-O v1.34's NRI drops seccomp policies: security runs there (connected, above) but audits")
		}
		for _, c := range []sandbox.Container{app, shipper} {
			status, err := sb.ProcStatus(ctx, c.ID)
			require.NoError(t, err)
			assert.Equal(t, "2", status["Seccomp"], "container %s runs under a seccomp filter", c.Name)
		}
		// What every CNI, CSI and storage agent is: privileged, host
		// network, kube-system. The shipped configuration leaves it as
		// the runtime does.
		agent := sandbox.BusyboxPod("csi-node")
		agent.Namespace = "kube-system"
		agent.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
		writePod(ctx, t, sb, agent)
		c, err := sb.WaitContainer(ctx, "csi-node", "main")
		require.NoError(t, err)
		status, err := sb.ProcStatus(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, "0", status["Seccomp"], "the privileged agent runs unconfined")
		out, err := sb.CRI().Exec(ctx, c.ID, "sh", "-c", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m")
		assert.NoError(t, err, "the privileged agent mounts: %s", out)
	})
	t.Run("stats", func(t *testing.T) {
		// In a cluster the chart's listener is the kubelet's kind: HTTPS,
		// and the admin's client certificate (of the cluster's CA) is
		// authorized on nodes/metrics.
		statsURL := "http://" + pluginHost(ctx, t, sb, "stats") + ":" + statsPort
		if sb.Client() != nil {
			statsURL = "https://" + pluginHost(ctx, t, sb, "stats") + ":" + statsPort
		}
		want := fmt.Sprintf(`pod=%q`, sb.PodName("web"))
		err := poll(ctx, func() error {
			body, err := get(ctx, sb, statsURL+"/metrics/cadvisor")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "container_cpu_usage_seconds_total{") && strings.Contains(line, want) &&
					strings.Contains(line, `container="app"`) {
					return nil
				}
			}
			return fmt.Errorf("no container_cpu_usage_seconds_total of the app container (%s) yet", want)
		})
		assert.NoError(t, err)

		// The other plugins' readiness, from their status records.
		body, err := get(ctx, sb, statsURL+"/metrics")
		require.NoError(t, err)
		for name, info := range plugins {
			assert.Contains(t, body, fmt.Sprintf(`nri_suite_stats_plugin_ready{index=%q,plugin=%q} 1`, info.Index, name))
		}
	})
}

// writePod gives the kubelet pod and removes it when t ends, so that the
// scenarios after it in a cluster start from the installed suite alone
// (db's exclusive CPU free again).
func writePod(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod *corev1.Pod) {
	require.NoError(t, sb.WritePod(pod))
	t.Cleanup(func() { assert.NoError(t, sb.RemovePod(ctx, pod.Name), "removing pod %s", pod.Name) })
}

// waitConnected waits until every plugin published that it is connected
// and ready, and answers on its /readyz.
func waitConnected(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	for name, info := range plugins {
		err := poll(ctx, func() error {
			st, found, err := statuses.Read(info.ID())
			if err != nil || !found || !st.Connected || !st.Ready {
				return fmt.Errorf("plugin %s: status %+v (found %v, error %v)", name, st, found, err)
			}
			_, err = get(ctx, sb, "http://"+info.Addr(pluginHost(ctx, t, sb, name))+"/readyz")
			return err
		})
		require.NoError(t, err, "plugin %s connected and ready", name)
	}
}

// pluginHost is the address at which plugin name's endpoints answer on the
// node: loopback, except in a cluster for the chart's pods off the host
// network (all but security's), which listen on their pod's address.
func pluginHost(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string) string {
	if sb.Client() == nil {
		return "127.0.0.1"
	}
	pod, err := pluginPod(ctx, sb, name)
	require.NoError(t, err)
	if pod.Spec.HostNetwork {
		return "127.0.0.1"
	}
	return pod.Status.PodIP
}

// pluginPod returns the cluster's running pod of plugin name, not one that
// is going away.
func pluginPod(ctx context.Context, sb *sandbox.Sandbox, name string) (corev1.Pod, error) {
	pods, err := sb.Client().CoreV1().Pods(release).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nri-" + name})
	if err != nil {
		return corev1.Pod{}, err
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && pod.Status.PodIP != "" {
			return pod, nil
		}
	}
	return corev1.Pod{}, fmt.Errorf("no running pod of plugin %s in namespace %s", name, release)
}

// placedCPUs returns the cpuset topology-aware published for a container.
func placedCPUs(ctx context.Context, t *testing.T, id string) string {
	placements, err := state.PlacementRecords(state.DefaultDir)
	require.NoError(t, err)
	pools, err := state.PoolRecords(state.DefaultDir)
	require.NoError(t, err)
	var cpus string
	err = poll(ctx, func() error {
		rec, found, err := placements.Read(id)
		if err != nil || !found {
			return fmt.Errorf("placement of %s: found %v, error %v", id, found, err)
		}
		all, err := pools.List()
		if err != nil {
			return err
		}
		cpus, _, err = rec.Resolve(all)
		return err
	})
	require.NoError(t, err)
	return cpus
}

// poll calls check every 100 ms until it succeeds, for at most 30 s.
func poll(ctx context.Context, check func() error) error {
	return sandbox.PollUntil(ctx, 30*time.Second, 100*time.Millisecond, check)
}

// get returns the body of a 200 answer to a GET of url from the node.
func get(ctx context.Context, sb *sandbox.Sandbox, url string) (string, error) {
	body, err := sb.NodeGet(ctx, url)
	return string(body), err
}
