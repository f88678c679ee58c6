package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/annotations"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper/helpertest"
)

// TestRealNode is issue 7's acceptance on a real kubelet and runtime, with
// ordinary containers as sidecars, the plugin external to the runtime or
// launched by containerd itself (sandbox.Variants). The containers record what they see and
// when they get SIGTERM in a hostPath file; the kubelet's pod phase and the
// containers' exit codes come from the kubelet and CRI.
//
//  1. Job: two restartPolicy Never pods at once, each with a sidecar that is
//     ready only after 3 s, a second sidecar and a main that checks the first
//     sidecar's readiness at its start and exits 0: the check passes in both,
//     the sidecars get SIGTERM last-started first, every container exits 0
//     and the kubelet reports the pods Succeeded.
//  2. Passthrough: a main's exit code and a signal it traps reach the
//     runtime unchanged, the main's command is PID 1, and a container with
//     the image's default command (no command in the pod) runs it behind the
//     helper.
//  3. Deletion: removing a running pod (SIGTERM to every container at once)
//     stops the sidecars after the main, in reverse order.
//  4. No shell: pods whose sidecar and main run the pause image (one static
//     /pause, no shell, no other file): the main's PID 1 is /pause itself,
//     the sidecar's /pause is the helper's child; when the main exits the
//     pod completes with the sidecar stopped after it, and on deletion the
//     sidecar's /pause outlives every main.
//  5. Unknown sidecar: a listed sidecar that no container of the pod has
//     fails the main after that sidecar's timeout (on-timeout fail), with a
//     message in the main's log that says so, and the pod completes.
//  6. Untouched: a pod with a native sidecar and no annotation runs exactly
//     its own command, without the helper's mounts.
//
// A runtime that drops NRI args adjustments (CRI-O 1.34.0) cannot run the
// helper: there the plugin must detect it from the first annotated pod and
// leave later ones alone, and steps 1-3 skip with that reason.
func TestRealNode(t *testing.T) {
	sandbox.RunVariants(t, sandbox.Variants(), testRealNode)
}

type realNode struct {
	ctx    context.Context
	sb     *sandbox.Sandbox
	plugin *sandbox.Plugin
}

func testRealNode(t *testing.T, v sandbox.Variant) {
	rt := v.Runtime
	sandbox.RequirePrereqs(t, rt)
	opts := v.Options()
	// No security plugin runs here, which the shipped containerd drop-in
	// requires: the test's pods tolerate its absence.
	opts.TolerateMissingPlugins = true
	n := &realNode{sb: sandbox.NewForTest(t, opts), ctx: sandbox.TestContext(t)}
	binary := harness.BuildPlugin(t, pluginPkg)
	// Next to the plugin, as `make build` puts it: where install.sh takes
	// it from when the runtime launches the plugin.
	helperBin := helpertest.Build(t, filepath.Dir(binary))
	spec := sandbox.PluginSpec{Binary: binary, Name: "sidecar-order", Idx: "20"}
	// As configuration, not flags: the runtime launches its plugins without.
	spec.Config = fmt.Appendf(nil, "helper: %s\nstate-dir: %s\n", helperBin, filepath.Join(n.sb.PluginDir(spec), "state"))
	if v.Launch == sandbox.LaunchExternal {
		spec.LogLevel = "debug" // for the logs of a failed run; the runtime sets no level
	}
	var err error
	n.plugin, err = n.sb.StartPlugin(spec)
	require.NoError(t, err)
	require.NoError(t, n.plugin.WaitReady(n.ctx))

	// CRI-O 1.34.0 vendors an NRI that predates args adjustments and drops
	// them silently: the plugin must notice and leave later pods alone.
	supported := n.argsApplied(t)
	ordered := func(t *testing.T) {
		if !supported {
			t.Skipf("%s drops NRI args adjustments (its NRI predates them): the helper cannot run", rt)
		}
	}
	if !supported {
		require.NotEqual(t, "containerd", rt, "containerd >= 2.2 applies NRI args adjustments")
		t.Run("ArgsDropped", func(t *testing.T) {
			n.eventuallyMetric(t, "nri_suite_sidecar_order_args_dropped_total", 1)
			pod := jobPod("after-drop", t.TempDir(), "echo app-exit >> /rec/events; exit 0")
			pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
			require.NoError(t, n.sb.WritePod(pod))
			for i, c := range []string{"proxy", "logs"} {
				ctr, err := n.sb.WaitContainer(n.ctx, pod.Name, c)
				require.NoError(t, err)
				assert.Equal(t, pod.Spec.Containers[i].Command, n.processArgs(t, ctr.ID), "container %s is left alone", c)
				out, err := n.sb.CRI().Exec(n.ctx, ctr.ID, "ls", helper.MountDir)
				assert.Error(t, err, "container %s has no %s: %s", c, helper.MountDir, out)
			}
			require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
		})
	}

	t.Run("Job", func(t *testing.T) {
		ordered(t)
		recs := map[string]string{}
		for _, name := range []string{"job-a", "job-b"} {
			recs[name] = t.TempDir()
			require.NoError(t, n.sb.WritePod(jobPod(name, recs[name], "echo app-exit >> /rec/events; exit 0")))
		}
		for name, rec := range recs {
			n.waitPhase(t, name, corev1.PodSucceeded)
			events := readEvents(t, rec)
			assert.Equal(t, []string{"proxy-ready", "app-saw-proxy-ready", "app-exit", "logs-term", "proxy-term"}, events,
				"pod %s: the main starts after the slow sidecar is ready; the sidecars stop after it, in reverse order", name)
			for _, c := range []string{"proxy", "logs", "app"} {
				assert.Equal(t, 0, n.exitCode(t, name, c), "pod %s container %s", name, c)
			}
		}
		n.eventuallyMetric(t, `nri_suite_sidecar_order_ordered_stops_total{trigger="mains-exited"}`, 4)
		n.eventuallyMetric(t, `nri_suite_sidecar_order_main_wait_seconds_count`, 2)
	})

	t.Run("Passthrough", func(t *testing.T) {
		ordered(t)
		rec := t.TempDir()
		// The trap waits a second before it exits: the container's init
		// exiting kills what still runs in it, the exec'd kill too (exit 137).
		pod := jobPod("passthrough", rec, `trap 'echo app-usr1 >> /rec/events; sleep 1; exit 42' USR1; while true; do sleep 1 & wait; done`)
		// The image's default command ("sh", which exits at once without a
		// terminal): what NRI passes as args must include it.
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "image-cmd", Image: sandbox.BusyboxImage,
			ImagePullPolicy: corev1.PullNever, VolumeMounts: pod.Spec.Containers[0].VolumeMounts})
		require.NoError(t, n.sb.WritePod(pod))
		app, err := n.sb.WaitContainer(n.ctx, pod.Name, "app")
		require.NoError(t, err)
		eventuallyEvent(t, rec, "app-saw-proxy-ready")
		cmdline, err := n.sb.ReadFile(n.ctx, app.ID, "/proc/1/cmdline")
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(cmdline, "sh\x00-c\x00"), "PID 1 is the main's own command, not the helper: %q", cmdline)
		assert.Equal(t, append(helperArgs(helper.RoleMain, "app"), "sh", "-c"), n.processArgs(t, app.ID)[:8],
			"the runtime runs the helper with the original args after --")
		_, err = n.sb.CRI().Exec(n.ctx, app.ID, "kill", "-USR1", "1")
		require.NoError(t, err)
		n.waitPhase(t, pod.Name, corev1.PodFailed)
		assert.Equal(t, 42, n.exitCode(t, pod.Name, "app"), "the exit code of the trapped signal")
		assert.Equal(t, 0, n.exitCode(t, pod.Name, "image-cmd"))
		assert.Equal(t, append(helperArgs(helper.RoleMain, "image-cmd"), "sh"), n.processArgs(t, n.containerID(t, pod.Name, "image-cmd")),
			"the image's command is in the args NRI passes (entrypoint and command merged by the runtime)")
		assert.Equal(t, 0, n.exitCode(t, pod.Name, "proxy"), "the sidecars are stopped after a failed main too")
		assert.Equal(t, []string{"proxy-ready", "app-saw-proxy-ready", "app-usr1", "logs-term", "proxy-term"}, readEvents(t, rec))
	})

	t.Run("Deletion", func(t *testing.T) {
		ordered(t)
		rec := t.TempDir()
		pod := jobPod("deleted", rec, `trap 'sleep 1; echo app-exit >> /rec/events; exit 0' TERM; while true; do sleep 1 & wait; done`)
		pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
		require.NoError(t, n.sb.WritePod(pod))
		app, err := n.sb.WaitContainer(n.ctx, pod.Name, "app")
		require.NoError(t, err)
		eventuallyEvent(t, rec, "app-saw-proxy-ready")
		stateDir := filepath.Join(n.sb.PluginDir(sandbox.PluginSpec{Name: "sidecar-order", Idx: "20"}), "state")
		assert.DirExists(t, filepath.Join(stateDir, app.PodUID), "the pod's coordination directory")
		require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
		assert.Equal(t, []string{"proxy-ready", "app-saw-proxy-ready", "app-exit", "logs-term", "proxy-term"}, readEvents(t, rec),
			"SIGTERM to every container: the sidecars exit after the main, last-started first")
		n.eventuallyMetric(t, `nri_suite_sidecar_order_ordered_stops_total{trigger="signal"}`, 2)
		assert.NoDirExists(t, filepath.Join(stateDir, app.PodUID), "removed with the pod")
	})

	t.Run("NoShellImage", func(t *testing.T) {
		ordered(t)
		n.noShellJob(t)
		n.noShellDeletion(t)
	})

	t.Run("UnknownSidecar", func(t *testing.T) {
		ordered(t)
		// "ghost" is no container of the pod: NRI does not show the pod's
		// spec, so the main's helper finds out by waiting its timeout.
		pod := pausePod("ghost")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Annotations[annotations.Sidecars] = "proxy,ghost"
		pod.Annotations[annotations.ReadyTimeout+"/container.ghost"] = "2s"
		require.NoError(t, n.sb.WritePod(pod))
		n.waitPhase(t, pod.Name, corev1.PodFailed)
		assert.Equal(t, helper.ExitFailed, n.exitCode(t, pod.Name, "app"), "on-timeout fail: the main's command is not started")
		assert.Equal(t, 0, n.exitCode(t, pod.Name, "proxy"), "the sidecar is stopped once the main has exited")
		logPath := n.inspect(t, n.containerID(t, pod.Name, "app")).Status.LogPath
		log, err := os.ReadFile(logPath)
		require.NoError(t, err)
		assert.Contains(t, string(log), "sidecar ghost was not ready (process) within 2s: no container of that name runs in this pod")
		assert.Contains(t, string(log), "on-timeout is fail: not starting the command")
		require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
	})

	t.Run("NativeSidecarUntouched", func(t *testing.T) {
		pod := sandbox.BusyboxPod("native", "main")
		always := corev1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers = []corev1.Container{{Name: "native", Image: sandbox.BusyboxImage, ImagePullPolicy: corev1.PullNever,
			RestartPolicy: &always, Command: pod.Spec.Containers[0].Command}}
		require.NoError(t, n.sb.WritePod(pod))
		for _, c := range []string{"native", "main"} {
			ctr, err := n.sb.WaitContainer(n.ctx, pod.Name, c)
			require.NoError(t, err)
			assert.Equal(t, pod.Spec.Containers[0].Command, n.processArgs(t, ctr.ID), "container %s runs its own command", c)
			out, err := n.sb.CRI().Exec(n.ctx, ctr.ID, "ls", helper.MountDir)
			assert.Error(t, err, "container %s has no %s: %s", c, helper.MountDir, out)
		}
		require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
	})
}

// argsApplied runs an annotated pod and says whether the runtime ran its
// sidecar behind the helper.
func (n *realNode) argsApplied(t *testing.T) bool {
	t.Helper()
	pod := jobPod("probe", t.TempDir(), "echo app-exit >> /rec/events; exit 0")
	require.NoError(t, n.sb.WritePod(pod))
	proxy, err := n.sb.WaitContainer(n.ctx, pod.Name, "proxy")
	require.NoError(t, err)
	args := n.processArgs(t, proxy.ID)
	t.Logf("%s runs the sidecar with args %q", n.sb.Runtime().Name(), args)
	// The rest of the adjustment is applied either way (the README says so).
	out, err := n.sb.CRI().Exec(n.ctx, proxy.ID, "ls", helper.MountDir)
	assert.NoError(t, err, "the helper's mounts in the first annotated container: %s", out)
	require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
	return args[0] == helper.BinaryPath
}

func helperArgs(role, container string) []string {
	return []string{helper.BinaryPath, "--role", role, "--container", container, "--"}
}

// jobPod is a restartPolicy Never pod with a sidecar "proxy" that is ready
// 3 s after it starts (a file in the shared /rec), a sidecar "logs" ready
// when it runs, and a main "app" that records whether proxy was ready when
// it started, then runs mainScript. Every container records its SIGTERM.
func jobPod(name, rec, mainScript string) *corev1.Pod {
	sidecar := func(c, ready string) string {
		return fmt.Sprintf(`trap 'echo %s-term >> /rec/events; exit 0' TERM; %s while true; do sleep 1 & wait; done`, c, ready)
	}
	pod := sandbox.BusyboxPod(name, "proxy", "logs", "app")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.TerminationGracePeriodSeconds = new(int64(30))
	pod.Annotations = map[string]string{
		annotations.Sidecars:                         "proxy,logs",
		annotations.Ready + "/container.proxy":       "file:/rec/proxy-ready",
		annotations.ReadyTimeout:                     "30s",
		annotations.OnTimeout:                        "fail",
		annotations.HoldTimeout:                      "10s",
		annotations.StopGrace:                        "5s",
		annotations.Ready + "/container.logs":        "process",
		annotations.ReadyTimeout + "/container.logs": "10s",
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "rec", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: rec}}}}
	scripts := []string{
		sidecar("proxy", `sleep 3; echo proxy-ready >> /rec/events; touch /rec/proxy-ready;`),
		sidecar("logs", ""),
		`if [ -e /rec/proxy-ready ]; then echo app-saw-proxy-ready; else echo app-saw-proxy-not-ready; fi >> /rec/events; ` + mainScript,
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Command = []string{"sh", "-c", scripts[i]}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "rec", MountPath: "/rec"}}
	}
	return pod
}

func readEvents(t *testing.T, rec string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rec, "events"))
	require.NoError(t, err)
	return strings.Fields(string(data))
}

func eventuallyEvent(t *testing.T, rec, event string) {
	t.Helper()
	poll(t, "event "+event, func() error {
		data, _ := os.ReadFile(filepath.Join(rec, "events"))
		if !strings.Contains(string(data), event) {
			return fmt.Errorf("events so far: %q", data)
		}
		return nil
	})
}

// poll waits for check to pass, within a bound far above what a step needs.
func poll(t *testing.T, what string, check func() error) {
	t.Helper()
	sandbox.Eventually(t, sandbox.TestContext(t), 60*time.Second, 200*time.Millisecond, what, check)
}

// waitPhase waits until the kubelet reports the static pod in phase.
func (n *realNode) waitPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	poll(t, fmt.Sprintf("pod %s to be %s", name, phase), func() error {
		got, err := n.phase(name)
		if err == nil && got != phase {
			err = fmt.Errorf("phase %q", got)
		}
		return err
	})
}

// phase asks the kubelet (its /pods, which carries the status of static
// pods when there is no API server) for the phase of a pod.
func (n *realNode) phase(name string) (corev1.PodPhase, error) {
	body, err := n.sb.KubeletGet(n.ctx, "/pods")
	if err != nil {
		return "", fmt.Errorf("asking the kubelet for its pods: %w", err)
	}
	var list corev1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("decoding the kubelet's pods: %w", err)
	}
	for _, p := range list.Items {
		if p.Name == n.sb.PodName(name) {
			return p.Status.Phase, nil
		}
	}
	return "", fmt.Errorf("the kubelet has no pod %s", n.sb.PodName(name))
}

// containerID returns the id of the latest container c of pod name, in any state.
func (n *realNode) containerID(t *testing.T, name, c string) string {
	t.Helper()
	cs, err := n.sb.CRI().Containers(n.ctx)
	require.NoError(t, err)
	var id string
	var attempt uint32
	for _, ctr := range cs {
		if ctr.Pod == n.sb.PodName(name) && ctr.Name == c && (id == "" || ctr.Attempt >= attempt) {
			id, attempt = ctr.ID, ctr.Attempt
		}
	}
	require.NotEmpty(t, id, "container %s of pod %s", c, name)
	return id
}

// crictlInspect is the part of `crictl inspect` this test reads.
type crictlInspect struct {
	Status struct {
		State      string    `json:"state"`
		ExitCode   int       `json:"exitCode"`
		FinishedAt time.Time `json:"finishedAt"`
		LogPath    string    `json:"logPath"`
	} `json:"status"`
	Info struct {
		PID         int `json:"pid"`
		RuntimeSpec struct {
			Process struct {
				Args []string `json:"args"`
			} `json:"process"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

func (n *realNode) inspect(t *testing.T, id string) crictlInspect {
	t.Helper()
	out, err := n.sb.CRI().Crictl(n.ctx, "inspect", "-o", "json", id)
	require.NoError(t, err)
	var in crictlInspect
	require.NoError(t, json.Unmarshal(out, &in), "crictl inspect output: %s", out)
	return in
}

// exitCode is the exit code CRI reports for the container c of pod name,
// once it exited.
func (n *realNode) exitCode(t *testing.T, name, c string) int {
	t.Helper()
	in := n.inspect(t, n.containerID(t, name, c))
	require.Equal(t, "CONTAINER_EXITED", in.Status.State, "container %s of pod %s", c, name)
	return in.Status.ExitCode
}

// processArgs are the args the runtime gave the container's process.
func (n *realNode) processArgs(t *testing.T, id string) []string {
	t.Helper()
	args := n.inspect(t, id).Info.RuntimeSpec.Process.Args
	require.NotEmpty(t, args, "process args of container %s in crictl inspect", id)
	return args
}

// eventuallyMetric waits until the plugin's sample named metric (with its
// labels) reaches at least min.
func (n *realNode) eventuallyMetric(t *testing.T, metric string, min float64) {
	t.Helper()
	poll(t, fmt.Sprintf("%s >= %v", metric, min), func() error {
		body, err := sandbox.HTTPGet(n.ctx, "http://"+n.plugin.HTTPAddr()+"/metrics")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, metric+" "); ok {
				var got float64
				if _, err := fmt.Sscan(v, &got); err != nil || got < min {
					return fmt.Errorf("%s is %s", metric, v)
				}
				return nil
			}
		}
		return fmt.Errorf("no sample %s", metric)
	})
}

// pausePod is an annotated pod whose sidecar "proxy" and main "app" run the
// pause image: a static /pause and no other file, no shell. Neither has a
// command, so what the helper runs is the image's entrypoint.
func pausePod(name string) *corev1.Pod {
	pod := sandbox.BusyboxPod(name, "proxy", "app")
	pod.Spec.TerminationGracePeriodSeconds = new(int64(30))
	pod.Annotations = map[string]string{
		annotations.Sidecars:     "proxy",
		annotations.Ready:        "process",
		annotations.ReadyTimeout: "30s",
		annotations.OnTimeout:    "fail",
		annotations.HoldTimeout:  "10s",
		annotations.StopGrace:    "5s",
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Image, pod.Spec.Containers[i].Command = sandbox.PauseImage, nil
	}
	return pod
}

// pauseBehindHelper checks that the pause containers of pod name run the
// image's /pause behind the helper, seen from the host (the image has no
// cat to read /proc with): the main's PID 1 becomes /pause itself, exec'd
// by the helper; the sidecar's PID 1 is the helper, with /pause as its
// child. It returns the host PIDs of the main's and the sidecar's /pause.
func (n *realNode) pauseBehindHelper(t *testing.T, name string) (app, proxy int) {
	t.Helper()
	pids := map[string]int{}
	for _, c := range []struct{ name, role string }{{"proxy", helper.RoleSidecar}, {"app", helper.RoleMain}} {
		ctr, err := n.sb.WaitContainer(n.ctx, name, c.name)
		require.NoError(t, err)
		assert.Equal(t, append(helperArgs(c.role, c.name), "/pause"), n.processArgs(t, ctr.ID),
			"container %s: the helper in front of the image's entrypoint", c.name)
		out, err := n.sb.CRI().Exec(n.ctx, ctr.ID, "sh", "-c", "true")
		require.Error(t, err, "container %s: the pause image has no shell: %s", c.name, out)
		pids[c.name] = n.inspect(t, ctr.ID).Info.PID
		require.Positive(t, pids[c.name], "host PID of container %s", c.name)
	}
	poll(t, "the main's helper to exec /pause", func() error {
		if got := hostCmdline(pids["app"]); !slices.Equal(got, []string{"/pause"}) {
			return fmt.Errorf("PID 1 of app runs %q", got)
		}
		return nil
	})
	assert.Equal(t, append(helperArgs(helper.RoleSidecar, "proxy"), "/pause"), hostCmdline(pids["proxy"]),
		"PID 1 of the sidecar is the helper")
	var children []int
	poll(t, "the sidecar's helper to start /pause", func() error {
		if children = hostChildren(pids["proxy"]); len(children) != 1 {
			return fmt.Errorf("children of the sidecar's helper: %v", children)
		}
		return nil
	})
	assert.Equal(t, []string{"/pause"}, hostCmdline(children[0]), "the sidecar's helper runs /pause as its child")
	return pids["app"], children[0]
}

// noShellJob: the main's /pause exits 0 on SIGTERM like a Job's main
// completing; the sidecar's helper then stops its /pause and the kubelet
// reports the pod Succeeded, the sidecar having finished after the main.
func (n *realNode) noShellJob(t *testing.T) {
	pod := pausePod("no-shell-job")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	require.NoError(t, n.sb.WritePod(pod))
	app, _ := n.pauseBehindHelper(t, pod.Name)
	require.NoError(t, syscall.Kill(app, syscall.SIGTERM))
	n.waitPhase(t, pod.Name, corev1.PodSucceeded)
	finished := map[string]time.Time{}
	for _, c := range []string{"proxy", "app"} {
		assert.Equal(t, 0, n.exitCode(t, pod.Name, c), "container %s", c)
		finished[c] = n.inspect(t, n.containerID(t, pod.Name, c)).Status.FinishedAt
	}
	assert.True(t, finished["proxy"].After(finished["app"]),
		"the sidecar finished after the main: app at %s, proxy at %s", finished["app"], finished["proxy"])
	require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
}

// noShellDeletion: a pause pod with a second main that takes 1 s to exit
// after SIGTERM is deleted (SIGTERM to every container at once): the
// sidecar's /pause, watched from the host, exits only after both mains.
func (n *realNode) noShellDeletion(t *testing.T) {
	rec := t.TempDir()
	pod := pausePod("no-shell-deleted")
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Volumes = []corev1.Volume{{Name: "rec", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: rec}}}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "slow", Image: sandbox.BusyboxImage,
		ImagePullPolicy: corev1.PullNever, VolumeMounts: []corev1.VolumeMount{{Name: "rec", MountPath: "/rec"}},
		Command: []string{"sh", "-c", `trap 'sleep 1; echo slow-exit >> /rec/events; exit 0' TERM; while true; do sleep 1 & wait; done`}})
	require.NoError(t, n.sb.WritePod(pod))
	app, proxy := n.pauseBehindHelper(t, pod.Name)
	_, err := n.sb.WaitContainer(n.ctx, pod.Name, "slow")
	require.NoError(t, err)

	// What had happened when the sidecar's /pause exited.
	type seen struct {
		exited, appExited bool
		events            string
	}
	watched := make(chan seen, 1)
	go func() {
		deadline := time.Now().Add(2 * time.Minute)
		for !hostExited(proxy) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		events, _ := os.ReadFile(filepath.Join(rec, "events"))
		watched <- seen{exited: hostExited(proxy), appExited: hostExited(app), events: string(events)}
	}()
	require.NoError(t, n.sb.RemovePod(n.ctx, pod.Name))
	got := <-watched
	require.True(t, got.exited, "the sidecar's /pause exited")
	assert.True(t, got.appExited, "the pause main had exited when the sidecar's /pause did")
	assert.Equal(t, []string{"slow-exit"}, strings.Fields(got.events), "the slow main had exited when the sidecar's /pause did")
}

// hostCmdline is the command line of a host process; nil once it is gone.
func hostCmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// hostChildren are the PIDs of a host process' children. The kernel lists
// them per thread (the one that forked), and the helper is a Go program
// with several threads: every thread's list counts.
func hostChildren(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, file := range files {
		data, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(f); err == nil {
				pids = append(pids, child)
			}
		}
	}
	return pids
}

// hostExited says whether a host process has exited: gone, or a zombie.
func hostExited(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold any character.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}
