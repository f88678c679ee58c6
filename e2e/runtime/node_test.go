package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nri-suite/nri-suite/e2e/testplugin/syncreport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The acceptance of the real node: every scenario runs on every runtime.
func TestRealNode(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, runtime string)
	}{
		{"PluginEnvInKubeletContainer", testPluginEnv},
		{"RuntimeRestart", testRuntimeRestart},
		{"KubeletQoSCgroupsAndLabels", testKubeletQoS},
		{"TeardownAfterRuntimeCrash", testTeardownAfterCrash},
	}
	for _, rt := range RuntimeNames() {
		t.Run(rt, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, rt) })
			}
		})
	}
}

// testPluginBinary builds the test-only plugin once per test binary.
var testPluginBinary = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return BuildPlugin(ctx, "./e2e/testplugin", pluginBuildDir, "nri-e2e-test")
})

// pluginBuildDir holds binaries built for this test run; TestMain removes it.
var pluginBuildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nri-sandbox-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating plugin build dir:", err)
		os.Exit(1)
	}
	pluginBuildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func requirePlugin(t *testing.T) string {
	t.Helper()
	bin, err := testPluginBinary()
	require.NoError(t, err, "building the test plugin")
	return bin
}

// testPluginConfig is the test plugin's YAML configuration.
func testPluginConfig(env map[string]string, syncReport string) []byte {
	var b strings.Builder
	if len(env) > 0 {
		b.WriteString("env:\n")
		for k, v := range env {
			fmt.Fprintf(&b, "  %s: %q\n", k, v)
		}
	}
	if syncReport != "" {
		fmt.Fprintf(&b, "syncReport: %q\n", syncReport)
	}
	return []byte(b.String())
}

// waitSyncReport polls the report until accept takes it or ctx ends.
func waitSyncReport(ctx context.Context, path string, accept func(syncreport.Report) bool) (syncreport.Report, error) {
	var last syncreport.Report
	var lastErr error
	for {
		r, found, err := syncreport.Read(path)
		if found {
			last = r
			if accept(r) {
				return r, nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for sync report %s: %w (last: %+v, error: %v)", path, ctx.Err(), last, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func testPluginEnv(t *testing.T, rt string) {
	RequirePrereqs(t, rt)
	bin := requirePlugin(t)
	preValue := "pre-" + strconv.FormatUint(rand.Uint64(), 36)
	begin := time.Now()
	sb := NewForTest(t, Options{Runtime: rt, TolerateMissingPlugins: true, PreRegistered: []PluginSpec{{
		Binary: bin, Name: "e2e-pre", Idx: "20",
		Config: testPluginConfig(map[string]string{"NRI_SANDBOX_PRE": preValue}, ""),
	}}})
	ctx := TestContext(t)

	// Without an env config the plugin adds NRI_SUITE_E2E=<its name>.
	ext, err := sb.StartPlugin(PluginSpec{Binary: bin, Name: "e2e-ext", Idx: "60"})
	require.NoError(t, err)
	require.NoError(t, ext.WaitReady(ctx))

	pod := BusyboxPod("env")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FROM_MANIFEST", Value: "yes"}}
	require.NoError(t, sb.WritePod(pod))
	c, err := sb.WaitContainer(ctx, "env", "main")
	require.NoError(t, err)
	t.Logf("clean state to a running container (runtime, kubelet, two plugins): %s", time.Since(begin).Round(time.Millisecond))

	environ, err := sb.Environ(ctx, c.ID)
	require.NoError(t, err)
	assert.Equal(t, "e2e-ext", environ["NRI_SUITE_E2E"], "env of the external plugin in /proc/1/environ")
	assert.Equal(t, preValue, environ["NRI_SANDBOX_PRE"], "env of the pre-registered plugin (configured through conf.d)")
	assert.Equal(t, "yes", environ["FROM_MANIFEST"], "env of the manifest")

	// A process started later in the container sees the same environment.
	out, err := sb.CRI().Exec(ctx, c.ID, "env")
	require.NoError(t, err)
	assert.Contains(t, strings.Split(out, "\n"), "NRI_SUITE_E2E=e2e-ext")
	assert.Contains(t, strings.Split(out, "\n"), "NRI_SANDBOX_PRE="+preValue)
}

// restartPod is a pod of the runtime-restart scenario.
type restartPod struct {
	name       string
	containers []string
}

// restartWant is how the plugin must report a container after the restart.
type restartWant struct{ pod, namespace, container string }

// restartPods makes and removes the pods of the runtime-restart scenario one
// way: as static pods of the kubelet, or through raw CRI on a node without a
// kubelet (a kubelet stops every pod it did not create, see
// Options.NoKubelet).
type restartPods struct {
	name      string
	noKubelet bool
	// start runs the pod and returns its containers by id, once they run.
	start  func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod) map[string]restartWant
	remove func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod)
}

// rawNamespace is the namespace of the pods made through raw CRI.
const rawNamespace = "raw-ns"

var restartPodKinds = []restartPods{
	{
		name: "KubeletPods",
		start: func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod) map[string]restartWant {
			require.NoError(t, sb.WritePod(BusyboxPod(pod.name, pod.containers...)))
			got := map[string]restartWant{}
			for _, name := range pod.containers {
				c, err := sb.WaitContainer(ctx, pod.name, name)
				require.NoError(t, err)
				got[c.ID] = restartWant{sb.PodName(pod.name), "default", name}
			}
			return got
		},
		remove: func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod) {
			require.NoError(t, sb.RemovePod(ctx, pod.name))
		},
	},
	{
		name:      "RawCRIPods",
		noKubelet: true,
		start: func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod) map[string]restartWant {
			ids := runRawCRIPod(ctx, t, sb, pod.name, rawNamespace, pod.containers...)
			got := map[string]restartWant{}
			for i, id := range ids {
				got[id] = restartWant{pod.name, rawNamespace, pod.containers[i]}
			}
			return got
		},
		remove: func(ctx context.Context, t *testing.T, sb *Sandbox, pod restartPod) {
			pods, err := sb.CRI().PodSandboxes(ctx)
			require.NoError(t, err)
			for _, p := range pods {
				if p.Name == pod.name && p.Namespace == rawNamespace {
					require.NoError(t, sb.CRI().RemovePodSandbox(ctx, p.ID))
				}
			}
		},
	},
}

// testRuntimeRestart kills the runtime with SIGKILL and starts it again: the
// containers stay up in their shims, the plugin registers again and gets
// every container in its Synchronize, and it adjusts new containers.
func testRuntimeRestart(t *testing.T, rt string) {
	for _, kind := range restartPodKinds {
		t.Run(kind.name, func(t *testing.T) { runRuntimeRestart(t, rt, kind) })
	}
}

func runRuntimeRestart(t *testing.T, rt string, kind restartPods) {
	RequirePrereqs(t, rt)
	bin := requirePlugin(t)
	sb := NewForTest(t, Options{Runtime: rt, NoKubelet: kind.noKubelet, TolerateMissingPlugins: true})
	ctx := TestContext(t)
	// In the run dir: the plugin writes a last report when it is stopped at
	// teardown, after a t.TempDir would be gone.
	reportPath := filepath.Join(sb.Dir(), "plugins", "sync.json")
	plugin, err := sb.StartPlugin(PluginSpec{Binary: bin, Name: "e2e-restart", Idx: "50", Config: testPluginConfig(nil, reportPath)})
	require.NoError(t, err)
	require.NoError(t, plugin.WaitReady(ctx))
	first, err := waitSyncReport(ctx, reportPath, func(r syncreport.Report) bool { return r.Synchronizations >= 1 })
	require.NoError(t, err)

	pods := []restartPod{{"restart-a", []string{"main"}}, {"restart-b", []string{"main", "side"}}}
	wants := map[string]restartWant{}
	podOf := map[string]string{} // container id -> pod
	for _, pod := range pods {
		for id, w := range kind.start(ctx, t, sb, pod) {
			wants[id] = w
			podOf[id] = pod.name
		}
	}

	pids := map[string]int{}
	for id := range wants {
		info, err := sb.CRI().Inspect(ctx, id)
		require.NoError(t, err)
		require.NotZero(t, info.PID, "pid of container %s", id)
		pids[id] = info.PID
	}

	killed := time.Now()
	require.NoError(t, sb.RestartRuntime(ctx))

	// The plugin registers again by itself and gets a new Synchronize.
	pollCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	report, err := waitSyncReport(pollCtx, reportPath, func(r syncreport.Report) bool { return r.Synchronizations > first.Synchronizations })
	require.NoError(t, err, "the plugin did not synchronize again after the runtime restart")
	t.Logf("runtime killed to plugin synchronized again: %s", time.Since(killed).Round(time.Millisecond))
	assert.True(t, plugin.Running(), "the plugin process survives the runtime restart")

	got := map[string]restartWant{}
	for _, c := range report.Containers {
		if _, ok := wants[c.ID]; ok {
			assert.Equal(t, "CONTAINER_RUNNING", c.State, "state of %s/%s in the report", c.Pod, c.Container)
			got[c.ID] = restartWant{c.Pod, c.Namespace, c.Container}
		}
	}
	assert.Equal(t, wants, got, "containers in the Synchronize after the restart")

	// The containers survived in their shims: same init process.
	for id, pid := range pids {
		info, err := sb.CRI().Inspect(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, pid, info.PID, "pid of container %s after the restart", id)
	}

	// And the reconnected plugin adjusts new containers again.
	for id := range kind.start(ctx, t, sb, restartPod{"restart-c", []string{"main"}}) {
		environ, err := sb.Environ(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "e2e-restart", environ["NRI_SUITE_E2E"], "env of container %s created after the restart", id)
	}

	// Removing a pod leaves none of its containers.
	kind.remove(ctx, t, sb, pods[0])
	all, err := sb.CRI().Containers(ctx)
	require.NoError(t, err)
	for _, c := range all {
		assert.NotEqual(t, pods[0].name, podOf[c.ID], "container %s of the removed pod %s", c.ID, pods[0].name)
	}
}

// runRawCRIPod runs a host-network pod with long-running busybox containers
// through crictl, the way a test does what the kubelet cannot express, and
// returns the containers' ids once they run. The sandbox must run without a
// kubelet (Options.NoKubelet).
func runRawCRIPod(ctx context.Context, t *testing.T, sb *Sandbox, name, namespace string, containers ...string) []string {
	t.Helper()
	// Host network (2, NODE) and a PID namespace per container (1,
	// CONTAINER): with a pod-level one, CRI-O starts an infra container
	// with oom_score_adj -998, which these hosts refuse.
	namespaceOptions := map[string]any{"network": 2, "pid": 1}
	podConfig := map[string]any{
		"metadata": map[string]any{"name": name, "namespace": namespace, "uid": fmt.Sprintf("raw-%d", rand.Uint32()), "attempt": 0},
		"linux": map[string]any{
			"cgroup_parent":    sb.CgroupRoot() + "/" + name,
			"security_context": map[string]any{"namespace_options": namespaceOptions},
		},
	}
	podID, err := sb.CRI().RunPodSandbox(ctx, podConfig)
	require.NoError(t, err)
	ids := make([]string, 0, len(containers))
	for _, container := range containers {
		ctrConfig := map[string]any{
			"metadata": map[string]any{"name": container},
			"image":    map[string]any{"image": BusyboxImage},
			"command":  []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"},
			"labels":   map[string]string{LabelContainerName: container},
			"linux":    map[string]any{"security_context": map[string]any{"namespace_options": namespaceOptions}},
		}
		id, err := sb.CRI().CreateContainer(ctx, podID, ctrConfig, podConfig)
		require.NoError(t, err)
		require.NoError(t, sb.CRI().StartContainer(ctx, id))
		ids = append(ids, id)
	}
	return ids
}

func testKubeletQoS(t *testing.T, rt string) {
	RequirePrereqs(t, rt)
	sb := NewForTest(t, Options{Runtime: rt, TolerateMissingPlugins: true})
	ctx := TestContext(t)

	// The kubelet works in an empty directory of its own: its container log
	// cleanup removes LogPath+"*" relative to it.
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", sb.kubelet.process.PID()))
	require.NoError(t, err)
	assert.Equal(t, kubeletWorkDir(sb.kubelet.dir), cwd, "the kubelet's working directory")
	entries, err := os.ReadDir(cwd)
	require.NoError(t, err)
	assert.Empty(t, entries, "the kubelet's working directory holds nothing")

	resources := func(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		for _, q := range []struct {
			list  corev1.ResourceList
			name  corev1.ResourceName
			value string
		}{{r.Requests, corev1.ResourceCPU, cpuReq}, {r.Limits, corev1.ResourceCPU, cpuLim},
			{r.Requests, corev1.ResourceMemory, memReq}, {r.Limits, corev1.ResourceMemory, memLim}} {
			if q.value != "" {
				q.list[q.name] = resource.MustParse(q.value)
			}
		}
		return r
	}
	tests := []struct {
		pod       string
		resources corev1.ResourceRequirements
		qosDir    string // below kubepods; Guaranteed pods sit directly in it
	}{
		{pod: "qos-besteffort", qosDir: "/besteffort"},
		{pod: "qos-burstable", resources: resources("250m", "", "", "64Mi"), qosDir: "/burstable"},
		{pod: "qos-guaranteed", resources: resources("500m", "500m", "64Mi", "64Mi"), qosDir: ""},
	}
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			pod := BusyboxPod(tt.pod)
			pod.Spec.Containers[0].Resources = tt.resources
			if reason := sb.CannotRun(pod); reason != "" {
				t.Skip(reason)
			}
			require.NoError(t, sb.WritePod(pod))
			c, err := sb.WaitContainer(ctx, tt.pod, "main")
			require.NoError(t, err)

			// The kubelet's labels.
			assert.Equal(t, sb.PodName(tt.pod), c.Labels[LabelPodName])
			assert.Equal(t, "default", c.Labels[LabelPodNamespace])
			assert.Equal(t, "main", c.Labels[LabelContainerName])
			require.NotEmpty(t, c.PodUID)
			sandboxes, err := sb.CRI().PodSandboxes(ctx)
			require.NoError(t, err)
			var podSandbox *PodSandbox
			for i := range sandboxes {
				if sandboxes[i].ID == c.PodSandboxID {
					podSandbox = &sandboxes[i]
				}
			}
			require.NotNil(t, podSandbox, "pod sandbox %s of container %s", c.PodSandboxID, c.ID)
			assert.Equal(t, c.PodUID, podSandbox.UID)
			assert.Equal(t, "file", podSandbox.Annotations["kubernetes.io/config.source"], "a static pod's config source")

			// The kubelet's QoS cgroup, as the runtime got it and inside the container.
			info, err := sb.CRI().Inspect(ctx, c.ID)
			require.NoError(t, err)
			podCgroup := sb.CgroupRoot() + "/kubepods" + tt.qosDir + "/pod" + c.PodUID
			require.True(t, strings.HasPrefix(info.CgroupsPath, podCgroup+"/"), "cgroupsPath %s is below %s", info.CgroupsPath, podCgroup)
			selfCgroup, err := sb.ReadFile(ctx, c.ID, "/proc/self/cgroup")
			require.NoError(t, err)
			assert.Contains(t, selfCgroup, podCgroup)

			// The kubelet's CPU and memory settings on the host's cgroups.
			cpu := tt.resources.Requests.Cpu().MilliValue()
			wantShares := int64(2) // the kubelet's minimum, for pods without a CPU request
			if cpu > 0 {
				wantShares = cpu * 1024 / 1000
			}
			assert.Equal(t, strconv.FormatInt(wantShares, 10), readHostCgroup(t, "cpu", info.CgroupsPath, "cpu.shares"))
			if limit := tt.resources.Limits.Cpu().MilliValue(); limit > 0 {
				assert.Equal(t, strconv.FormatInt(limit*100, 10), readHostCgroup(t, "cpu", info.CgroupsPath, "cpu.cfs_quota_us"), "quota for a %dm limit with a 100ms period", limit)
			}
			if limit := tt.resources.Limits.Memory().Value(); limit > 0 {
				assert.Equal(t, strconv.FormatInt(limit, 10), readHostCgroup(t, "memory", info.CgroupsPath, "memory.limit_in_bytes"))
				inside, err := sb.ReadCgroup(ctx, c.ID, MemoryLimit)
				require.NoError(t, err)
				assert.Equal(t, strconv.FormatInt(limit, 10), inside, "memory limit seen inside the container")
			}
		})
	}
}

// readHostCgroup reads a cgroup v1 file of a cgroup on the host.
func readHostCgroup(t *testing.T, controller, cgroupsPath, file string) string {
	t.Helper()
	dir, err := CgroupDir(controller, cgroupsPath)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// testTeardownAfterCrash shows that the leftover check sees a live sandbox,
// and that teardown still leaves nothing when the runtime died first and the
// containers have to be found by PID, mount and cgroup.
func testTeardownAfterCrash(t *testing.T, rt string) {
	RequirePrereqs(t, rt)
	bin := requirePlugin(t)
	sysctlsBefore := readSysctls(t)
	ctx := TestContext(t)
	sb, err := Start(ctx, Options{Runtime: rt, Log: TestLogger(t), TolerateMissingPlugins: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() }) // a net for failed requires; Close is idempotent

	plugin, err := sb.StartPlugin(PluginSpec{Binary: bin, Name: "e2e-teardown", Idx: "50"})
	require.NoError(t, err)
	require.NoError(t, plugin.WaitReady(ctx))
	require.NoError(t, sb.WritePod(BusyboxPod("teardown", "main", "side")))
	c, err := sb.WaitContainer(ctx, "teardown", "main")
	require.NoError(t, err)
	info, err := sb.CRI().Inspect(ctx, c.ID)
	require.NoError(t, err)

	live := strings.Join(sb.Leftovers(), "\n")
	assert.Contains(t, live, fmt.Sprintf("process %d ", info.PID), "the container's init process is seen as the sandbox's")
	assert.Contains(t, live, fmt.Sprintf("process %d ", plugin.PID()), "the plugin is seen as the sandbox's")
	assert.Contains(t, live, "mount "+sb.Dir()+"/", "the container's rootfs mount is seen")
	assert.Contains(t, live, "cgroup /sys/fs/cgroup/", "the cgroup root is seen")

	require.NoError(t, syscall.Kill(sb.Runtime().PID(), syscall.SIGKILL))
	require.NoError(t, sb.Close())
	assert.Empty(t, sb.Leftovers())
	assert.Equal(t, sysctlsBefore, readSysctls(t), "sysctls after teardown")
	_, err = os.Stat(filepath.Join("/proc", strconv.Itoa(info.PID)))
	assert.True(t, errors.Is(err, os.ErrNotExist) || isZombie(info.PID), "container init process %d is gone", info.PID)
}

func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range kubeletSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		require.NoError(t, err)
		out[name] = strings.TrimSpace(string(data))
	}
	return out
}
