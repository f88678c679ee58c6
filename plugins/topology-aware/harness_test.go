package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
)

const pluginPkg = "./plugins/topology-aware"

func TestMain(m *testing.M) { harness.Main(m) }

// node is a runtime with the plugin connected, on one topology fixture.
type node struct {
	rt       *harness.Runtime
	plugin   *harness.Plugin
	topo     *topology.Topology
	stateDir string
	httpAddr string
}

type nodeOptions struct {
	config   string
	runtime  []harness.Option
	logLevel string // default debug
	// tmpfs puts the checkpoint and the shared state on a tmpfs, where a
	// node keeps them (/run), so that benchmarks do not time a disk's fsync.
	tmpfs bool
}

func startNode(t testing.TB, fixture string, opts nodeOptions) *node {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", fixture, "sysfs"))
	require.NoError(t, err)
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	n := &node{topo: topo, stateDir: t.TempDir(), httpAddr: freeLoopbackAddr(t)}
	n.rt = harness.New(t, opts.runtime...)
	if opts.logLevel == "" {
		opts.logLevel = "debug"
	}
	args := []string{"--log-level", opts.logLevel, "--http-addr", n.httpAddr, "--sysfs-root", root}
	if opts.tmpfs {
		// Given after the harness's --shared-dir, so it wins.
		n.stateDir = tmpfsDir(t)
		args = append(args, "--shared-dir", tmpfsDir(t))
	}
	args = append(args, "--state-dir", n.stateDir)
	pluginOpts := []harness.PluginOption{harness.WithArgs(args...)}
	if opts.config != "" {
		pluginOpts = append(pluginOpts, harness.WithConfig(opts.config))
	}
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "30", "topology-aware", pluginOpts...)
	return n
}

// tmpfsDir is a new directory on /dev/shm, a tmpfs, removed after the
// test; a test directory where the machine has no /dev/shm.
func tmpfsDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "nri-topology-aware-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// freeLoopbackAddr picks a loopback port for the plugin's metrics. The
// harness's default, port 0, would hide the port the plugin bound.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func pod(t testing.TB, name string) *v1.Pod {
	return harness.LoadPod(t, filepath.Join("testdata", "pods", name))
}

func cpus(t *testing.T, c *harness.Container) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(c.Spec().CPUs())
	require.NoError(t, err, "cpuset.cpus of %s", c.Name())
	return set
}

func mems(t *testing.T, c *harness.Container) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(c.Spec().Mems())
	require.NoError(t, err, "cpuset.mems of %s", c.Name())
	return set
}

// nodesOf returns the NUMA nodes of a set of CPUs.
func (n *node) nodesOf(set cpuset.CPUSet) cpuset.CPUSet {
	var ids []int
	for _, id := range set.List() {
		cpu, _ := n.topo.CPU(id)
		ids = append(ids, cpu.Node)
	}
	return cpuset.New(ids...)
}

// requireWholeCores checks that a grant holds every thread of its cores.
func (n *node) requireWholeCores(t *testing.T, grant cpuset.CPUSet) {
	t.Helper()
	for _, id := range grant.List() {
		assert.True(t, n.topo.Siblings(id).IsSubsetOf(grant), "cpu %d's core is split: grant %s", id, grant)
	}
}

// shared is the shared pool when nothing is reserved strictly.
func (n *node) shared(grants ...cpuset.CPUSet) cpuset.CPUSet {
	pool := n.topo.CPUs().Difference(n.topo.Isolated())
	for _, g := range grants {
		pool = pool.Difference(g)
	}
	return pool
}

func TestExclusiveGrantAndSharedPool(t *testing.T) {
	for _, fixture := range []string{"smt-2s-12c-interleaved", "snc-2s-4n-80c", "nps4-2s-12n-256c-cpuless"} {
		t.Run(fixture, func(t *testing.T) {
			n := startNode(t, fixture, nodeOptions{})
			idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
			web := n.rt.RunPod(t, pod(t, "burstable.yaml")).Container("web")
			frac := n.rt.RunPod(t, pod(t, "guaranteed-fractional.yaml")).Container("app")
			sharedCtrs := []*harness.Container{idle, web, frac}
			for _, c := range sharedCtrs {
				assert.Equal(t, n.shared().String(), cpus(t, c).String(), "%s starts on the whole shared pool", c.Name())
				assert.Equal(t, n.nodesOf(n.shared()).String(), mems(t, c).String(), "%s: memory of the shared pool's nodes", c.Name())
			}

			exclusive := n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml"))
			app := exclusive.Container("app")
			grant := cpus(t, app)
			assert.Equal(t, 2, grant.Size())
			n.requireWholeCores(t, grant)
			assert.Equal(t, 1, n.nodesOf(grant).Size(), "the grant %s sits on one NUMA node", grant)
			assert.Equal(t, n.nodesOf(grant).String(), mems(t, app).String(), "memory on the grant's node")
			assert.True(t, grant.Intersection(n.topo.Isolated()).IsEmpty(), "no isolated CPU without the annotation")
			for _, c := range sharedCtrs {
				assert.Equal(t, n.shared(grant).String(), cpus(t, c).String(), "%s was updated when the grant was made", c.Name())
				assert.NotEmpty(t, c.Updates(), "%s got an update through NRI", c.Name())
			}

			n.rt.RemovePod(t, exclusive)
			for _, c := range sharedCtrs {
				assert.Equal(t, n.shared().String(), cpus(t, c).String(), "%s got the grant back when it was released", c.Name())
			}
		})
	}
}

func TestExclusiveGrantsNeverOverlap(t *testing.T) {
	n := startNode(t, "snc-2s-4n-80c", nodeOptions{})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	var grants []cpuset.CPUSet
	for i := range 6 {
		manifest := pod(t, "guaranteed-4cpu.yaml")
		manifest.Name = fmt.Sprintf("big-%d", i)
		grant := cpus(t, n.rt.RunPod(t, manifest).Container("app"))
		assert.Equal(t, 4, grant.Size())
		for _, g := range grants {
			assert.True(t, g.Intersection(grant).IsEmpty(), "grant %s overlaps %s", grant, g)
		}
		grants = append(grants, grant)
	}
	assert.Equal(t, n.shared(grants...).String(), cpus(t, idle).String())
}

func TestAnnotations(t *testing.T) {
	const config = "reserved-cpus: \"0,6\"\n"
	reserved := cpuset.New(0, 6)
	tests := []struct {
		name      string
		file      string
		container string
		check     func(t *testing.T, n *node, got cpuset.CPUSet)
	}{
		{"a Guaranteed container asking for shared CPUs", "annotated-shared.yaml", "app", func(t *testing.T, n *node, got cpuset.CPUSet) {
			assert.Equal(t, n.shared().String(), got.String())
		}},
		{"a container asking for the reserved CPUs", "annotated-reserved.yaml", "agent", func(t *testing.T, _ *node, got cpuset.CPUSet) {
			assert.Equal(t, reserved.String(), got.String())
		}},
		{"a kube-system container", "kube-system.yaml", "proxy", func(t *testing.T, _ *node, got cpuset.CPUSet) {
			assert.Equal(t, reserved.String(), got.String())
		}},
		{"a container requiring isolated CPUs", "require-isolated.yaml", "rt", func(t *testing.T, n *node, got cpuset.CPUSet) {
			assert.Equal(t, n.topo.Isolated().String(), got.String(), "the fixture isolates exactly one core")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{config: config})
			c := n.rt.RunPod(t, pod(t, tc.file)).Container(tc.container)
			tc.check(t, n, cpus(t, c))
		})
	}
}

func TestRejectedCreationsFailWithClearErrors(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		annotations map[string]string // on guaranteed-4cpu.yaml, when file is empty
		want        []string
	}{
		{"more CPUs than the machine has", "too-big.yaml", nil, []string{"topology-aware", "default/too-big/app", "16"}},
		{"unknown annotation value", "bad-annotation.yaml", nil,
			[]string{"topology-aware", "default/bad-annotation/app", "cpu.nri-suite.io/container.app", `"exclusive"`, `"require-isolated"`}},
		// Without the refusal the key is ignored and the container is
		// granted exclusive CPUs it was meant not to have.
		{"unknown annotation suffix", "", map[string]string{"cpu.nri-suite.io/bogus": "shared"},
			[]string{"topology-aware", "default/annotated/app", `annotation cpu.nri-suite.io/bogus="shared"`,
				"want a key of the form cpu.nri-suite.io, cpu.nri-suite.io/pod or cpu.nri-suite.io/container.<name>"}},
		{"annotation above the size limit", "", map[string]string{"memory.nri-suite.io/pod": strings.Repeat("include-cpuless", 1<<16)},
			[]string{"topology-aware", "default/annotated/app", `annotation memory.nri-suite.io/pod="include-cpuless`,
				"…(983040 bytes): want a value of at most 4096 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
			idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
			before := cpus(t, idle)
			manifest := guaranteedPod(t, "annotated", "4", tc.annotations)
			if tc.file != "" {
				manifest = pod(t, tc.file)
			}
			err := n.rt.StartPod(n.rt.NewPod(t, manifest))
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Less(t, len(err.Error()), 4096, "the runtime gets a bounded error")
			assert.Equal(t, before.String(), cpus(t, idle).String(), "a refused request changes nothing")
		})
	}
}

// TestRequestsAbove256CPUs: cpu.shares stop at 256 CPUs (the kubelet caps
// them at 262144); on a 512-CPU machine a Guaranteed container of 300 CPUs
// gets 300, and what the machine cannot give is refused saying so.
func TestRequestsAbove256CPUs(t *testing.T) {
	n := startNode(t, "smt-8s-8n-512c", nodeOptions{logLevel: "info"})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	huge := n.rt.RunPod(t, pod(t, "guaranteed-300cpu.yaml")).Container("app")
	require.Equal(t, uint64(262144), huge.Spec().CPUShares(), "the kubelet's cap")
	grant := cpus(t, huge)
	assert.Equal(t, 300, grant.Size())
	n.requireWholeCores(t, grant)
	assert.Equal(t, n.shared(grant).String(), cpus(t, idle).String(), "the shared pool excludes the grant")

	err := n.rt.StartPod(n.rt.NewPod(t, guaranteedPod(t, "second", "300", nil)))
	require.Error(t, err)
	for _, want := range []string{"default/second/app", "300 exclusive CPUs requested, 212 free"} {
		assert.Contains(t, err.Error(), want)
	}
	err = n.rt.StartPod(n.rt.NewPod(t, guaranteedPod(t, "too-big", "600", nil)))
	require.Error(t, err)
	for _, want := range []string{"default/too-big/app", "600 exclusive CPUs requested", "can never grant more than 512"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, grant.String(), cpus(t, huge).String(), "refusals change nothing")
	assert.Equal(t, n.shared(grant).String(), cpus(t, idle).String())
}

func TestSecondRequireIsolatedIsRefused(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	first := n.rt.RunPod(t, pod(t, "require-isolated.yaml")).Container("rt")
	assert.Equal(t, n.topo.Isolated().String(), cpus(t, first).String())
	manifest := pod(t, "require-isolated.yaml")
	manifest.Name = "isolated-2"
	err := n.rt.StartPod(n.rt.NewPod(t, manifest))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default/isolated-2/rt")
	assert.Contains(t, err.Error(), "isolated")
}

func TestResize(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	app := n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml")).Container("app")
	before := cpus(t, app)

	guaranteed := func(cpu string) v1.ResourceRequirements {
		l := v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("256Mi"),
			"hugepages-2Mi": resource.MustParse("4Mi"),
		}
		return v1.ResourceRequirements{Requests: l, Limits: l}
	}
	require.NoError(t, n.rt.ResizeContainer(app, guaranteed("4")))
	grown := cpus(t, app)
	assert.Equal(t, 4, grown.Size())
	assert.True(t, before.IsSubsetOf(grown), "the grant %s keeps the CPUs it had (%s)", grown, before)
	assert.Equal(t, n.shared(grown).String(), cpus(t, idle).String(), "shared containers updated in the same call")

	err := n.rt.ResizeContainer(app, guaranteed("40"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default/exclusive/app")
	assert.Equal(t, grown.String(), cpus(t, app).String(), "a refused resize leaves the grant intact")

	require.NoError(t, n.rt.ResizeContainer(app, guaranteed("2")))
	shrunk := cpus(t, app)
	assert.Equal(t, 2, shrunk.Size())
	assert.True(t, shrunk.IsSubsetOf(grown))
	assert.Equal(t, n.shared(shrunk).String(), cpus(t, idle).String())
}

func TestResizeMovesBetweenSharedAndExclusive(t *testing.T) {
	n := startNode(t, "snc-2s-4n-80c", nodeOptions{})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	app := n.rt.RunPod(t, pod(t, "guaranteed-fractional.yaml")).Container("app")
	require.Equal(t, n.shared().String(), cpus(t, app).String())

	resources := func(cpu string) v1.ResourceRequirements {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("128Mi")}
		return v1.ResourceRequirements{Requests: l, Limits: l}
	}
	require.NoError(t, n.rt.ResizeContainer(app, resources("2")))
	grant := cpus(t, app)
	assert.Equal(t, 2, grant.Size(), "an integer request makes it exclusive")
	assert.Equal(t, n.shared(grant).String(), cpus(t, idle).String())

	require.NoError(t, n.rt.ResizeContainer(app, resources("1500m")))
	assert.Equal(t, n.shared().String(), cpus(t, app).String(), "back to the shared pool")
	assert.Equal(t, n.shared().String(), cpus(t, idle).String(), "the grant went back to the shared pool")
}

func TestDeviceAlignedPlacement(t *testing.T) {
	// device-injector's part: a GPU on NUMA node 3 of the fixture.
	gpu := &builtin.BuiltinPlugin{Index: "10", Base: "gpu", Handlers: builtin.BuiltinHandlers{
		CreateContainer: func(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
			adjust := &api.ContainerAdjustment{}
			if req.GetPod().GetName() == "exclusive" {
				adjust.AddDevice(&api.LinuxDevice{Path: "/dev/gpu1", Type: "c", Major: 195, Minor: 1})
			}
			return &api.CreateContainerResponse{Adjust: adjust}, nil
		},
	}}
	n := startNode(t, "snc-2s-4n-80c", nodeOptions{
		config:  "topology-policy: single-numa-node\n",
		runtime: []harness.Option{harness.WithBuiltin(gpu)},
	})
	app := n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml")).Container("app")
	app.RequireDevice(t, "/dev/gpu1")
	grant := cpus(t, app)
	assert.Equal(t, "3", n.nodesOf(grant).String(), "the grant %s is on the GPU's node", grant)
	assert.Equal(t, "3", mems(t, app).String())
}

// guaranteedPod is guaranteed-4cpu.yaml with another name, CPU count and
// annotations.
func guaranteedPod(t *testing.T, name, cpu string, annotations map[string]string) *v1.Pod {
	manifest := pod(t, "guaranteed-4cpu.yaml")
	manifest.Name, manifest.Annotations = name, annotations
	res := &manifest.Spec.Containers[0].Resources
	res.Limits[v1.ResourceCPU] = resource.MustParse(cpu)
	if res.Requests != nil { // defaulted from the limits when loaded
		res.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	return manifest
}

// perNode counts the CPUs of a set on each NUMA node.
func (n *node) perNode(set cpuset.CPUSet) map[int]int {
	out := map[int]int{}
	for _, id := range set.List() {
		cpu, _ := n.topo.CPU(id)
		out[cpu.Node]++
	}
	return out
}

func TestOptionsAndTopologyPolicies(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		config  string
		cpus    string
		annot   map[string]string
		wantErr string
		check   func(t *testing.T, n *node, app *harness.Container)
	}{
		{name: "threads of one core by default", fixture: "snc-2s-4n-80c", cpus: "2",
			check: func(t *testing.T, n *node, app *harness.Container) {
				grant := cpus(t, app)
				assert.True(t, n.topo.Siblings(grant.Min()).Equal(grant), "grant %s is one core", grant)
			}},
		{name: "spread-across-cores", fixture: "snc-2s-4n-80c", config: "options: [spread-across-cores]\n", cpus: "2",
			check: func(t *testing.T, n *node, app *harness.Container) {
				grant := cpus(t, app)
				assert.Equal(t, 2, grant.Size())
				assert.False(t, n.topo.Siblings(grant.Min()).Equal(grant), "grant %s takes two cores", grant)
			}},
		{name: "packed across NUMA nodes by default", fixture: "snc-2s-4n-80c", cpus: "24",
			check: func(t *testing.T, n *node, app *harness.Container) {
				counts := n.perNode(cpus(t, app))
				assert.Len(t, counts, 2)
				assert.ElementsMatch(t, []int{20, 4}, slices.Collect(maps.Values(counts)), "a whole node, then the rest")
			}},
		{name: "distribute-across-numa", fixture: "snc-2s-4n-80c", config: "options: [distribute-across-numa]\n", cpus: "24",
			check: func(t *testing.T, n *node, app *harness.Container) {
				counts := n.perNode(cpus(t, app))
				assert.ElementsMatch(t, []int{12, 12}, slices.Collect(maps.Values(counts)), "evenly over two nodes")
			}},
		{name: "full-pcpus-only refuses half a core", fixture: "snc-2s-4n-80c", config: "options: [full-pcpus-only]\n", cpus: "3",
			wantErr: "full-pcpus-only"},
		{name: "single-numa-node refuses more than a node", fixture: "snc-2s-4n-80c", config: "topology-policy: single-numa-node\n", cpus: "24",
			wantErr: "single-numa-node"},
		{name: "cpu-less memory only when annotated", fixture: "nps4-2s-12n-256c-cpuless", cpus: "2",
			check: func(t *testing.T, n *node, app *harness.Container) {
				assert.True(t, mems(t, app).Equal(n.nodesOf(cpus(t, app))), "mems %s are the grant's nodes", mems(t, app))
			}},
		{name: "include-cpuless", fixture: "nps4-2s-12n-256c-cpuless", cpus: "2",
			annot: map[string]string{"memory.nri-suite.io": "include-cpuless"},
			check: func(t *testing.T, n *node, app *harness.Container) {
				cpuNodes := n.nodesOf(cpus(t, app))
				extra := mems(t, app).Difference(cpuNodes)
				assert.True(t, cpuNodes.IsSubsetOf(mems(t, app)))
				require.False(t, extra.IsEmpty(), "mems %s add CPU-less nodes", mems(t, app))
				for _, id := range extra.List() {
					assert.True(t, n.topo.CPUsOfNode(id).IsEmpty(), "node %d is CPU-less", id)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, tc.fixture, nodeOptions{config: tc.config})
			p := n.rt.NewPod(t, guaranteedPod(t, "sized", tc.cpus, tc.annot))
			err := n.rt.StartPod(p)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "default/sized/app")
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, n, p.Container("app"))
		})
	}
}

// cpusets records every live container's cpuset.cpus and cpuset.mems.
func cpusets(t *testing.T, ctrs []*harness.Container) map[string]string {
	out := map[string]string{}
	for _, c := range ctrs {
		spec := c.Spec()
		out[c.Pod.Name()+"/"+c.Name()] = spec.CPUs() + " mems " + spec.Mems()
	}
	return out
}

// mixedWorkload runs one container of every kind.
func mixedWorkload(t *testing.T, n *node) []*harness.Container {
	var out []*harness.Container
	// The 4-CPU grant first: on the 12-CPU fixture it then fits one node.
	for _, f := range []string{"besteffort.yaml", "burstable.yaml", "guaranteed-4cpu.yaml", "guaranteed-2cpu.yaml",
		"annotated-reserved.yaml", "require-isolated.yaml", "guaranteed-fractional.yaml"} {
		out = append(out, n.rt.RunPod(t, pod(t, f)).Containers()...)
	}
	return out
}

func TestRestartsMoveNothing(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{config: "reserved-cpus: \"0\"\n"})
	ctrs := mixedWorkload(t, n)
	want := cpusets(t, ctrs)

	waitCheckpoint(t, n.stateDir, ctrs)
	n.plugin.Kill(t)
	n.plugin.Restart(t)
	assert.Equal(t, want, cpusets(t, ctrs), "a plugin restart moves nothing")
	assert.Equal(t, len(ctrs), strings.Count(n.plugin.Log(), "kept container's placement from the checkpoint"))

	n.rt.Restart(t)
	n.plugin.WaitSynchronized(t)
	assert.Equal(t, want, cpusets(t, ctrs), "a runtime restart moves nothing")

	// The restored state is live: a new grant avoids every restored one.
	extra := pod(t, "guaranteed-2cpu.yaml")
	extra.Name = "after-restarts"
	grant := cpus(t, n.rt.RunPod(t, extra).Container("app"))
	for _, c := range ctrs {
		if slices.Contains([]string{"exclusive", "big", "isolated"}, c.Pod.Name()) {
			assert.True(t, grant.Intersection(cpus(t, c)).IsEmpty(), "new grant %s overlaps %s's %s", grant, c.Pod.Name(), cpus(t, c))
		}
	}
}

// loadCheckpoint reads the checkpoint in stateDir, as the plugin's next
// process would. The plugin may be writing it: a write holds the
// directory's lock for an fsync, which a loaded machine's disk can stretch
// past state.LockWait, so a lock held is waited out.
func loadCheckpoint(t *testing.T, stateDir string) (saved nriplugin.Saved, found bool) {
	t.Helper()
	cp, err := state.NewCheckpoint[nriplugin.Saved](filepath.Join(stateDir, nriplugin.CheckpointFile), nriplugin.CheckpointVersion)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		saved, found, err = cp.Load()
		return !errors.Is(err, state.ErrLockHeld)
	}, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	return saved, found
}

// savedIDs returns the container ids in the checkpoint in stateDir.
func savedIDs(t *testing.T, stateDir string) []string {
	t.Helper()
	saved, _ := loadCheckpoint(t, stateDir)
	var ids []string
	for _, c := range saved.Containers {
		ids = append(ids, c.Placement.ContainerID)
	}
	return ids
}

// waitCheckpoint waits, bounded, until the checkpoint in stateDir holds
// exactly ctrs: it is written behind the handlers, and a kill before it
// caught up would make a restart adopt containers instead of keeping them
// (which moves nothing either, but is not what a test of "kept" wants).
func waitCheckpoint(t *testing.T, stateDir string, ctrs []*harness.Container) {
	t.Helper()
	var want []string
	for _, c := range ctrs {
		want = append(want, c.ID())
	}
	slices.Sort(want)
	require.Eventually(t, func() bool { return slices.Equal(want, savedIDs(t, stateDir)) }, 10*time.Second, 5*time.Millisecond)
}

// TestPreRegisteredAcrossRuntimeRestarts runs the plugin as containerd does
// from its plugin directory: the configuration arrives through NRI, and a
// runtime restart kills the process and launches a new one, which restores
// from the checkpoint.
func TestPreRegisteredAcrossRuntimeRestarts(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", "smt-2s-12c-interleaved", "sysfs"))
	require.NoError(t, err)
	stateDir := t.TempDir()
	rt := harness.New(t, harness.WithPreRegistered(harness.PreRegisteredPlugin{
		Index: "30", Name: "topology-aware", Binary: harness.BuildPlugin(t, pluginPkg),
		Config: "reserved-cpus: \"0,6\"\nreserved-namespaces: [kube-system]\n",
		Args:   []string{"--log-level", "debug", "--http-addr", "", "--sysfs-root", root, "--state-dir", stateDir},
	}))
	proxy := rt.RunPod(t, pod(t, "kube-system.yaml")).Container("proxy")
	assert.Equal(t, "0,6", proxy.Spec().CPUs(), "the configuration came through NRI")
	var ctrs []*harness.Container
	for _, f := range []string{"besteffort.yaml", "guaranteed-2cpu.yaml"} {
		ctrs = append(ctrs, rt.RunPod(t, pod(t, f)).Containers()...)
	}
	ctrs = append(ctrs, proxy)
	want := cpusets(t, ctrs)
	waitCheckpoint(t, stateDir, ctrs)

	for range 2 {
		rt.Restart(t)
		assert.Equal(t, want, cpusets(t, ctrs), "a runtime restart moves nothing")
	}
	log := rt.PreRegisteredLog("30-topology-aware")
	assert.Equal(t, 3, strings.Count(log, "applied configuration"), "each launch is configured")
	assert.Equal(t, 2*len(ctrs), strings.Count(log, "kept container's placement from the checkpoint"))
}

// TestPreRegisteredStateDirFromConfig: a pre-registered plugin, which gets
// no flags, checkpoints where its configuration's state-dir says (it wins
// over --state-dir), and a configuration that moves the checkpoint moves no
// container: the checkpoint where it was is taken over, saved in the new
// place, and removed from the old one.
func TestPreRegisteredStateDirFromConfig(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", "smt-2s-12c-interleaved", "sysfs"))
	require.NoError(t, err)
	flagDir, configDir := t.TempDir(), filepath.Join(t.TempDir(), "configured")
	const config = "reserved-cpus: \"0,6\"\n"
	rt := harness.New(t, harness.WithPreRegistered(harness.PreRegisteredPlugin{
		Index: "30", Name: "topology-aware", Binary: harness.BuildPlugin(t, pluginPkg), Config: config,
		Args: []string{"--log-level", "debug", "--http-addr", "", "--sysfs-root", root, "--state-dir", flagDir},
	}))
	var ctrs []*harness.Container
	for _, f := range []string{"besteffort.yaml", "guaranteed-2cpu.yaml"} {
		ctrs = append(ctrs, rt.RunPod(t, pod(t, f)).Containers()...)
	}
	want := cpusets(t, ctrs)
	waitCheckpoint(t, flagDir, ctrs)

	conf := filepath.Join(rt.ConfigDir(), "30-topology-aware.conf")
	require.NoError(t, os.WriteFile(conf, []byte(config+"state-dir: "+configDir+"\n"), 0o644))
	rt.Restart(t)
	assert.Equal(t, want, cpusets(t, ctrs), "moving the checkpoint moves nothing")
	log := rt.PreRegisteredLog("30-topology-aware")
	assert.Equal(t, len(ctrs), strings.Count(log, "kept container's placement from the checkpoint"), "taken over from where it was")
	waitCheckpoint(t, configDir, ctrs)
	require.Eventually(t, func() bool {
		_, err := os.Lstat(filepath.Join(flagDir, nriplugin.CheckpointFile))
		return errors.Is(err, fs.ErrNotExist)
	}, 10*time.Second, 5*time.Millisecond, "the old place is retired once the new one holds the state")

	rt.Restart(t)
	assert.Equal(t, want, cpusets(t, ctrs), "a runtime restart moves nothing")
	log = rt.PreRegisteredLog("30-topology-aware")
	assert.Equal(t, 2*len(ctrs), strings.Count(log, "kept container's placement from the checkpoint"), "kept from the configured directory")
	assert.Contains(t, log, "checkpoint "+filepath.Join(configDir, nriplugin.CheckpointFile))
	assert.NoFileExists(t, filepath.Join(flagDir, nriplugin.CheckpointFile))
}

// TestRandomSequencesKeepInvariants drives random creations, resizes,
// removals, plugin kills and runtime restarts through the real plugin and
// checks, after every step, what the runtime's specs say: exclusive grants
// never overlap, every shared container has the same non-empty pool, which
// overlaps no grant, and a restart moves nothing.
func TestRandomSequencesKeepInvariants(t *testing.T) {
	templates := []struct {
		file      string
		exclusive bool
	}{
		{"besteffort.yaml", false}, {"burstable.yaml", false}, {"guaranteed-fractional.yaml", false},
		{"guaranteed-2cpu.yaml", true}, {"guaranteed-4cpu.yaml", true},
	}
	for _, fixture := range []string{"smt-2s-12c-interleaved", "snc-2s-4n-80c"} {
		t.Run(fixture, func(t *testing.T) {
			n := startNode(t, fixture, nodeOptions{})
			rng := rand.New(rand.NewPCG(1, uint64(len(fixture))))
			type live struct {
				pod       *harness.Pod
				exclusive bool
			}
			var pods []live
			containers := func() []*harness.Container {
				var out []*harness.Container
				for _, l := range pods {
					out = append(out, l.pod.Containers()...)
				}
				return out
			}
			check := func(step int) {
				var shared []cpuset.CPUSet
				var grants []cpuset.CPUSet
				for _, l := range pods {
					set := cpus(t, l.pod.Containers()[0])
					if l.exclusive {
						grants = append(grants, set)
					} else {
						shared = append(shared, set)
					}
				}
				for i, g := range grants {
					for _, h := range grants[i+1:] {
						require.True(t, g.Intersection(h).IsEmpty(), "step %d: grants %s and %s overlap", step, g, h)
					}
					for _, s := range shared {
						require.True(t, s.Intersection(g).IsEmpty(), "step %d: shared %s overlaps grant %s", step, s, g)
					}
				}
				for _, s := range shared {
					require.False(t, s.IsEmpty(), "step %d: empty shared pool", step)
					require.True(t, s.Equal(shared[0]), "step %d: shared containers disagree: %s, %s", step, s, shared[0])
				}
			}
			for step := range 60 {
				switch op := rng.IntN(10); {
				case op < 5 || len(pods) == 0: // create
					tpl := templates[rng.IntN(len(templates))]
					manifest := pod(t, tpl.file)
					manifest.Name = fmt.Sprintf("p%d", step)
					p := n.rt.NewPod(t, manifest)
					if err := n.rt.StartPod(p); err != nil {
						require.Contains(t, err.Error(), "default/"+manifest.Name+"/", "step %d", step)
						n.rt.RemovePod(t, p)
						break
					}
					pods = append(pods, live{pod: p, exclusive: tpl.exclusive})
				case op < 7: // remove
					i := rng.IntN(len(pods))
					n.rt.RemovePod(t, pods[i].pod)
					pods = slices.Delete(pods, i, i+1)
				case op < 8: // resize an exclusive container to 2 or 4 CPUs
					for _, l := range pods {
						if l.exclusive {
							c := l.pod.Containers()[0]
							lim := c.Def.Manifest.Resources.Limits.DeepCopy()
							lim[v1.ResourceCPU] = resource.MustParse([]string{"2", "4"}[rng.IntN(2)])
							if err := n.rt.ResizeContainer(c, v1.ResourceRequirements{Requests: lim, Limits: lim}); err != nil {
								require.Contains(t, err.Error(), "default/"+l.pod.Name()+"/", "step %d", step)
							}
							break
						}
					}
				case op < 9: // the plugin is killed and restarted
					want := cpusets(t, containers())
					n.plugin.Kill(t)
					n.plugin.Restart(t)
					require.Equal(t, want, cpusets(t, containers()), "step %d: a plugin restart moved containers", step)
				default: // the runtime restarts
					want := cpusets(t, containers())
					n.rt.Restart(t)
					n.plugin.WaitSynchronized(t)
					require.Equal(t, want, cpusets(t, containers()), "step %d: a runtime restart moved containers", step)
				}
				check(step)
			}
		})
	}
}

func TestCheckpointAndRecordsFollowTheLiveState(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	ctrs := mixedWorkload(t, n)
	recs, err := state.PlacementRecords(n.rt.SharedDir())
	require.NoError(t, err)

	// The writer runs behind the handlers: poll for it, bounded.
	var ids []string
	for _, c := range ctrs {
		ids = append(ids, c.ID())
	}
	slices.Sort(ids)
	require.Eventually(t, func() bool {
		keys, err := recs.Keys()
		return err == nil && slices.Equal(keys, ids)
	}, 10*time.Second, 10*time.Millisecond)
	poolRecs, err := state.PoolRecords(n.rt.SharedDir())
	require.NoError(t, err)
	pools, err := poolRecs.List()
	require.NoError(t, err)
	for _, c := range ctrs {
		rec, found, err := recs.Read(c.ID())
		require.NoError(t, err)
		require.True(t, found)
		cpus, mems, err := rec.Resolve(pools)
		require.NoError(t, err)
		assert.Equal(t, c.Spec().CPUs(), cpus, "%s's record", c.Name())
		assert.Equal(t, c.Spec().Mems(), mems, "%s's record", c.Name())
		assert.Equal(t, c.Pod.Name(), rec.Pod)
		assert.Equal(t, c.Name(), rec.Container)
	}

	gone := ctrs[0]
	require.NoError(t, n.rt.RemoveContainer(gone))
	require.Eventually(t, func() bool {
		_, found, err := recs.Read(gone.ID())
		return err == nil && !found
	}, 10*time.Second, 10*time.Millisecond, "the record goes with the container")

	// SIGTERM flushes: the checkpoint then holds every live container.
	n.plugin.Stop(t)
	assert.ElementsMatch(t, slices.DeleteFunc(ids, func(id string) bool { return id == gone.ID() }), savedIDs(t, n.stateDir))
}

func TestCorruptCheckpointAdoptsWhatRuns(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	ctrs := mixedWorkload(t, n)
	want := cpusets(t, ctrs)

	n.plugin.Stop(t)
	path := filepath.Join(n.stateDir, nriplugin.CheckpointFile)
	require.NoError(t, os.WriteFile(path, []byte(`{"format":1,"version":1,"checksum":"sha256:00","data":{}}`), 0o600))
	n.plugin.Restart(t)

	assert.Equal(t, want, cpusets(t, ctrs), "nothing moves")
	log := n.plugin.Log()
	assert.Contains(t, log, "checkpoint is corrupt")
	assert.Contains(t, log, "adopted container where it runs")
	aside, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	assert.Len(t, aside, 1, "the bad checkpoint is kept for inspection")
}

func TestMetrics(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	n.rt.RunPod(t, pod(t, "besteffort.yaml"))
	n.rt.RunPod(t, pod(t, "guaranteed-2cpu.yaml"))
	require.Error(t, n.rt.StartPod(n.rt.NewPod(t, pod(t, "bad-annotation.yaml"))))

	text := n.scrape(t)
	for _, want := range []string{
		`nri_suite_topology_aware_grants_total{pool="exclusive"} 1`,
		`nri_suite_topology_aware_grants_total{pool="shared"} 1`,
		`nri_suite_topology_aware_rejections_total{reason="invalid-annotation"} 1`,
		`nri_suite_topology_aware_containers{pool="exclusive"} 1`,
		`nri_suite_topology_aware_containers{pool="shared"} 1`,
		`nri_suite_topology_aware_allocation_duration_seconds_count{operation="allocate"} 2`,
		`nri_suite_topology_aware_pool_capacity_cpus{node="0",pool="shared"}`,
		`nri_suite_topology_aware_memory_granted_bytes{node="`,
	} {
		assert.Contains(t, text, want)
	}
}

// scrape returns the plugin's /metrics.
func (n *node) scrape(t testing.TB) string {
	t.Helper()
	rsp, err := http.Get("http://" + n.httpAddr + "/metrics")
	require.NoError(t, err)
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	require.NoError(t, err)
	return string(body)
}

// twoContainerPod is a Guaranteed pod of two containers of cpu CPUs each.
func twoContainerPod(t *testing.T, name, cpu string) *v1.Pod {
	manifest := guaranteedPod(t, name, cpu, nil)
	second := *manifest.Spec.Containers[0].DeepCopy()
	second.Name = "second"
	manifest.Spec.Containers = append(manifest.Spec.Containers, second)
	return manifest
}

// TestPodScopeAdmitsPodsAsUnits: under topology-scope pod, a pod's first
// container reserves the whole pod on its NUMA affinity (from the sums the
// sandbox carries), so that a pod created between its containers cannot
// take what its second container needs; the reservation goes with the pod.
func TestPodScopeAdmitsPodsAsUnits(t *testing.T) {
	n := startNode(t, "snc-2s-4n-80c", nodeOptions{config: "topology-policy: restricted\ntopology-scope: pod\n"})
	idle := n.rt.RunPod(t, pod(t, "besteffort.yaml")).Container("idle")
	a := n.rt.NewPod(t, twoContainerPod(t, "pair", "8"))
	require.NoError(t, n.rt.RunPodSandbox(a))
	require.NoError(t, n.rt.CreateContainer(a.Container("app")))
	first := cpus(t, a.Container("app"))
	require.Equal(t, map[int]int{0: 8}, n.perNode(first))
	assert.Equal(t, 4, cpus(t, idle).Intersection(n.topo.CPUsOfNode(0)).Size(), "the pod's 16 CPUs of node 0 left the shared pool")

	between := cpus(t, n.rt.RunPod(t, guaranteedPod(t, "between", "8", nil)).Container("app"))
	assert.Equal(t, map[int]int{1: 8}, n.perNode(between), "node 0 keeps only 4 CPUs for other pods")

	require.NoError(t, n.rt.CreateContainer(a.Container("second")))
	second := cpus(t, a.Container("second"))
	assert.Equal(t, map[int]int{0: 8}, n.perNode(second), "the pod's second container finds its CPUs")
	assert.True(t, first.Intersection(second).IsEmpty())

	n.rt.RemovePod(t, a)
	after := cpus(t, n.rt.RunPod(t, guaranteedPod(t, "after", "16", nil)).Container("app"))
	assert.Equal(t, map[int]int{0: 16}, n.perNode(after), "the pod's reservation went with it")
}
