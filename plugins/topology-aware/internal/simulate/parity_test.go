package simulate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

// pluginPkg is the plugin's main package, from the module root.
const pluginPkg = "./plugins/topology-aware"

// TestParityWithTheRuntime plays every golden workload a second way: the
// plugin binary connected to the runtime side of NRI (e2e/harness: the
// adaptation containerd runs, pods converted as the kubelet and containerd
// convert them, device-injector's records in the shared state), driven as
// the kubelet drives it. After every step each container must run exactly
// where the simulation's report says, and both must refuse the same
// containers: simulate calls the plugin's handlers itself, and this is
// what catches a simulation that calls them otherwise than a runtime does
// (another order, another view of a container, an update not applied, a
// restart that is not one).
func TestParityWithTheRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := harness.BuildPlugin(t, pluginPkg)
	for _, c := range goldenCases {
		t.Run(c.name(), func(t *testing.T) {
			r := decodeReport(t, mustRun(t, c.args()...))
			m, err := MachineFromSysfs(filepath.Join(fixtureDir(c.fixture), "sysfs"))
			require.NoError(t, err)
			node, _, err := m.kubeletNode()
			require.NoError(t, err)
			config, err := os.ReadFile(filepath.Join(workloadDir, c.config+".yaml"))
			require.NoError(t, err)
			w, err := Load(filepath.Join(workloadDir, c.workload+".yaml"))
			require.NoError(t, err)

			sysfsRoot, err := filepath.Abs(m.SysfsRoot)
			require.NoError(t, err)
			rt := harness.New(t, harness.WithNode(node))
			plugin := rt.StartPlugin(t, bin, "30", "topology-aware", harness.WithConfig(string(config)),
				harness.WithArgs("--http-addr", "127.0.0.1:0", "--log-level", "info", "--sysfs-root", sysfsRoot, "--state-dir", t.TempDir()))
			records, err := state.ContainerDeviceRecords(rt.SharedDir())
			require.NoError(t, err)
			k := &kubelet{t: t, rt: rt, m: m, records: records, pods: map[PodRef]*harness.Pod{}, owners: map[Delete][]PodRef{}}
			for i := range w.Steps {
				step := &w.Steps[i]
				var refused []string
				switch step.Kind {
				case StepCreate:
					refused = k.create(step.Create, r.Steps[i])
				case StepResize:
					refused = k.resize(step.Resize)
				case StepDelete:
					k.delete(*step.Delete)
				case StepRestart:
					plugin.Stop(t)
					plugin.Restart(t)
				}
				var want []string
				for _, rej := range r.Steps[i].Rejected {
					want = append(want, rej.ID)
				}
				assert.ElementsMatch(t, want, refused, "%s: refused containers", step)
				wantSets := map[string][2]string{}
				for _, c := range r.Running[i] {
					wantSets[c.ID] = [2]string{c.CPUs, c.Mems}
				}
				// The updates the plugin pushes through the runtime's
				// UpdateContainers (a pod's reservation released) come from
				// its own goroutine.
				require.Eventually(t, func() bool { return assert.ObjectsAreEqual(wantSets, k.cpusets()) }, 10*time.Second, 5*time.Millisecond,
					"%s: where the containers run: want %v, the runtime shows %v", step, wantSets, k.cpusets())
			}
		})
	}
}

// kubelet drives the harness runtime as the kubelet would the workload.
type kubelet struct {
	t       *testing.T
	rt      *harness.Runtime
	m       *Machine
	records *state.Records[state.ContainerDevices]
	pods    map[PodRef]*harness.Pod
	owners  map[Delete][]PodRef
	running []*harness.Container
}

// create runs the step's pods, the kubelet's way, and returns the
// containers refused. A pod the report says the scheduler would not bind
// never reaches the node.
func (k *kubelet) create(c *Create, report StepReport) []string {
	var refused []string
	for _, o := range c.Objects {
		key := Delete{Kind: o.Kind, PodRef: PodRef{Namespace: o.Namespace, Name: o.Name}}
		for _, manifest := range o.Pods() {
			p := k.rt.NewPod(k.t, manifest)
			ref := PodRef{Namespace: p.Namespace(), Name: p.Name()}
			k.pods[ref] = p
			k.owners[key] = append(k.owners[key], ref)
			if slices.ContainsFunc(report.Rejected, func(r Rejection) bool {
				return r.Pod == p.Name() && strings.HasPrefix(r.Error, "unschedulable: ")
			}) {
				for _, ctr := range p.Containers() {
					refused = append(refused, ctr.ID())
				}
				continue
			}
			require.NoError(k.t, k.rt.RunPodSandbox(p))
			blocked := false
			for _, ctr := range p.Containers() {
				if blocked {
					refused = append(refused, ctr.ID())
					continue
				}
				k.addDevices(p, ctr, c.Devices[ctr.Name()])
				if err := k.rt.CreateContainer(ctr); err != nil {
					require.ErrorContains(k.t, err, "topology-aware")
					refused = append(refused, ctr.ID())
					blocked = ctr.Kind() != kubepod.AppContainer
					continue
				}
				require.NoError(k.t, k.rt.StartContainer(ctr))
				if ctr.Kind() == kubepod.InitContainer {
					require.NoError(k.t, k.rt.StopContainer(ctr))
					continue
				}
				k.running = append(k.running, ctr)
			}
		}
	}
	return refused
}

// addDevices gives a container the workload's devices: device nodes in its
// spec, as the runtime adds them; the others as device-injector's record
// of the container, which the plugin reads in the shared state.
func (k *kubelet) addDevices(p *harness.Pod, ctr *harness.Container, devices []DeviceSpec) {
	var injected []state.InjectedDevice
	for i, d := range devices {
		if d.NUMANode == nil {
			ctr.Def.Spec.Linux.Devices = append(ctr.Def.Spec.Linux.Devices, d.linuxDevice())
			continue
		}
		injected = append(injected, state.InjectedDevice{
			Name: "example.com/device=" + strings.Repeat("x", i+1), Kind: state.DeviceKindCDI,
			NUMANode: *d.NUMANode, LocalCPUs: k.m.Topology.CPUsOfNode(*d.NUMANode).String(),
		})
	}
	if len(injected) > 0 {
		require.NoError(k.t, k.records.Publish(ctr.ID(), state.ContainerDevices{
			ContainerID: ctr.ID(), PodUID: string(p.Def.Manifest.UID), Namespace: p.Namespace(), Pod: p.Name(),
			Container: ctr.Name(), Devices: injected,
		}))
	}
}

// resize resizes a container in place, unless the API server would refuse
// it; it returns the container if it is refused.
func (k *kubelet) resize(rs *Resize) []string {
	p := k.pods[rs.PodRef]
	ctr := p.Container(rs.Container)
	if !slices.Contains(k.running, ctr) {
		return []string{ctr.ID()}
	}
	if _, _, why := resizedManifest(p.Def.Manifest, rs); why != "" {
		return []string{ctr.ID()}
	}
	if err := k.rt.ResizeContainer(ctr, rs.Resources); err != nil {
		require.ErrorContains(k.t, err, "topology-aware")
		return []string{ctr.ID()}
	}
	return nil
}

// delete removes a pod, or a controller's pods newest first.
func (k *kubelet) delete(d Delete) {
	refs := []PodRef{d.PodRef}
	if d.Kind != KindPod {
		refs = slices.Clone(k.owners[d])
		slices.Reverse(refs)
		delete(k.owners, d)
	}
	for _, ref := range refs {
		p, exists := k.pods[ref]
		if !exists {
			continue
		}
		k.rt.RemovePod(k.t, p)
		delete(k.pods, ref)
		k.running = slices.DeleteFunc(k.running, func(c *harness.Container) bool { return c.Pod == p })
	}
}

// cpusets is every running container's cpuset.cpus and cpuset.mems, as the
// runtime shows them.
func (k *kubelet) cpusets() map[string][2]string {
	out := map[string][2]string{}
	for _, c := range k.running {
		cpus, mems := c.Cpuset()
		out[c.ID()] = [2]string{cpus, mems}
	}
	return out
}
