package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestRealNode is the whole flow on a real node (issue 3's acceptance): the
// plugin binary as an external plugin of the real runtime, and as a
// pre-registered one that containerd launches itself (sandbox.Variants),
// pods from a real kubelet, and every cpuset read inside the containers. One
// sandbox per variant carries all the steps, in order:
//
//  1. Shared pool: a BestEffort pod runs on the whole shared pool, a
//     kube-system pod on the reserved CPU; as the plugin published them.
//  2. Exclusive grant: a Guaranteed pod with 1 CPU gets an exclusive CPU,
//     inside the container and in its cgroup; the shared container started
//     before is moved off it in the same call; a Burstable one started after
//     never has it.
//  3. Restarts: SIGKILL and restart of the plugin, then SIGKILL and restart of
//     the runtime: no cpuset moves in any container, the plugin synchronizes
//     again and places a new container right. An external plugin survives
//     the runtime's restart and keeps its state in memory; one the runtime
//     launched is launched again and restores from its checkpoint.
//  4. Release: removing the Guaranteed pod gives its CPU back to the running
//     shared containers.
//
// CRI-O cannot run Guaranteed pods on these hosts (sandbox.CRIOGuaranteedSkip):
// there, steps 2 and 4 skip with that reason.
func TestRealNode(t *testing.T) {
	sandbox.RunVariants(t, sandbox.Variants(), testRealNode)
}

// nodeConfig reserves the machine's first CPU without taking it out of the
// shared pool: kube-system pods run on it, so the plugin's work shows even
// where Guaranteed pods cannot run, and exclusive grants come from the rest.
const nodeConfig = `reserved-cpus: "%d"
`

func testRealNode(t *testing.T, v sandbox.Variant) {
	sandbox.RequirePrereqs(t, v.Runtime)
	byRuntime := v.Launch == sandbox.LaunchByRuntime
	topo, err := sysfs.Discover(sysfs.DefaultRoot)
	require.NoError(t, err, "discovering this machine's topology")
	available := topo.CPUs().Difference(topo.Isolated())
	if available.Size() < 2 {
		msg := fmt.Sprintf("the real-node test needs 2 CPUs that are not isolated, this machine has %s", available)
		if sandbox.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := v.Options()
	// No security plugin runs here, which the shipped containerd drop-in
	// requires: the test's pods tolerate its absence.
	opts.TolerateMissingPlugins = true
	n := &realNode{sb: sandbox.NewForTest(t, opts), ctx: sandbox.TestContext(t), pods: map[string]string{}}
	// Looked at under the sandbox's host lock: no other sandbox's plugin
	// writes there meanwhile.
	hostStateDir := filepath.Join(state.DefaultDir, "topology-aware")
	_, err = os.Stat(hostStateDir)
	hostStateDirExisted := err == nil
	reserved := cpuset.New(available.Min())
	n.spec = sandbox.PluginSpec{
		Binary: harness.BuildPlugin(t, pluginPkg), Name: "topology-aware", Idx: "30",
		Config: fmt.Appendf(nil, nodeConfig, available.Min()),
	}
	// The runtime launches its plugins without flags (and the state dir is
	// no configuration key): that plugin checkpoints into the default state
	// dir, which must then be free; an external one into the run dir.
	stateDir := hostStateDir
	if byRuntime {
		require.False(t, hostStateDirExisted, "the plugin the runtime launches checkpoints into %s, which exists already: remove it", hostStateDir)
	} else {
		n.spec.Args = []string{"--state-dir", sandbox.PluginDir + "/state"}
		stateDir = filepath.Join(n.sb.PluginDir(n.spec), "state")
	}
	checkpoint := filepath.Join(stateDir, "checkpoint.json")
	n.startPlugin(t)

	// 1. The shared pool and the reserved CPU.
	early := n.runPod(t, sandbox.BusyboxPod("early"))
	system := sandbox.BusyboxPod("system")
	system.Namespace = "kube-system"
	sys := n.runPod(t, system)
	n.requirePlaced(t, early, "shared", available)
	n.requirePlaced(t, sys, "reserved", reserved)

	// 2. An exclusive CPU for the Guaranteed pod.
	guaranteed := sandbox.BusyboxPod("guaranteed")
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	guaranteed.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	skipExclusive := n.sb.CannotRun(guaranteed)
	var grant cpuset.CPUSet
	shared := []string{early}
	ok := t.Run("ExclusiveGrant", func(t *testing.T) {
		if skipExclusive != "" {
			t.Skip(skipExclusive)
		}
		g := n.runPod(t, guaranteed)
		rec := n.record(t, g)
		require.Equal(t, "exclusive", rec.Pool, "pool of the Guaranteed container (%s)", rec.Reason)
		grant = nodeCPUSet(t, rec.CPUs)
		require.Equal(t, 1, grant.Size(), "CPUs granted for a request of 1 CPU")
		require.True(t, grant.IsSubsetOf(available.Difference(reserved)), "grant %s is outside the available, unreserved CPUs", grant)
		t.Logf("exclusive grant %s (%s); available %s, reserved %s", grant, rec.Reason, available, reserved)
		n.requireCPUs(t, g, grant)
		// The shared container that ran before was updated in the same call
		// that made the grant: no waiting.
		n.requireCPUs(t, early, available.Difference(grant))
		late := sandbox.BusyboxPod("late")
		late.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
		shared = append(shared, n.runPod(t, late))
		for _, id := range shared {
			n.requirePlaced(t, id, "shared", available.Difference(grant))
		}
		n.requirePlaced(t, g, "exclusive", grant)
		n.requirePlaced(t, sys, "reserved", reserved)
	})
	if !ok {
		return
	}

	// 3. Restarts move nothing.
	noChange := map[string]string{"adopted": "0", "replaced": "0", "dropped": "0", "updates": "0"}
	ok = t.Run("PluginRestart", func(t *testing.T) {
		before := n.snapshot(t)
		killed := time.Now()
		n.plugin.Kill()
		n.startPlugin(t)
		n.requireResynchronized(t, killed)
		restored := n.lastRestore(t)
		t.Logf("plugin killed to resynchronized: %s; restore: %v", time.Since(killed).Round(time.Millisecond), restored)
		assert.Equal(t, "checkpoint "+checkpoint, restored["source"], "where the restarted plugin found its state")
		assert.Equal(t, fmt.Sprint(len(before)), restored["kept"], "containers kept from the checkpoint")
		assert.Equal(t, noChange, pickFields(restored, "adopted", "replaced", "dropped", "updates"), "the restore after the plugin's restart")
		assert.Equal(t, before, n.snapshot(t), "cpusets after the plugin's restart")
	})
	ok = ok && t.Run("RuntimeRestart", func(t *testing.T) {
		before := n.snapshot(t)
		pid := n.plugin.PID()
		killed := time.Now()
		require.NoError(t, n.sb.RestartRuntime(n.ctx))
		n.requireResynchronized(t, killed)
		restored := n.lastRestore(t)
		t.Logf("runtime killed to plugin resynchronized: %s; restore: %v", time.Since(killed).Round(time.Millisecond), restored)
		if byRuntime {
			assert.NotEqual(t, pid, n.plugin.PID(), "the runtime launched the plugin again")
			assert.Equal(t, "checkpoint "+checkpoint, restored["source"], "the relaunched plugin restored from its checkpoint")
		} else {
			assert.Equal(t, pid, n.plugin.PID(), "the plugin survives the runtime's restart")
			assert.Equal(t, "memory", restored["source"], "the plugin kept its state in memory")
		}
		assert.Equal(t, fmt.Sprint(len(before)), restored["kept"], "containers kept")
		assert.Equal(t, noChange, pickFields(restored, "adopted", "replaced", "dropped", "updates"), "the restore after the runtime's restart")
		assert.Equal(t, before, n.snapshot(t), "cpusets after the runtime's restart")

		// The resynchronized plugin still knows the grant.
		after := n.runPod(t, sandbox.BusyboxPod("after-restart"))
		shared = append(shared, after)
		n.requirePlaced(t, after, "shared", available.Difference(grant))
	})
	if !ok {
		return
	}

	// 4. The grant returns to the shared pool, inside the running containers.
	t.Run("GrantReturns", func(t *testing.T) {
		if skipExclusive != "" {
			t.Skip(skipExclusive)
		}
		g := n.pods["guaranteed"]
		require.NoError(t, n.sb.RemovePod(n.ctx, "guaranteed"))
		delete(n.pods, "guaranteed")
		for _, id := range shared {
			n.eventuallyCPUs(t, id, available)
			n.requirePlaced(t, id, "shared", available)
		}
		_, found, err := n.placements.Read(g)
		require.NoError(t, err)
		assert.False(t, found, "the removed container's placement record is withdrawn")
	})

	assert.FileExists(t, checkpoint, "the plugin checkpoints into its state dir")
	if !byRuntime && !hostStateDirExisted {
		assert.NoDirExists(t, hostStateDir, "the plugin must not use the host's state dir")
	}
}

// realNode is the sandbox, the plugin and the pods of TestRealNode.
type realNode struct {
	ctx        context.Context
	sb         *sandbox.Sandbox
	spec       sandbox.PluginSpec
	plugin     *sandbox.Plugin
	placements *state.Records[state.PlacementRecord]
	pools      *state.Records[state.PoolRecord]
	pods       map[string]string // manifest name -> id of its container "main"
}

func (n *realNode) startPlugin(t *testing.T) {
	t.Helper()
	p, err := n.sb.StartPlugin(n.spec)
	require.NoError(t, err)
	require.NoError(t, p.WaitReady(n.ctx))
	n.plugin = p
	if n.placements == nil {
		n.placements, err = state.PlacementRecords(n.sb.SharedDir())
		require.NoError(t, err)
		n.pools, err = state.PoolRecords(n.sb.SharedDir())
		require.NoError(t, err)
	}
}

// runPod runs a pod through the kubelet and returns the id of its container.
func (n *realNode) runPod(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	require.NoError(t, n.sb.WritePod(pod))
	c, err := n.sb.WaitContainer(n.ctx, pod.Name, "main")
	require.NoError(t, err)
	n.pods[pod.Name] = c.ID
	return c.ID
}

// published returns the plugin's placement record of a container with its
// cpusets resolved (a shared container's are in the pool's record).
func (n *realNode) published(id string) (state.PlacementRecord, error) {
	rec, found, err := n.placements.Read(id)
	if err != nil {
		return rec, err
	}
	if !found {
		return rec, fmt.Errorf("no placement record of container %s", id)
	}
	pools, err := n.pools.List()
	if err != nil {
		return rec, err
	}
	rec.CPUs, rec.Mems, err = rec.Resolve(pools)
	return rec, err
}

// record waits for a container's placement record: records are written
// behind the handlers.
func (n *realNode) record(t *testing.T, id string) state.PlacementRecord {
	t.Helper()
	var rec state.PlacementRecord
	nodePoll(t, n.ctx, "the placement record of container "+id, func() (err error) {
		rec, err = n.published(id)
		return err
	})
	return rec
}

// requirePlaced checks the published placement (waiting for it: it may lag
// by one write) and the cpusets inside the container (now).
func (n *realNode) requirePlaced(t *testing.T, id, pool string, cpus cpuset.CPUSet) {
	t.Helper()
	var rec state.PlacementRecord
	nodePoll(t, n.ctx, fmt.Sprintf("container %s to be published in pool %s on CPUs %s", id, pool, cpus), func() error {
		var err error
		if rec, err = n.published(id); err != nil {
			return err
		}
		if got, err := cpuset.Parse(rec.CPUs); err != nil || rec.Pool != pool || !got.Equal(cpus) {
			return fmt.Errorf("published: pool %s, cpus %s, reason %q", rec.Pool, rec.CPUs, rec.Reason)
		}
		return nil
	})
	n.requireCPUs(t, id, cpus)
	assert.Equal(t, nodeCPUSet(t, rec.Mems).String(), n.cpusets(t, id).mems, "Mems_allowed_list of container %s and its published mems", id)
}

// requireCPUs checks now, without waiting, that a container runs on cpus:
// its init process, a process started in it now, and its cgroup.
func (n *realNode) requireCPUs(t *testing.T, id string, cpus cpuset.CPUSet) {
	t.Helper()
	seen := n.cpusets(t, id)
	want := cpus.String()
	assert.Equal(t, [3]string{want, want, want}, [3]string{seen.initCPUs, seen.execCPUs, seen.cgroupCPUs},
		"CPUs of container %s: init process, new process, cgroup", id)
}

// eventuallyCPUs waits until a container's init process and cgroup run on cpus.
func (n *realNode) eventuallyCPUs(t *testing.T, id string, cpus cpuset.CPUSet) {
	t.Helper()
	nodePoll(t, n.ctx, fmt.Sprintf("container %s to run on CPUs %s", id, cpus), func() error {
		if seen := n.cpusets(t, id); seen.initCPUs != cpus.String() || seen.cgroupCPUs != cpus.String() {
			return fmt.Errorf("seen %+v", seen)
		}
		return nil
	})
	n.requireCPUs(t, id, cpus)
}

// containerCPUs are a container's cpusets as seen inside it, normalized.
type containerCPUs struct {
	initCPUs   string // Cpus_allowed_list of its init process (/proc/1/status)
	execCPUs   string // of a process started in it now (/proc/self/status)
	cgroupCPUs string // cpuset.cpus of its cgroup
	mems       string // Mems_allowed_list of its init process
}

func (n *realNode) cpusets(t *testing.T, id string) containerCPUs {
	t.Helper()
	initStatus, err := n.sb.ProcStatus(n.ctx, id)
	require.NoError(t, err)
	self, err := n.sb.ReadFile(n.ctx, id, "/proc/self/status")
	require.NoError(t, err)
	cgroup, err := n.sb.ReadCgroup(n.ctx, id, sandbox.CPUSetCPUs)
	require.NoError(t, err)
	return containerCPUs{
		initCPUs:   nodeCPUSet(t, initStatus["Cpus_allowed_list"]).String(),
		execCPUs:   nodeCPUSet(t, sandbox.ParseProcStatus(self)["Cpus_allowed_list"]).String(),
		cgroupCPUs: nodeCPUSet(t, cgroup).String(),
		mems:       nodeCPUSet(t, initStatus["Mems_allowed_list"]).String(),
	}
}

// snapshot is every test container's cpusets and published placement.
func (n *realNode) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for pod, id := range n.pods {
		rec := n.record(t, id)
		out[pod] = fmt.Sprintf("%+v published %s %s/%s", n.cpusets(t, id), rec.Pool, rec.CPUs, rec.Mems)
	}
	return out
}

// requireResynchronized waits until the plugin answers /readyz and its
// status record in the shared dir says that this process synchronized
// after since.
func (n *realNode) requireResynchronized(t *testing.T, since time.Time) {
	t.Helper()
	require.NoError(t, n.plugin.WaitReady(n.ctx))
	statuses, err := state.PluginStatuses(n.sb.SharedDir())
	require.NoError(t, err)
	nodePoll(t, n.ctx, "the plugin's status record to show a new Synchronize", func() error {
		st, found, err := statuses.Read(n.spec.Idx + "-" + n.spec.Name)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("no status record")
		case st.PID != n.plugin.PID() || !st.Ready || st.LastSynchronize.Before(since):
			return fmt.Errorf("status %+v (plugin pid %d, since %s)", st, n.plugin.PID(), since)
		}
		return nil
	})
}

// restorePattern finds the plugin's summary of a restore; fieldPattern the
// key=value pairs of a logrus text line.
var (
	restorePattern = regexp.MustCompile(`(?m)^.*msg="restored placements".*$`)
	fieldPattern   = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// lastRestore returns the fields of the plugin's last "restored placements"
// log line: where it found its state and what it decided.
func (n *realNode) lastRestore(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(n.plugin.LogPath)
	require.NoError(t, err)
	lines := restorePattern.FindAllString(string(data), -1)
	require.NotEmpty(t, lines, "the plugin logs its restores")
	fields := map[string]string{}
	for _, m := range fieldPattern.FindAllStringSubmatch(lines[len(lines)-1], -1) {
		fields[m[1]] = strings.Trim(m[2], `"`)
	}
	return fields
}

func pickFields(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// nodePoll waits for check to pass, within 30 s.
func nodePoll(t *testing.T, ctx context.Context, what string, check func() error) {
	t.Helper()
	sandbox.Eventually(t, ctx, 30*time.Second, 100*time.Millisecond, what, check)
}

func nodeCPUSet(t *testing.T, list string) cpuset.CPUSet {
	t.Helper()
	s, err := cpuset.Parse(strings.TrimSpace(list))
	require.NoError(t, err, "parsing CPU list %q", list)
	return s
}
