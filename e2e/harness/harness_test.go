package harness_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/e2e/testplugin/syncreport"
)

const testPlugin = "./e2e/testplugin"

func TestMain(m *testing.M) { harness.Main(m) }

func pod(t testing.TB, name string) *v1.Pod {
	return harness.LoadPod(t, filepath.Join("..", "..", "common", "kubepod", "testdata", "pods", name))
}

func readReport(t *testing.T, path string) syncreport.Report {
	t.Helper()
	r, found, err := syncreport.Read(path)
	require.NoError(t, err)
	require.True(t, found, "no sync report at %s", path)
	return r
}

func TestExternalPluginAdjustsSpec(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	tests := []struct {
		name   string
		config string
		want   map[string]string
	}{
		{"default env names the plugin", "", map[string]string{"NRI_SUITE_E2E": "e2e-test"}},
		{"configured env", "env:\n  FOO: bar\n  ROLE: overridden\n", map[string]string{"FOO": "bar", "ROLE": "overridden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := harness.New(t)
			var opts []harness.PluginOption
			if tc.config != "" {
				opts = append(opts, harness.WithConfig(tc.config))
			}
			p := rt.StartPlugin(t, bin, "50", "e2e-test", opts...)
			assert.NotZero(t, p.PID())
			assert.Equal(t, 1, rt.SyncCount("50-e2e-test"))

			pd := rt.RunPod(t, pod(t, "guaranteed.yaml"))
			for _, c := range pd.Containers() {
				for k, v := range tc.want {
					c.RequireEnv(t, k, v)
				}
				// The spec keeps what containerd put there.
				c.RequireEnv(t, "HOSTNAME", kubepod.DefaultNodeName)
				assert.Equal(t, api.ContainerState_CONTAINER_RUNNING, c.State())
				require.NotNil(t, c.Adjustment())
				assert.Len(t, c.Adjustment().Env, len(tc.want))
			}
			// A variable the plugin replaces keeps a single entry.
			app := pd.Container("app")
			wantRole := "app"
			if v, ok := tc.want["ROLE"]; ok {
				wantRole = v
			}
			app.RequireEnv(t, "ROLE", wantRole)
			count := 0
			for _, kv := range app.Spec().Process.Env {
				if len(kv) > 5 && kv[:5] == "ROLE=" {
					count++
				}
			}
			assert.Equal(t, 1, count)
			// Resources are what the kubelet asked for: the plugin left them alone.
			spec := app.Spec()
			assert.Equal(t, uint64(2048), spec.CPUShares())
			assert.Equal(t, int64(200000), spec.CPUQuota())
			assert.Equal(t, int64(256<<20), spec.MemoryLimit())
			adj, ok := spec.OOMScoreAdj()
			assert.True(t, ok)
			assert.Equal(t, -997, adj)
		})
	}
}

func TestPreRegisteredPluginGetsConfigThroughNRI(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	rt := harness.New(t, harness.WithPreRegistered(harness.PreRegisteredPlugin{
		Index: "20", Name: "pre", Binary: bin,
		Config: "env:\n  FROM_CONF_D: \"yes\"\n",
	}))
	_, err := os.Stat(filepath.Join(rt.PluginDir(), "20-pre"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(rt.ConfigDir(), "20-pre.conf"))
	require.NoError(t, err)
	assert.Equal(t, 1, rt.SyncCount("20-pre"))

	pd := rt.RunPod(t, pod(t, "besteffort.yaml"))
	c := pd.Container("idle")
	c.RequireEnv(t, "FROM_CONF_D", "yes")
	c.RequireNoEnv(t, "NRI_SUITE_E2E")
	assert.NotEmpty(t, rt.PreRegisteredLog("20-pre"), "the launched plugin's output is captured")
}

func TestPluginsRunInIndexOrder(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	rt := harness.New(t)
	// Connected in the opposite order and named against the alphabet, so
	// only the index can put "first" first.
	rt.StartPlugin(t, bin, "20", "b-second", harness.WithConfig("env:\n  A_SECOND: \"2\"\n"))
	rt.StartPlugin(t, bin, "10", "z-first", harness.WithConfig("env:\n  Z_FIRST: \"1\"\n"))

	pd := rt.RunPod(t, pod(t, "besteffort.yaml"))
	env := pd.Container("idle").Spec().Process.Env
	require.GreaterOrEqual(t, len(env), 2)
	assert.Equal(t, []string{"Z_FIRST=1", "A_SECOND=2"}, env[len(env)-2:])
}

func TestConflictingPluginsFailCreation(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	rt := harness.New(t)
	report := filepath.Join(t.TempDir(), "sync.json")
	rt.StartPlugin(t, bin, "10", "one", harness.WithConfig("env:\n  SAME: \"1\"\n"))
	p := rt.StartPlugin(t, bin, "20", "two", harness.WithConfig("env:\n  SAME: \"2\"\nsyncReport: "+report+"\n"))

	pd := rt.NewPod(t, pod(t, "besteffort.yaml"))
	require.NoError(t, rt.RunPodSandbox(pd))
	c := pd.Container("idle")
	err := rt.CreateContainer(c)
	require.ErrorContains(t, err, "SAME")
	require.ErrorContains(t, err, "creating container idle of pod default/besteffort")
	assert.Equal(t, api.ContainerState_CONTAINER_UNKNOWN, c.State())

	// The failed container is not live: a new Synchronize does not carry it.
	p.Kill(t)
	p.Restart(t)
	assert.Empty(t, readReport(t, report).Containers)
}

func TestRuntimeRestartSynchronizesLiveContainers(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	dir := t.TempDir()
	preReport := filepath.Join(dir, "pre.json")
	extReport := filepath.Join(dir, "ext.json")
	rt := harness.New(t, harness.WithPreRegistered(harness.PreRegisteredPlugin{
		Index: "10", Name: "pre", Binary: bin, Config: "env: {PRE: \"1\"}\nsyncReport: " + preReport + "\n",
	}))
	ext := rt.StartPlugin(t, bin, "50", "ext", harness.WithConfig("env: {EXT: \"1\"}\nsyncReport: "+extReport+"\n"))
	assert.Empty(t, readReport(t, extReport).Containers, "nothing ran before the plugin connected")

	sidecars := rt.RunPod(t, pod(t, "with-sidecar.yaml"))
	gone := rt.RunPod(t, pod(t, "burstable.yaml"))
	rt.RunPod(t, pod(t, "besteffort.yaml"))
	rt.RemovePod(t, gone)
	assert.Equal(t, api.ContainerState_CONTAINER_STOPPED, sidecars.Container("setup").State(), "the init container ran to completion")

	rt.Restart(t)
	ext.WaitSynchronized(t)

	// Exited init containers and removed pods are not carried over.
	want := []string{"besteffort/idle", "with-sidecar/main", "with-sidecar/proxy"}
	extSync := readReport(t, extReport)
	assert.Equal(t, 2, extSync.Synchronizations, "the external plugin kept running and synchronized again")
	assert.Equal(t, want, extSync.PodContainers())
	for _, c := range extSync.Containers {
		assert.Equal(t, "CONTAINER_RUNNING", c.State, c.Container)
	}
	assert.Equal(t, sidecars.Container("main").ID(), extSync.Containers[1].ID)

	preSync := readReport(t, preReport)
	assert.Equal(t, 1, preSync.Synchronizations, "the runtime launched a new pre-registered plugin process")
	assert.Equal(t, want, preSync.PodContainers())
	assert.Equal(t, 2, rt.SyncCount("10-pre"))

	// The restarted runtime serves new containers through both plugins.
	later := rt.RunPod(t, pod(t, "guaranteed.yaml"))
	later.Container("app").RequireEnv(t, "PRE", "1")
	later.Container("app").RequireEnv(t, "EXT", "1")
}

func TestPluginRestartSynchronizesLiveContainers(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	report := filepath.Join(t.TempDir(), "sync.json")
	rt := harness.New(t)
	p := rt.StartPlugin(t, bin, "50", "e2e-test", harness.WithConfig("syncReport: "+report+"\n"))
	rt.RunPod(t, pod(t, "guaranteed.yaml"))
	firstPID := p.PID()

	p.Kill(t)
	assert.Zero(t, p.PID())
	// Without the plugin the runtime goes on, as containerd does.
	bare := rt.RunPod(t, pod(t, "besteffort.yaml"))
	bare.Container("idle").RequireNoEnv(t, "NRI_SUITE_E2E")

	p.Restart(t)
	assert.NotEqual(t, firstPID, p.PID())
	r := readReport(t, report)
	assert.Equal(t, 1, r.Synchronizations, "a new process")
	assert.Equal(t, []string{"besteffort/idle", "guaranteed/app", "guaranteed/helper"}, r.PodContainers())

	p.Stop(t)
	assert.Zero(t, p.PID())
}

// TestOldProcessLeavesItsSuccessorsStatus: two processes of one plugin share
// the node's shared state, as a DaemonSet's old pod stopping beside its new
// one does (here each on a runtime of its own). The old one, publishing
// after the new one registered (its runtime went away, and it says so while
// it retries), overwrites nothing, and its clean stop removes nothing: the
// status record stays the new process's until the new process stops.
func TestOldProcessLeavesItsSuccessorsStatus(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	oldRuntime, newRuntime := harness.New(t), harness.New(t)
	shared := oldRuntime.SharedDir()
	records, err := state.PluginStatuses(shared)
	require.NoError(t, err)
	status := func() state.PluginStatus {
		rec, _, err := records.Read("50-e2e-test")
		require.NoError(t, err)
		return rec
	}
	readyAs := func(p *harness.Plugin) func() bool {
		return func() bool { rec := status(); return rec.PID == p.PID() && rec.Ready }
	}
	// After the harness's --shared-dir, so that it wins.
	args := harness.WithArgs(append(slices.Clone(harness.DefaultPluginArgs), "--shared-dir", shared)...)
	const wait, poll = 10 * time.Second, 10 * time.Millisecond

	old := oldRuntime.StartPlugin(t, bin, "50", "e2e-test", args)
	require.Eventually(t, readyAs(old), wait, poll, "the old process publishes")
	next := newRuntime.StartPlugin(t, bin, "50", "e2e-test", args)
	require.Eventually(t, readyAs(next), wait, poll, "the new process publishes")

	oldRuntime.Stop()
	require.Eventually(t, func() bool { return strings.Contains(old.Log(), "waiting for the runtime") }, wait, poll,
		"the old process lost its runtime, and published that")
	assert.True(t, readyAs(next)(), "the new process's record stays: %+v", status())
	assert.Contains(t, old.Log(), "a newer process of the plugin publishes its status")

	old.Stop(t)
	assert.True(t, readyAs(next)(), "the old process's stop leaves it: %+v", status())
	next.Stop(t)
	_, found, err := records.Read("50-e2e-test")
	require.NoError(t, err)
	assert.False(t, found, "the new process withdraws its own record")
}

func TestStopAndStartInTwoSteps(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	rt := harness.New(t)
	p := rt.StartPlugin(t, bin, "50", "e2e-test")
	assert.Zero(t, rt.PluginLatency("50-e2e-test", "CreateContainer"), "no creation yet")
	assert.Positive(t, rt.PluginLatency("50-e2e-test", "Synchronize"))
	rt.RunPod(t, pod(t, "besteffort.yaml"))
	assert.Positive(t, rt.PluginLatency("50-e2e-test", "CreateContainer"), "the runtime timed the plugin's call")

	rt.Stop()
	require.ErrorContains(t, rt.StartPod(rt.NewPod(t, pod(t, "burstable.yaml"))), "the runtime is stopped")
	rt.Start(t)
	p.WaitSynchronized(t)
	assert.Equal(t, 2, rt.SyncCount("50-e2e-test"))
	rt.RunPod(t, pod(t, "burstable.yaml")).Container("web").RequireEnv(t, "NRI_SUITE_E2E", "e2e-test")
}

// TestUpdatesFindContainersByID: a pod run again after its removal has the
// same container ids; updates reach the live container, not the removed one.
func TestUpdatesFindContainersByID(t *testing.T) {
	var targetID string
	update := &builtin.BuiltinPlugin{Index: "05", Base: "update", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			if req.Container.Name == "idle" {
				targetID = req.Container.Id
				return nil, nil
			}
			return &api.CreateContainerResponse{Update: []*api.ContainerUpdate{{ContainerId: targetID, Linux: &api.LinuxContainerUpdate{
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "1"}},
			}}}}, nil
		},
	}}
	rt := harness.New(t, harness.WithBuiltin(update))
	first := rt.RunPod(t, pod(t, "besteffort.yaml"))
	rt.RemovePod(t, first)
	again := rt.RunPod(t, pod(t, "besteffort.yaml"))
	require.Equal(t, first.Container("idle").ID(), again.Container("idle").ID(), "the same pod, the same ids")
	rt.RunPod(t, pod(t, "burstable.yaml"))
	again.Container("idle").RequireCPUs(t, "1")
	assert.Empty(t, first.Container("idle").Updates(), "the removed container got nothing")
}

func TestUpdatesKeepTheLast32(t *testing.T) {
	var targetID string
	n := 0
	counter := &builtin.BuiltinPlugin{Index: "05", Base: "counter", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			if targetID == "" {
				targetID = req.Container.Id
				return nil, nil
			}
			n++
			return &api.CreateContainerResponse{Update: []*api.ContainerUpdate{{ContainerId: targetID, Linux: &api.LinuxContainerUpdate{
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: fmt.Sprint(n)}},
			}}}}, nil
		},
	}}
	rt := harness.New(t, harness.WithBuiltin(counter))
	target := rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	for i := range 70 {
		manifest := pod(t, "burstable.yaml")
		manifest.Name = fmt.Sprintf("burstable-%d", i)
		rt.RunPod(t, manifest)
	}
	require.Greater(t, n, 64, "enough updates to drop some twice")
	updates := target.Updates()
	require.Len(t, updates, 32)
	assert.Equal(t, fmt.Sprint(n-31), updates[0].GetCpu().GetCpus(), "the oldest kept")
	assert.Equal(t, fmt.Sprint(n), updates[31].GetCpu().GetCpus(), "the latest")
	target.RequireCPUs(t, fmt.Sprint(n))
}

func TestResizeContainer(t *testing.T) {
	bin := harness.BuildPlugin(t, testPlugin)
	rt := harness.New(t)
	rt.StartPlugin(t, bin, "50", "e2e-test")
	pd := rt.RunPod(t, pod(t, "burstable.yaml"))
	web := pd.Container("web")

	err := rt.ResizeContainer(web, v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("3Gi")},
	})
	require.NoError(t, err)
	spec := web.Spec()
	assert.Equal(t, uint64(512), spec.CPUShares())
	assert.Equal(t, int64(150000), spec.CPUQuota())
	assert.Equal(t, int64(3<<30), spec.MemoryLimit())
	require.Len(t, web.Updates(), 1)
	assert.Equal(t, uint64(512), web.Updates()[0].GetCpu().GetShares().GetValue())
	// The env the plugin added at creation stays.
	web.RequireEnv(t, "NRI_SUITE_E2E", "e2e-test")
	assert.Equal(t, int64(150000), web.NRI().GetLinux().GetResources().GetCpu().GetQuota().GetValue(),
		"plugins see the resized resources")
}

func TestLifecycleErrors(t *testing.T) {
	rt := harness.New(t)
	pd := rt.NewPod(t, pod(t, "besteffort.yaml"))
	c := pd.Container("idle")
	require.ErrorContains(t, rt.CreateContainer(c), "pod default/besteffort is not running")
	require.NoError(t, rt.RunPodSandbox(pd))
	require.ErrorContains(t, rt.RunPodSandbox(pd), "already run")
	require.ErrorContains(t, rt.StartContainer(c), "expected CONTAINER_CREATED")
	require.ErrorContains(t, rt.UpdateContainerResources(c, kubepod.LinuxContainerResources{}), "does not exist")
	require.NoError(t, rt.CreateContainer(c))
	require.ErrorContains(t, rt.CreateContainer(c), "already created")
	require.NoError(t, rt.StartContainer(c))
	require.NoError(t, rt.RemoveContainer(c), "a running container is stopped, then removed")
	assert.Equal(t, api.ContainerState_CONTAINER_UNKNOWN, c.State())
	require.NoError(t, rt.RemoveContainer(c), "removing twice is a no-op, as in containerd")
	require.NoError(t, rt.StopPodSandbox(pd))
	require.NoError(t, rt.RemovePodSandbox(pd))
}

// TestUpdatesReachOtherContainers drives updates through the adaptation from
// an in-process plugin: on another container's creation and stop, and on a
// resize, where the plugin's change of the resized container is merged into
// the kubelet's request.
func TestUpdatesReachOtherContainers(t *testing.T) {
	var appID string
	update := func(id, cpus string) *api.ContainerUpdate {
		return &api.ContainerUpdate{ContainerId: id, Linux: &api.LinuxContainerUpdate{
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus}},
		}}
	}
	shuffle := &builtin.BuiltinPlugin{Index: "05", Base: "shuffle", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			rsp := &api.CreateContainerResponse{Adjust: &api.ContainerAdjustment{}}
			switch req.Container.Name {
			case "app":
				appID = req.Container.Id
				rsp.Adjust.SetLinuxCPUSetCPUs("0-3")
			case "helper":
				rsp.Adjust.SetLinuxCPUSetCPUs("0-1")
				rsp.Update = []*api.ContainerUpdate{update(appID, "2-3")}
			}
			return rsp, nil
		},
		StopContainer: func(_ context.Context, req *api.StopContainerRequest) (*api.StopContainerResponse, error) {
			if req.Container.Name != "helper" {
				return nil, nil
			}
			return &api.StopContainerResponse{Update: []*api.ContainerUpdate{update(appID, "0-3")}}, nil
		},
		UpdateContainer: func(_ context.Context, req *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
			return &api.UpdateContainerResponse{Update: []*api.ContainerUpdate{update(req.Container.Id, "1-2")}}, nil
		},
	}}
	rt := harness.New(t, harness.WithBuiltin(shuffle))
	pd := rt.RunPod(t, pod(t, "guaranteed.yaml"))
	app, helper := pd.Container("app"), pd.Container("helper")
	helper.RequireCPUs(t, "0-1")
	app.RequireCPUs(t, "2-3")
	require.Len(t, app.Updates(), 1)
	assert.Equal(t, "2-3", app.Updates()[0].GetCpu().GetCpus())

	require.NoError(t, rt.StopContainer(helper))
	app.RequireCPUs(t, "0-3")
	assert.Equal(t, api.ContainerState_CONTAINER_STOPPED, helper.State())

	require.NoError(t, rt.ResizeContainer(app, v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("256Mi")},
	}))
	spec := app.Spec()
	assert.Equal(t, "1-2", spec.CPUs())
	assert.Equal(t, int64(300000), spec.CPUQuota(), "NRI merges the plugin's cpuset into the kubelet's request")
	assert.Equal(t, uint64(3072), spec.CPUShares())
	assert.Len(t, app.Updates(), 3)
}

func TestNodeAndCDIOptions(t *testing.T) {
	cdi := &builtin.BuiltinPlugin{Index: "10", Base: "cdi", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(context.Context, *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			adjust := &api.ContainerAdjustment{}
			adjust.AddCDIDevice(&api.CDIDevice{Name: "vendor.com/dev=gpu0"})
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	injector := func(spec *rspec.Spec, devices []string) error {
		for _, d := range devices {
			spec.Linux.Devices = append(spec.Linux.Devices, rspec.LinuxDevice{Path: "/dev/" + d[len("vendor.com/dev="):], Type: "c", Major: 1, Minor: 3})
		}
		return nil
	}
	rt := harness.New(t,
		harness.WithBuiltin(cdi),
		harness.WithCDIInjector(injector),
		harness.WithNode(kubepod.Config{CgroupDriver: kubepod.SystemdDriver, NodeName: "node-1"}))
	pd := rt.RunPod(t, pod(t, "besteffort.yaml"))
	c := pd.Container("idle")
	assert.Equal(t, []string{"vendor.com/dev=gpu0"}, c.CDIDevices())
	dev := c.RequireDevice(t, "/dev/gpu0")
	assert.Equal(t, int64(3), dev.Minor)
	assert.Equal(t, "kubepods-besteffort-pod"+string(pd.Def.Manifest.UID)+".slice:cri-containerd:"+c.ID(), c.Spec().CgroupsPath())
	c.RequireEnv(t, "HOSTNAME", "node-1")
	assert.Equal(t, v1.PodQOSBestEffort, pd.QOS())
	assert.Equal(t, pd.ID(), pd.NRI().GetId())
}

func TestDroppedUpdatesUntilStart(t *testing.T) {
	var idleID string
	// Every creation after the idle one updates it to CPU 1.
	update := &builtin.BuiltinPlugin{Index: "05", Base: "update", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			if req.Container.Name == "idle" {
				idleID = req.Container.Id
				return nil, nil
			}
			return &api.CreateContainerResponse{Update: []*api.ContainerUpdate{{ContainerId: idleID, Linux: &api.LinuxContainerUpdate{
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "1"}},
			}}}}, nil
		},
	}}
	tests := []struct {
		name     string
		opts     []harness.Option
		drop     bool
		wantCPUs string // of idle after the second pod's creations
	}{
		{"applied by default", nil, false, "1"},
		{"dropped until start", []harness.Option{harness.WithDroppedUpdatesUntilStart()}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := harness.New(t, append(tc.opts, harness.WithBuiltin(update))...)
			besteffort := rt.NewPod(t, pod(t, "besteffort.yaml"))
			require.NoError(t, rt.RunPodSandbox(besteffort))
			idle := besteffort.Container("idle")
			require.NoError(t, rt.CreateContainer(idle))

			burstable := rt.RunPod(t, pod(t, "burstable.yaml"))
			wantDropped := 0
			if tc.drop { // one update per container created
				wantDropped = len(burstable.Containers())
			}
			assert.Equal(t, tc.wantCPUs, idle.Spec().CPUs())
			assert.Equal(t, wantDropped, idle.DroppedUpdates())

			// Once started, the container gets updates again.
			require.NoError(t, rt.StartContainer(idle))
			rt.RunPod(t, pod(t, "guaranteed.yaml"))
			idle.RequireCPUs(t, "1")
			assert.Equal(t, wantDropped, idle.DroppedUpdates())
		})
	}
}
