// Package soak_test runs a fault-injection soak of the plugins that adjust
// containers (device-injector, topology-aware, security) together, through
// the real NRI adaptation and the real plugin binaries: randomized
// creations, resizes and removals, kill -9 of each plugin, runtime
// restarts, a shared directory whose lock another process holds, and a
// full state directory. After every step it checks what a node must never
// show:
//
//   - a container created without one of its plugins' adjustments (a cpuset
//     from topology-aware, a seccomp filter from security, the CDI device it
//     asked for from device-injector): a container is either refused or
//     complete;
//   - exclusive CPU sets that overlap, or a shared container on one;
//   - a topology-aware checkpoint that differs from what the runtime runs.
//
// The sequence is seeded (SOAK_SEED, SOAK_STEPS), so a failure replays.
package soak_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/internal/testenv"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	fixture    = "smt-2s-12c-interleaved"
	deviceName = "soak.nri-suite.io/dev=null"
	devicePath = "/dev/soak-null"
	deviceSpec = `cdiVersion: "0.6.0"
kind: soak.nri-suite.io/dev
devices:
- name: "null"
  containerEdits:
    deviceNodes:
    - {path: /dev/soak-null, hostPath: /dev/null, type: c, major: 1, minor: 3}
`
	// defaultSteps is at least the 50 cycles the issue asks for.
	defaultSteps = 60
)

// node is the runtime, the three plugins and where they keep their state.
type node struct {
	rt       *harness.Runtime
	plugins  []*harness.Plugin
	shared   string // the plugins' shared directory, on a small tmpfs
	stateDir string // topology-aware's checkpoint, on the same tmpfs
}

func startNode(t *testing.T) *node {
	testenv.RequireRoot(t, "to mount the small tmpfs the soak fills")
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	specDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "soak.yaml"), []byte(deviceSpec), 0o644))
	store := smallTmpfs(t)
	n := &node{rt: harness.New(t), shared: filepath.Join(store, "shared"), stateDir: filepath.Join(store, "topology-aware")}
	sysfs := filepath.Join(repo, "common", "topology", "testdata", fixture, "sysfs")
	start := func(pkg, idx, name, config string, args ...string) {
		// Given after the harness's --shared-dir, so they win.
		args = append([]string{"--log-level", "info", "--http-addr", "127.0.0.1:0", "--shared-dir", n.shared}, args...)
		n.plugins = append(n.plugins, n.rt.StartPlugin(t, harness.BuildPlugin(t, pkg), idx, name,
			harness.WithConfig(config), harness.WithArgs(args...)))
	}
	start("./plugins/device-injector", "10", "device-injector", fmt.Sprintf("mode: plugin\nspec-dirs: [%s]\n", specDir),
		"--sysfs-root", sysfs)
	start("./plugins/topology-aware", "30", "topology-aware", "", "--sysfs-root", sysfs, "--state-dir", n.stateDir)
	start("./plugins/security", "40", "security", "validator: {devices: {plugins: {10-device-injector: [\"soak.nri-suite.io/*\", /dev/soak-null]}}}\n")
	return n
}

// smallTmpfs mounts a 2 MiB tmpfs, which a step fills, unmounted after the
// test.
func smallTmpfs(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0755"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// live is a pod the runtime runs, with what it asked for.
type live struct {
	pod       *harness.Pod
	exclusive bool
	device    bool
}

// templates are the kinds of pods the soak creates: shared and exclusive
// CPUs, with and without the CDI device.
var templates = []struct {
	name      string
	cpu       string // Guaranteed with this many CPUs; "" for BestEffort
	exclusive bool
}{
	{"besteffort", "", false}, {"fractional", "500m", false}, {"one", "1", true}, {"two", "2", true},
}

func manifest(t *testing.T, name string, tpl int, device bool) *v1.Pod {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  uid: uid-%s\n", name, name)
	if device {
		s += "  annotations: {cdi-devices.nri-suite.io: \"" + deviceName + "\"}\n"
	}
	s += "spec:\n  containers:\n  - name: app\n    image: busybox\n"
	if cpu := templates[tpl].cpu; cpu != "" {
		s += fmt.Sprintf("    resources: {requests: {cpu: %q, memory: 64Mi}, limits: {cpu: %q, memory: 64Mi}}\n", cpu, cpu)
	}
	return harness.ParsePod(t, s)
}

func TestSoak(t *testing.T) {
	seed, steps := envInt(t, "SOAK_SEED", 1), envInt(t, "SOAK_STEPS", defaultSteps)
	t.Logf("seed %d, %d steps (SOAK_SEED, SOAK_STEPS)", seed, steps)
	n := startNode(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 13))
	var pods []live
	var refused, created int
	for step := range steps {
		op := rng.IntN(20)
		what := ""
		switch {
		case op < 8 || len(pods) == 0:
			what = "create"
			l, err := n.create(t, rng, fmt.Sprintf("p%d", step))
			if err != nil {
				refused++
				break
			}
			created++
			pods = append(pods, l)
		case op < 11:
			what = "remove"
			i := rng.IntN(len(pods))
			n.rt.RemovePod(t, pods[i].pod)
			pods = slices.Delete(pods, i, i+1)
		case op < 13:
			what = "resize"
			n.resize(t, rng, pods)
		case op < 15:
			p := n.plugins[rng.IntN(len(n.plugins))]
			what = "kill -9 " + p.QualifiedName()
			p.Kill(t)
			p.Restart(t)
		case op < 16:
			what = "runtime restart"
			n.rt.Restart(t)
			for _, p := range n.plugins {
				p.WaitSynchronized(t)
			}
		case op < 18:
			what = "create while the shared directory's locks are held"
			release := n.holdLocks(t)
			l, err := n.create(t, rng, fmt.Sprintf("p%d", step))
			release()
			if err != nil {
				refused++
				break
			}
			created++
			pods = append(pods, l)
		default:
			what = "create and remove with the state directory full"
			free := n.fill(t)
			l, err := n.create(t, rng, fmt.Sprintf("p%d", step))
			if err == nil {
				created++
				pods = append(pods, l)
			} else {
				refused++
			}
			if len(pods) > 1 {
				n.rt.RemovePod(t, pods[0].pod)
				pods = pods[1:]
			}
			free()
		}
		n.check(t, step, what, pods)
	}
	t.Logf("%d steps: %d pods created complete, %d refused, %d running at the end", steps, created, refused, len(pods))
	require.Positive(t, created, "the soak created nothing: it checked nothing")
}

// create starts a pod of a random template: it is either refused (the
// error names it) or runs with every adjustment (checked by check).
func (n *node) create(t *testing.T, rng *rand.Rand, name string) (live, error) {
	tpl, device := rng.IntN(len(templates)), rng.IntN(3) == 0
	p := n.rt.NewPod(t, manifest(t, name, tpl, device))
	if err := n.rt.StartPod(p); err != nil {
		require.Contains(t, err.Error(), "default/"+name+"/app", "a refusal names the container")
		n.rt.RemovePod(t, p)
		return live{}, err
	}
	return live{pod: p, exclusive: templates[tpl].exclusive, device: device}, nil
}

// resize moves an exclusive container between 1 and 2 CPUs; a resize that
// does not fit is refused and leaves the grant as it was.
func (n *node) resize(t *testing.T, rng *rand.Rand, pods []live) {
	for _, l := range pods {
		if !l.exclusive {
			continue
		}
		c := l.pod.Containers()[0]
		lim := c.Def.Manifest.Resources.Limits.DeepCopy()
		lim[v1.ResourceCPU] = resource.MustParse(strconv.Itoa(1 + rng.IntN(2)))
		before := c.Spec().CPUs()
		if err := n.rt.ResizeContainer(c, v1.ResourceRequirements{Requests: lim, Limits: lim}); err != nil {
			require.Equal(t, before, c.Spec().CPUs(), "a refused resize keeps the grant")
		}
		return
	}
}

// holdLocks takes the writers' lock of every directory of the shared state,
// as a stuck process would, and returns their release.
func (n *node) holdLocks(t *testing.T) (release func()) {
	dirs, err := filepath.Glob(filepath.Join(n.shared, "*"))
	require.NoError(t, err)
	var files []*os.File
	for _, dir := range append(dirs, n.stateDir) {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, ".state.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		require.NoError(t, err)
		require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
		files = append(files, f)
	}
	return func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
}

// fill writes a file until the state's tmpfs is full and returns its
// removal.
func (n *node) fill(t *testing.T) (free func()) {
	path := filepath.Join(filepath.Dir(n.shared), "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, unix.ENOSPC), "filling the tmpfs: %v", err)
			break
		}
	}
	require.NoError(t, f.Close())
	return func() { require.NoError(t, os.Remove(path)) }
}

// check asserts the soak's invariants after step.
func (n *node) check(t *testing.T, step int, what string, pods []live) {
	t.Helper()
	at := fmt.Sprintf("step %d (%s)", step, what)
	var grants, shared []cpuset.CPUSet
	want := map[string]string{}
	for _, l := range pods {
		c := l.pod.Containers()[0]
		spec := c.Spec()
		set, err := cpuset.Parse(spec.CPUs())
		require.NoError(t, err, "%s: %s's cpuset", at, c.Name())
		require.False(t, set.IsEmpty(), "%s: pod %s runs without topology-aware's cpuset", at, l.pod.Name())
		require.NotEmpty(t, spec.Mems(), "%s: pod %s runs without topology-aware's memory nodes", at, l.pod.Name())
		require.NotNil(t, spec.Seccomp(), "%s: pod %s runs without security's seccomp profile", at, l.pod.Name())
		if l.device {
			require.NotNil(t, spec.Device(devicePath), "%s: pod %s runs without the CDI device it asked for", at, l.pod.Name())
		}
		if l.exclusive {
			grants = append(grants, set)
		} else {
			shared = append(shared, set)
		}
		want[c.ID()] = spec.CPUs() + "/" + spec.Mems()
	}
	for i, g := range grants {
		for _, h := range grants[i+1:] {
			require.True(t, g.Intersection(h).IsEmpty(), "%s: exclusive sets %s and %s overlap", at, g, h)
		}
		for _, s := range shared {
			require.True(t, s.Intersection(g).IsEmpty(), "%s: a shared container on %s overlaps the grant %s", at, s, g)
		}
	}
	// The checkpoint is written behind the handlers: wait for it, bounded.
	var got map[string]string
	ok := waitFor(func() bool {
		got = n.checkpoint()
		return got != nil && maps(got, want)
	})
	require.True(t, ok, "%s: topology-aware's checkpoint %v differs from what the runtime runs %v", at, got, want)
}

// checkpoint is topology-aware's checkpoint as container id -> cpus/mems;
// nil while it cannot be read (a writer holds the lock).
func (n *node) checkpoint() map[string]string {
	cp, err := state.NewCheckpoint[nriplugin.Saved](filepath.Join(n.stateDir, nriplugin.CheckpointFile), nriplugin.CheckpointVersion)
	if err != nil {
		return nil
	}
	saved, _, err := cp.Load()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, c := range saved.Containers {
		out[c.Placement.ContainerID] = strings.Join([]string{c.Placement.CPUs.String(), c.Placement.Mems.String()}, "/")
	}
	return out
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// waitFor polls cond for up to 10 s: long enough for a loaded machine's
// writer, and no figure of the test.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q: expected a number", name, v)
	return n
}
