package nriplugin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// runtimeView is what a runtime would hold: every created container with
// the cpuset the plugin's adjustments and updates gave it.
type runtimeView struct {
	pods map[string]*api.PodSandbox
	ctrs map[string]*api.Container
}

func newRuntimeView() *runtimeView {
	return &runtimeView{pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}}
}

func (v *runtimeView) setCPUs(id, cpus, mems string) {
	c := v.ctrs[id]
	if c.Linux.Resources == nil {
		c.Linux.Resources = &api.LinuxResources{}
	}
	if c.Linux.Resources.Cpu == nil {
		c.Linux.Resources.Cpu = &api.LinuxCPU{}
	}
	c.Linux.Resources.Cpu.Cpus = cpus
	if mems != "" {
		c.Linux.Resources.Cpu.Mems = mems
	}
}

func (v *runtimeView) apply(t testing.TB, updates []*api.ContainerUpdate) {
	t.Helper()
	for _, u := range updates {
		// Not require.Contains, which lists the map's keys on every call.
		if _, ok := v.ctrs[u.GetContainerId()]; !ok {
			require.Failf(t, "update of a container the runtime does not have", "container %s", u.GetContainerId())
		}
		cpu := u.GetLinux().GetResources().GetCpu()
		v.setCPUs(u.GetContainerId(), cpu.GetCpus(), cpu.GetMems())
	}
}

func (v *runtimeView) cpus(t *testing.T, id string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(v.ctrs[id].GetLinux().GetResources().GetCpu().GetCpus())
	require.NoError(t, err)
	return set
}

func (v *runtimeView) list() ([]*api.PodSandbox, []*api.Container) {
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range v.pods {
		pods = append(pods, p)
	}
	for _, c := range v.ctrs {
		ctrs = append(ctrs, c)
	}
	return pods, ctrs
}

// create runs CreateContainer for a container of testdata/pods and applies
// the result as a runtime would.
func (v *runtimeView) create(t *testing.T, p *Plugin, file, container string) (string, error) {
	t.Helper()
	pod, ctr := nriPod(t, file, container)
	adjust, updates, err := p.CreateContainer(context.Background(), pod, ctr)
	if err != nil {
		return ctr.GetId(), err
	}
	v.pods[pod.GetId()], v.ctrs[ctr.GetId()] = pod, ctr
	v.setCPUs(ctr.GetId(), adjust.GetLinux().GetResources().GetCpu().GetCpus(), adjust.GetLinux().GetResources().GetCpu().GetMems())
	v.apply(t, updates)
	return ctr.GetId(), nil
}

func (v *runtimeView) remove(t *testing.T, p *Plugin, id string, stopFirst bool) {
	t.Helper()
	ctr := v.ctrs[id]
	pod := v.pods[ctr.GetPodSandboxId()]
	if stopFirst {
		updates, err := p.StopContainer(context.Background(), pod, ctr)
		require.NoError(t, err)
		delete(v.ctrs, id)
		v.apply(t, updates)
	}
	delete(v.ctrs, id)
	require.NoError(t, p.RemoveContainer(context.Background(), pod, ctr))
}

func synchronize(t testing.TB, p *Plugin, v *runtimeView) {
	t.Helper()
	pods, ctrs := v.list()
	updates, err := p.Synchronize(context.Background(), pods, ctrs)
	require.NoError(t, err)
	v.apply(t, updates)
}

// withIdleContainer is a synchronized plugin on the 12-CPU fixture and its
// runtime, running one BestEffort container on the whole shared pool.
func withIdleContainer(t *testing.T) (*testPlugin, *runtimeView, string) {
	t.Helper()
	p := newTestPlugin(t, "smt-2s-12c-interleaved", nil)
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	idle, err := v.create(t, p.Plugin, "besteffort.yaml", "idle")
	require.NoError(t, err)
	return p, v, idle
}

// withSavedState is a synchronized plugin on the 12-CPU fixture with its
// state in stateDir, running an idle BestEffort container and a 2-CPU
// Guaranteed one, its checkpoint written; and the state it saved.
func withSavedState(t *testing.T, stateDir string) (*testPlugin, *runtimeView, policy.Snapshot) {
	t.Helper()
	p := newTestPluginIn(t, "smt-2s-12c-interleaved", nil, stateDir, t.TempDir())
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	for _, f := range [][2]string{{"besteffort.yaml", "idle"}, {"guaranteed-2cpu.yaml", "app"}} {
		_, err := v.create(t, p.Plugin, f[0], f[1])
		require.NoError(t, err)
	}
	require.NoError(t, p.persist.Flush())
	return p, v, p.pol.Snapshot()
}

func TestRequestsBeforeSynchronizeFail(t *testing.T) {
	p := newTestPlugin(t, "smt-2s-12c-interleaved", nil)
	pod, ctr := nriPod(t, "besteffort.yaml", "idle")
	_, _, err := p.CreateContainer(context.Background(), pod, ctr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not synchronized")
	updates, err := p.StopContainer(context.Background(), pod, ctr)
	assert.NoError(t, err, "stopping is always fine")
	assert.Empty(t, updates)
}

func TestRemoveWithoutStopUpdatesSharedContainersNextTime(t *testing.T) {
	p, v, idle := withIdleContainer(t)
	all := v.cpus(t, idle)
	app, err := v.create(t, p.Plugin, "guaranteed-2cpu.yaml", "app")
	require.NoError(t, err)
	grant := v.cpus(t, app)
	require.Equal(t, all.Difference(grant).String(), v.cpus(t, idle).String())

	v.remove(t, p.Plugin, app, false)
	assert.Equal(t, all.Difference(grant).String(), v.cpus(t, idle).String(), "RemoveContainer can return no updates")

	_, err = v.create(t, p.Plugin, "burstable.yaml", "web")
	require.NoError(t, err)
	assert.Equal(t, all.String(), v.cpus(t, idle).String(), "the next call delivers the pending update")
}

func TestStopReleasesAndRemoveIsIdempotent(t *testing.T) {
	p, v, idle := withIdleContainer(t)
	all := v.cpus(t, idle)
	app, err := v.create(t, p.Plugin, "guaranteed-4cpu.yaml", "app")
	require.NoError(t, err)
	v.remove(t, p.Plugin, app, true)
	assert.Equal(t, all.String(), v.cpus(t, idle).String(), "StopContainer returns the grant in the same call")
	require.NoError(t, p.Check())
}

func TestSynchronizeAfterRuntimeRestartMovesNothing(t *testing.T) {
	p := newTestPlugin(t, "snc-2s-4n-80c", nil)
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	for _, f := range [][2]string{{"besteffort.yaml", "idle"}, {"guaranteed-2cpu.yaml", "app"}, {"guaranteed-4cpu.yaml", "app"}, {"burstable.yaml", "web"}} {
		_, err := v.create(t, p.Plugin, f[0], f[1])
		require.NoError(t, err)
	}
	before := map[string]string{}
	for id := range v.ctrs {
		before[id] = v.cpus(t, id).String()
	}
	synchronize(t, p.Plugin, v)
	after := map[string]string{}
	for id := range v.ctrs {
		after[id] = v.cpus(t, id).String()
	}
	assert.Equal(t, before, after)
	require.NoError(t, p.Check())

	// The checkpoint holds the state once the writer behind wrote it.
	require.NoError(t, p.persist.Flush())
	saved, found, err := p.checkpoint.Load()
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, p.pol.Snapshot(), saved.Snapshot)
}

// TestCheckpointReadWhenThePluginStarts: a new process reads its
// checkpoint before it connects, so that its first Synchronize, which NRI
// times, does not decode it: the state is restored from what New read even
// when the file is gone by then. Later restores read the file again.
func TestCheckpointReadWhenThePluginStarts(t *testing.T) {
	stateDir := t.TempDir()
	_, v, want := withSavedState(t, stateDir)

	next := newTestPluginIn(t, "smt-2s-12c-interleaved", nil, stateDir, t.TempDir())
	require.NoError(t, os.Remove(next.checkpoint.Path()))
	synchronize(t, next.Plugin, v)
	assert.Equal(t, want, next.pol.Snapshot(), "restored from the checkpoint New read")
	assert.Nil(t, next.readAtStart, "used once")
}

func TestConfigureTakesEffectAtSynchronize(t *testing.T) {
	p := newTestPlugin(t, "smt-2s-12c-interleaved", nil)
	err := p.Configure([]byte("options: [warp-speed]"), "test.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"warp-speed"`)

	require.NoError(t, p.Configure([]byte("reserved-cpus: \"0,6\"\n"), "test.yaml"))
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	id, err := v.create(t, p.Plugin, "kube-system.yaml", "proxy")
	require.NoError(t, err)
	assert.Equal(t, "0,6", v.cpus(t, id).String())
}

// TestConfiguredStateDir: the configuration's state-dir wins over
// --state-dir. A checkpoint where --state-dir put it is taken over while the
// configured directory has none, then saved there and removed where it was;
// one the plugin did not take its state from is left alone.
func TestConfiguredStateDir(t *testing.T) {
	const fixture = "smt-2s-12c-interleaved"
	flagDir, configDir := t.TempDir(), filepath.Join(t.TempDir(), "configured")
	_, v, want := withSavedState(t, flagDir)

	configure := "state-dir: " + configDir + "\n"
	next := newTestPluginIn(t, fixture, nil, flagDir, t.TempDir())
	require.NoError(t, next.Configure([]byte(configure), "test.yaml"))
	synchronize(t, next.Plugin, v)
	assert.Equal(t, want, next.pol.Snapshot(), "the state is taken over")
	require.NoError(t, next.persist.Flush())
	saved, found, err := next.checkpoint.Load()
	require.NoError(t, err)
	require.True(t, found, "saved in the configured directory")
	assert.Equal(t, want, saved.Snapshot)
	assert.Equal(t, filepath.Join(configDir, CheckpointFile), next.checkpoint.Path())
	assert.NoFileExists(t, filepath.Join(flagDir, CheckpointFile), "removed where it was")

	// A checkpoint in --state-dir besides the configured one is not this
	// plugin's state: it stays.
	other, err := newCheckpoint(flagDir)
	require.NoError(t, err)
	require.NoError(t, other.Save(Saved{}))
	again := newTestPluginIn(t, fixture, nil, flagDir, t.TempDir())
	require.NoError(t, again.Configure([]byte(configure), "test.yaml"))
	synchronize(t, again.Plugin, v)
	assert.Equal(t, want, again.pol.Snapshot(), "restored from the configured directory")
	assert.FileExists(t, other.Path())

	err = again.Configure([]byte("state-dir: /var/lib\n"), "test.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `config test.yaml: state-dir: "/var/lib" is a system directory`)
}

// Check is the policy's invariant check, for the tests above.
func (p *Plugin) Check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pol.Check()
}

func TestSynchronizeLeavesStoppedContainersOut(t *testing.T) {
	p, v, idle := withIdleContainer(t)
	initCtr, err := v.create(t, p.Plugin, "burstable.yaml", "web")
	require.NoError(t, err)
	// An init container that ran to completion, as CRI-O reports it: the
	// plugin saw no StopContainer (it was away), and its cpuset is stale.
	v.ctrs[initCtr].State = api.ContainerState_CONTAINER_STOPPED
	v.setCPUs(initCtr, "0", "")

	fresh := newTestPlugin(t, "smt-2s-12c-interleaved", nil) // no checkpoint: adopts
	pods, ctrs := v.list()
	updates, err := fresh.Synchronize(context.Background(), pods, ctrs)
	require.NoError(t, err)
	for _, u := range updates {
		assert.NotEqual(t, initCtr, u.GetContainerId(), "no update of a stopped container: the runtime cannot apply it")
		assert.True(t, u.GetIgnoreFailure(), "a Synchronize's update may fail without failing the Synchronize")
	}
	_, placed := fresh.pol.Placement(initCtr)
	assert.False(t, placed, "a stopped container holds no CPUs")
	_, placed = fresh.pol.Placement(idle)
	assert.True(t, placed, "the running container is adopted")
}

func TestOnlyUpdatesOfOtherContainersMayFail(t *testing.T) {
	p, _, idle := withIdleContainer(t)

	pod, ctr := nriPod(t, "guaranteed-2cpu.yaml", "app")
	_, updates, err := p.CreateContainer(context.Background(), pod, ctr)
	require.NoError(t, err)
	require.Len(t, updates, 1, "the exclusive grant shrinks the shared container")
	assert.Equal(t, idle, updates[0].GetContainerId())
	assert.True(t, updates[0].GetIgnoreFailure(), "another container's update may fail without failing this creation")

	res := &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(4096), Quota: api.Int64(400000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)}}
	updates, err = p.UpdateContainer(context.Background(), pod, ctr, res)
	require.NoError(t, err)
	for _, u := range updates {
		assert.Equal(t, u.GetContainerId() != ctr.GetId(), u.GetIgnoreFailure(),
			"update of %s: only the resized container's own update must apply", u.GetContainerId())
	}
	assert.True(t, slices.ContainsFunc(updates, func(u *api.ContainerUpdate) bool { return u.GetContainerId() == ctr.GetId() }),
		"the resize updates the container itself")
}
