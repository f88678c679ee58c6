package simulate

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// TestParityWithPlugin replays every golden workload through the real
// plugin's NRI handlers (CreateContainer, UpdateContainer, StopContainer,
// RemoveContainer, and a new plugin's Synchronize for a restart), applying
// its adjustments and updates as a runtime does, and requires that after
// every step each container runs exactly where the simulator says and that
// both refuse the same containers.
func TestParityWithPlugin(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name(), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, c.args()...)
			require.Equal(t, ExitOK, code, stderr)
			report := decodeReport(t, stdout)

			m, err := MachineFromSysfs(filepath.Join(fixtureDir(c.fixture), "sysfs"))
			require.NoError(t, err)
			cfgData, err := os.ReadFile(filepath.Join(workloadDir, c.config+".yaml"))
			require.NoError(t, err)
			w, err := Load(filepath.Join(workloadDir, c.workload+".yaml"))
			require.NoError(t, err)
			rt := newPluginRuntime(t, m, cfgData)
			for i := range w.Steps {
				step := &w.Steps[i]
				rejected := rt.play(step)
				want := report.Steps[i]
				var wantRejected []string
				for _, r := range want.Rejected {
					wantRejected = append(wantRejected, r.ID)
				}
				assert.ElementsMatch(t, wantRejected, rejected, "%s: refused containers", step)
				got := rt.cpusets()
				wantSets := map[string][2]string{}
				for _, c := range want.Containers {
					wantSets[c.ID] = [2]string{c.CPUs, c.Mems}
				}
				require.Equal(t, wantSets, got, "%s: where the containers run", step)
			}
		})
	}
}

// pluginRuntime is a runtime around the real plugin: the live pods and
// containers with the cpusets the plugin gave them.
type pluginRuntime struct {
	t       *testing.T
	sim     *Simulator // for its kubelet node view and device checks
	opts    nriplugin.Options
	cfg     []byte
	plugin  *nriplugin.Plugin
	pods    map[PodRef]*kubepod.Pod
	sandbox map[string]*api.PodSandbox
	ctrs    map[string]*kubepod.Container
	devices numaDevices
}

// numaDevices is the plugin's DeviceSource for the workload's numa-node
// devices, by container id.
type numaDevices map[string][]policy.Device

func (d numaDevices) ContainerDevices(id k8s.Identity) ([]policy.Device, error) {
	return d[id.ContainerID], nil
}

func newPluginRuntime(t *testing.T, m *Machine, cfg []byte) *pluginRuntime {
	sim, err := New(m, policy.Config{})
	require.NoError(t, err)
	rt := &pluginRuntime{
		t: t, sim: sim, cfg: cfg, devices: numaDevices{},
		pods: map[PodRef]*kubepod.Pod{}, sandbox: map[string]*api.PodSandbox{}, ctrs: map[string]*kubepod.Container{},
	}
	rt.opts = nriplugin.Options{Topology: m.Topology, SysfsRoot: m.SysfsRoot, StateDir: t.TempDir(), Devices: rt.devices}
	rt.start()
	return rt
}

// start starts a plugin on the state directory and synchronizes it with
// the running containers, as at a plugin (re)start.
func (rt *pluginRuntime) start() {
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	p, err := nriplugin.New(plugin.Deps{Name: "topology-aware", Log: logrus.NewEntry(logger),
		Registry: prometheus.NewRegistry(), MetricsNamespace: "parity"}, rt.opts)
	require.NoError(rt.t, err)
	require.NoError(rt.t, p.Configure(rt.cfg, "parity config"))
	rt.t.Cleanup(func() { _ = p.Close() })
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, id := range slices.Sorted(maps.Keys(rt.ctrs)) {
		c := rt.ctrs[id]
		ctrs = append(ctrs, rt.nri(c))
		pods = append(pods, rt.sandbox[id])
	}
	updates, err := p.Synchronize(context.Background(), pods, ctrs)
	require.NoError(rt.t, err)
	rt.plugin = p
	rt.apply(updates)
}

func (rt *pluginRuntime) nri(c *kubepod.Container) *api.Container {
	return kubepod.NRIContainer(c, c.Spec, kubepod.ContainerStatus{State: api.ContainerState_CONTAINER_RUNNING})
}

// play runs one step and returns the ids of the containers refused.
func (rt *pluginRuntime) play(step *Step) []string {
	ctx := context.Background()
	var refused []string
	switch step.Kind {
	case StepCreate:
		pod, err := rt.sim.node.Convert(step.Create.Manifest)
		require.NoError(rt.t, err)
		rt.pods[PodRef{Namespace: pod.Manifest.Namespace, Name: pod.Manifest.Name}] = pod
		extra, err := rt.sim.devices(step.Create, pod)
		require.NoError(rt.t, err)
		sandbox := kubepod.NRIPodSandbox(pod)
		if rt.sim.unschedulable(pod.Manifest) != "" {
			for _, c := range pod.Containers {
				refused = append(refused, c.ID)
			}
			return refused
		}
		blocked := false
		for _, c := range pod.Containers {
			if blocked {
				refused = append(refused, c.ID)
				continue
			}
			rt.devices[c.ID] = extra[c.Name]
			adjust, updates, err := rt.plugin.CreateContainer(ctx, sandbox, rt.nri(c))
			if err != nil {
				refused = append(refused, c.ID)
				blocked = c.Kind != kubepod.AppContainer
				continue
			}
			rt.ctrs[c.ID], rt.sandbox[c.ID] = c, sandbox
			cpu := adjust.GetLinux().GetResources().GetCpu()
			rt.set(c.ID, cpu.GetCpus(), cpu.GetMems())
			rt.apply(updates)
			if c.Kind == kubepod.InitContainer {
				rt.stop(c.ID)
			}
		}
	case StepResize:
		rs := step.Resize
		pod := rt.pods[rs.PodRef]
		c := pod.Container(rs.Container)
		if _, running := rt.ctrs[c.ID]; !running {
			return []string{c.ID}
		}
		manifest, ctr, why := resizedManifest(pod.Manifest, rs)
		if why != "" {
			return []string{c.ID}
		}
		res, err := kubepod.ContainerResources(manifest, ctr, rt.sim.node.MemoryCapacity, rt.sim.node.HugePageSizes)
		require.NoError(rt.t, err)
		updates, err := rt.plugin.UpdateContainer(ctx, rt.sandbox[c.ID], rt.nri(c), kubepod.ToNRIResources(res))
		if err != nil {
			return []string{c.ID}
		}
		pod.Manifest, c.Manifest = manifest, ctr
		kubepod.WithResources(c.Spec, res)
		rt.apply(updates)
	case StepDelete:
		pod := rt.pods[*step.Delete]
		var order []string
		for _, c := range pod.Containers {
			if c.Kind == kubepod.AppContainer {
				order = append(order, c.ID)
			}
		}
		for i := len(pod.Containers) - 1; i >= 0; i-- {
			if pod.Containers[i].Kind == kubepod.SidecarContainer {
				order = append(order, pod.Containers[i].ID)
			}
		}
		for _, id := range order {
			if _, running := rt.ctrs[id]; running {
				rt.stop(id)
			}
		}
		require.NoError(rt.t, rt.plugin.StopPodSandbox(ctx, kubepod.NRIPodSandbox(pod)))
		delete(rt.pods, *step.Delete)
	case StepRestart:
		require.NoError(rt.t, rt.plugin.Close())
		rt.start()
	}
	return refused
}

// stop stops and removes a container, applying the updates it causes.
func (rt *pluginRuntime) stop(id string) {
	ctx := context.Background()
	c, sandbox := rt.ctrs[id], rt.sandbox[id]
	updates, err := rt.plugin.StopContainer(ctx, sandbox, rt.nri(c))
	require.NoError(rt.t, err)
	delete(rt.ctrs, id)
	rt.apply(updates)
	require.NoError(rt.t, rt.plugin.RemoveContainer(ctx, sandbox, rt.nri(c)))
}

func (rt *pluginRuntime) apply(updates []*api.ContainerUpdate) {
	for _, u := range updates {
		cpu := u.GetLinux().GetResources().GetCpu()
		rt.set(u.GetContainerId(), cpu.GetCpus(), cpu.GetMems())
	}
}

func (rt *pluginRuntime) set(id, cpus, mems string) {
	c, ok := rt.ctrs[id]
	require.True(rt.t, ok, "the plugin updates container %s, which does not run", id)
	kubepod.WithResources(c.Spec, kubepod.LinuxContainerResources{CpusetCpus: cpus, CpusetMems: mems})
}

// cpusets returns id -> {cpus, mems} of every running container.
func (rt *pluginRuntime) cpusets() map[string][2]string {
	out := map[string][2]string{}
	for id, c := range rt.ctrs {
		cpu := c.Spec.Linux.Resources.CPU
		out[id] = [2]string{cpu.Cpus, cpu.Mems}
	}
	return out
}
