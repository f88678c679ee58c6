package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

// badValues hands the real helm CLI values files with a key the chart does
// not have, a mistyped one and one of the wrong type, for an upgrade of the
// release and for an install of another: the chart's schema refuses each,
// naming the key, before anything reaches the cluster (the release keeps
// its revision, and no other release appears).
func badValues(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	revision := releaseRevision(ctx, t, sb)
	chart := filepath.Join(repoRoot(t), "deployments/helm/nri-suite")
	for _, tc := range []struct{ name, values, want string }{
		{"unknown key", "imagePullPolicy: Never\n", `at '': additional properties 'imagePullPolicy' not allowed`},
		{"mistyped plugin key", "plugins:\n  topology-aware:\n    enabeld: false\n",
			`at '/plugins/topology-aware': additional properties 'enabeld' not allowed`},
		{"wrong type", "plugins:\n  stats:\n    port: \"9190\"\n", `at '/plugins/stats/port': got string, want integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(values, []byte(tc.values), 0o644))
			for _, args := range [][]string{
				{"upgrade", release, chart, "--namespace", release, "--reuse-values", "--values", values},
				{"install", "bad-values", chart, "--namespace", release, "--values", values},
			} {
				out, err := sb.Helm(ctx, args...)
				require.Error(t, err, "helm %s: %s", args[0], out)
				t.Logf("the user sees: %v", err)
				assert.Contains(t, err.Error(), "values don't meet the specifications of the schema(s) in the following chart(s):\nnri-suite:\n- "+tc.want,
					"helm %s names the key", args[0])
			}
		})
	}
	assert.Equal(t, revision, releaseRevision(ctx, t, sb), "the release is as it was")
	out, err := sb.Helm(ctx, "list", "--all-namespaces", "--all", "--short")
	require.NoError(t, err)
	assert.Equal(t, release, strings.TrimSpace(string(out)), "no release was made")
}

// releaseRevision is the release's current revision.
func releaseRevision(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) int {
	out, err := sb.Helm(ctx, "status", release, "--namespace", release, "--output", "json")
	require.NoError(t, err)
	var status struct{ Version int }
	require.NoError(t, json.Unmarshal(out, &status))
	return status.Version
}

// badConfig gives topology-aware a configuration with an unknown key
// through the chart's values, as a user's typo would (the chart's schema
// cannot tell: a plugin's config is the plugin's), and lets the DaemonSet
// roll it out: the new pod is not Ready, and its startup probe's event, in
// `kubectl describe pod`, and its log name the key. Meanwhile a running
// workload keeps everything it has and the other plugins serve new pods. A
// rollback restores the plugin.
func badConfig(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	steady := sandbox.BusyboxPod("steady")
	writePod(ctx, t, sb, steady)
	_, err := sb.WaitContainer(ctx, steady.Name, "main")
	require.NoError(t, err)
	before := containerStates(ctx, t, sb, steady.Namespace)
	old, err := pluginPod(ctx, sb, "topology-aware")
	require.NoError(t, err)

	out, err := sb.Helm(ctx, "upgrade", release, filepath.Join(repoRoot(t), "deployments/helm/nri-suite"),
		"--namespace", release, "--reuse-values", "--set", "plugins.topology-aware.config.bogus-key=1")
	require.NoError(t, err, "helm upgrade: %s", out)
	defer helmRollback(ctx, t, sb)

	var broken corev1.Pod
	require.NoError(t, poll(ctx, func() error {
		if broken, err = pluginPod(ctx, sb, "topology-aware"); err == nil && broken.UID == old.UID {
			err = fmt.Errorf("the DaemonSet has not replaced pod %s yet", old.Name)
		}
		return err
	}))
	const why = `not ready: configure plugin topology-aware: decode config /etc/nri-suite/config.yaml: line 1: unknown key "bogus-key"`
	requireEvent(ctx, t, sb, release, broken.Name, "Unhealthy", "Startup probe failed: "+why)
	current, err := sb.Client().CoreV1().Pods(release).Get(ctx, broken.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, podReady(current), "the pod with the bad configuration is not Ready")
	logs, err := sb.Client().CoreV1().Pods(release).GetLogs(broken.Name, &corev1.PodLogOptions{Container: "topology-aware"}).DoRaw(ctx)
	require.NoError(t, err)
	assert.Contains(t, string(logs), `unknown key \"bogus-key\"`, "the plugin's log names the key")
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	st, found, err := statuses.Read(catalog.TopologyAware.ID())
	require.NoError(t, err)
	assert.True(t, found && !st.Connected && !st.Ready, "topology-aware publishes that it is not connected: %+v", st)

	t.Run("workloads and the other plugins carry on", func(t *testing.T) {
		assert.Equal(t, before, containerStates(ctx, t, sb, steady.Namespace), "the running container keeps what it had")
		meanwhile := sandbox.BusyboxPod("meanwhile")
		meanwhile.Annotations = map[string]string{"cdi-devices.nri-suite.io": device}
		writePod(ctx, t, sb, meanwhile)
		c, err := sb.WaitContainer(ctx, meanwhile.Name, "main")
		require.NoError(t, err)
		env, err := sb.Environ(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, "null", env["NRI_SUITE_DEPLOY_DEVICE"], "device-injector still injects")
		if sb.Runtime().Name() != "crio" { // CRI-O v1.34 drops seccomp policies
			status, err := sb.ProcStatus(ctx, c.ID)
			require.NoError(t, err)
			assert.Equal(t, "2", status["Seccomp"], "security still confines")
		}
	})
}

// podReady reports the pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// apiServerRestart kills the API server with SIGKILL under the running
// cluster and starts it again: the plugins, which never talk to it, and
// the workloads carry on as they were (no container restarted or changed,
// every plugin still connected on the same registration), and once it is
// back the cluster runs new pods with every plugin's effect.
func apiServerRestart(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	steady := sandbox.BusyboxPod("steady")
	steady.Annotations = map[string]string{"cdi-devices.nri-suite.io": device}
	writePod(ctx, t, sb, steady)
	_, err := sb.WaitContainer(ctx, steady.Name, "main")
	require.NoError(t, err)
	workloads, suite := containerStates(ctx, t, sb, steady.Namespace), running(ctx, t, sb, release)
	connections := pluginConnections(t)

	start := time.Now()
	require.NoError(t, sb.RestartAPIServer(ctx))
	t.Logf("the API server was back after %s", time.Since(start).Round(time.Millisecond))
	// The node's status goes through the API server: the kubelet is back
	// once it reports the plugins' pods Ready again.
	require.NoError(t, poll(ctx, func() error {
		for name := range plugins {
			pod, err := pluginPod(ctx, sb, name)
			if err != nil {
				return err
			}
			if !podReady(&pod) {
				return fmt.Errorf("pod %s is not Ready", pod.Name)
			}
		}
		return nil
	}))

	assert.Equal(t, workloads, containerStates(ctx, t, sb, steady.Namespace), "the workload is as it was")
	assert.Equal(t, suite, running(ctx, t, sb, release), "no plugin container restarted")
	assert.Equal(t, connections, pluginConnections(t), "every plugin is still connected, on the same registration")
	after := sandbox.BusyboxPod("after")
	writePod(ctx, t, sb, after)
	c, err := sb.WaitContainer(ctx, after.Name, "main")
	require.NoError(t, err)
	status, err := sb.ProcStatus(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, placedCPUs(ctx, t, c.ID), status["Cpus_allowed_list"], "a new pod is placed by topology-aware")
}

// pluginConnections are the plugins' published registrations: connected,
// ready, and when they last synchronized (a new registration moves it).
func pluginConnections(t *testing.T) map[string]string {
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	out := map[string]string{}
	for name, info := range plugins {
		st, found, err := statuses.Read(info.ID())
		require.NoError(t, err)
		require.True(t, found, "plugin %s publishes its status", name)
		out[name] = fmt.Sprintf("connected %v, ready %v, synchronized %s", st.Connected, st.Ready, st.LastSynchronize)
	}
	return out
}
