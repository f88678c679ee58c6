package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper/helpertest"
)

const pluginPkg = "./plugins/sidecar-order"

func TestMain(m *testing.M) { harness.Main(m) }

// node is the in-process runtime with the plugin connected.
type node struct {
	rt       *harness.Runtime
	plugin   *harness.Plugin
	helper   string
	stateDir string
}

func startNode(t *testing.T) *node {
	t.Helper()
	return startNodeIn(t, harness.New(t), filepath.Join(t.TempDir(), "state"))
}

// startNodeIn connects the plugin to rt with stateDir as its --state-dir.
func startNodeIn(t *testing.T, rt *harness.Runtime, stateDir string) *node {
	t.Helper()
	n := &node{rt: rt, helper: helpertest.Build(t, ""), stateDir: stateDir}
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "20", "sidecar-order",
		harness.WithArgs("--log-level", "debug", "--http-addr", "", "--helper", n.helper, "--state-dir", n.stateDir))
	return n
}

// podYAML is a pod whose containers run "/bin/<name> --flag".
func podYAML(name, annotations string, containers ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  uid: uid-%s\n  annotations:\n%s\nspec:\n  containers:\n", name, name, annotations)
	for _, c := range containers {
		s += fmt.Sprintf("  - name: %s\n    image: busybox\n    command: [/bin/%s, --flag]\n", c, c)
	}
	return s
}

// TestArgsAndMounts: every container of an annotated pod runs the helper in
// front of its own args, with the helper mounted read-only and the pod's
// coordination directory read-write; the directory holds the pod's spec
// and goes with the pod.
func TestArgsAndMounts(t *testing.T) {
	n := startNode(t)
	p := n.rt.RunPod(t, harness.ParsePod(t, podYAML("web", `    sidecar-order.nri-suite.io/sidecars: proxy,logs
    ready.sidecar-order.nri-suite.io/container.proxy: tcp:127.0.0.1:15000
    on-timeout.sidecar-order.nri-suite.io: fail`, "proxy", "logs", "app")))
	dir := coord.Dir{Path: filepath.Join(n.stateDir, "uid-web")}

	for _, tc := range []struct{ container, role string }{
		{"proxy", helper.RoleSidecar}, {"logs", helper.RoleSidecar}, {"app", helper.RoleMain},
	} {
		t.Run(tc.container, func(t *testing.T) {
			spec := p.Container(tc.container).Spec()
			assert.Equal(t, []string{helper.BinaryPath, "--role", tc.role, "--container", tc.container, "--", "/bin/" + tc.container, "--flag"},
				spec.Args())
			bin := spec.Mount(helper.BinaryPath)
			require.NotNil(t, bin, "the helper is mounted")
			assert.Equal(t, n.helper, bin.Source)
			assert.Contains(t, bin.Options, "ro")
			d := spec.Mount(helper.DirPath)
			require.NotNil(t, d, "the coordination directory is mounted")
			assert.Equal(t, dir.Path, d.Source)
			assert.Contains(t, d.Options, "rw")
		})
	}
	got, err := dir.ReadSpec()
	require.NoError(t, err)
	assert.Equal(t, []coord.Sidecar{
		{Name: "proxy", Ready: coord.Readiness{Kind: coord.ReadyTCP, Target: "127.0.0.1:15000"}, Timeout: coord.Duration(time.Minute), OnTimeout: coord.OnTimeoutFail},
		{Name: "logs", Ready: coord.Readiness{Kind: coord.ReadyProcess}, Timeout: coord.Duration(time.Minute), OnTimeout: coord.OnTimeoutFail},
	}, got.Sidecars)
	mains, err := dir.Mains(got)
	require.NoError(t, err)
	assert.Equal(t, []string{"app"}, mains, "the main is registered, the sidecars are not")
	info, err := os.Stat(dir.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o777), info.Mode().Perm(), "writable by the containers whatever their user")

	n.rt.RemovePod(t, p)
	assert.NoDirExists(t, dir.Path, "removed with the pod")
}

// TestReadinessKinds: each readiness kind reaches the helpers' spec.
func TestReadinessKinds(t *testing.T) {
	n := startNode(t)
	for _, tc := range []struct {
		value string
		want  coord.Readiness
	}{
		{"process", coord.Readiness{Kind: coord.ReadyProcess}},
		{"file:/run/ready", coord.Readiness{Kind: coord.ReadyFile, Target: "/run/ready"}},
		{"tcp:127.0.0.1:15000", coord.Readiness{Kind: coord.ReadyTCP, Target: "127.0.0.1:15000"}},
		{"exec:/bin/check --ready", coord.Readiness{Kind: coord.ReadyExec, Target: "/bin/check", Args: []string{"--ready"}}},
	} {
		t.Run(tc.want.Kind, func(t *testing.T) {
			name := "ready-" + tc.want.Kind
			p := n.rt.RunPod(t, harness.ParsePod(t, podYAML(name, fmt.Sprintf(`    sidecar-order.nri-suite.io/sidecars: proxy
    ready.sidecar-order.nri-suite.io/container.proxy: %q`, tc.value), "proxy", "app")))
			got, err := coord.Dir{Path: filepath.Join(n.stateDir, "uid-"+name)}.ReadSpec()
			require.NoError(t, err)
			require.Len(t, got.Sidecars, 1)
			assert.Equal(t, tc.want, got.Sidecars[0].Ready)
			n.rt.RemovePod(t, p)
		})
	}
}

// TestUntouched: pods without the sidecars annotation, including one with a
// native sidecar, and containers that are neither sidecars nor declared
// mains, get no adjustment at all.
func TestUntouched(t *testing.T) {
	n := startNode(t)
	plain := n.rt.RunPod(t, harness.ParsePod(t, podYAML("plain", `    other.example.com/x: "y"`, "app", "proxy")))
	native := n.rt.RunPod(t, harness.ParsePod(t, `apiVersion: v1
kind: Pod
metadata: {name: native, namespace: default, uid: uid-native}
spec:
  initContainers:
  - {name: proxy, image: busybox, command: [/bin/proxy], restartPolicy: Always}
  containers:
  - {name: app, image: busybox, command: [/bin/app]}
`))
	declared := n.rt.RunPod(t, harness.ParsePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: declared
  namespace: default
  uid: uid-declared
  annotations:
    sidecar-order.nri-suite.io/sidecars: proxy
    sidecar-order.nri-suite.io/mains: app
spec:
  initContainers:
  - {name: setup, image: busybox, command: [/bin/setup]}
  containers:
  - {name: proxy, image: busybox, command: [/bin/proxy]}
  - {name: app, image: busybox, command: [/bin/app]}
`))
	for _, c := range []*harness.Container{plain.Container("app"), plain.Container("proxy"), native.Container("proxy"),
		native.Container("app"), declared.Container("setup")} {
		adj := c.Adjustment()
		assert.True(t, adj == nil || (len(adj.Args) == 0 && len(adj.Mounts) == 0 && len(adj.Env) == 0),
			"container %s gets no adjustment: %v", c.Name(), adj)
		assert.Equal(t, "/bin/"+c.Name(), c.Spec().Args()[0], "container %s runs its own command", c.Name())
		assert.Nil(t, c.Spec().Mount(helper.DirPath))
	}
	assert.Equal(t, helper.BinaryPath, declared.Container("app").Spec().Args()[0], "the declared main is ordered")
	for _, uid := range []string{"uid-plain", "uid-native"} {
		assert.NoDirExists(t, filepath.Join(n.stateDir, uid))
	}
	assert.Contains(t, n.plugin.Log(), "not a sidecar nor a declared main: left alone")
}

// TestRefusedCreations: a bad annotation fails the container's creation
// with an error that names the key, the value and what was expected.
func TestRefusedCreations(t *testing.T) {
	n := startNode(t)
	for _, tc := range []struct {
		name, annotations string
		want              string
	}{
		{"duplicated sidecar", `    sidecar-order.nri-suite.io/sidecars: proxy,proxy`,
			`annotation sidecar-order.nri-suite.io/sidecars="proxy,proxy": want distinct container names, but "proxy" appears twice`},
		{"malformed readiness", `    sidecar-order.nri-suite.io/sidecars: proxy
    ready.sidecar-order.nri-suite.io/container.proxy: "tcp:15000"`,
			`annotation ready.sidecar-order.nri-suite.io/container.proxy="tcp:15000": want one of`},
		{"readiness of no sidecar", `    sidecar-order.nri-suite.io/sidecars: proxy
    ready.sidecar-order.nri-suite.io/container.proxi: process`,
			`"proxi" is not listed`},
		{"bad on-timeout", `    sidecar-order.nri-suite.io/sidecars: proxy
    on-timeout.sidecar-order.nri-suite.io: later`,
			`annotation on-timeout.sidecar-order.nri-suite.io="later": want one of "start", "fail"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			p := n.rt.NewPod(t, harness.ParsePod(t, podYAML(name, tc.annotations, "proxy", "app")))
			err := n.rt.StartPod(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "sidecar-order: container default/"+name+"/proxy")
			assert.Contains(t, err.Error(), tc.want)
			assert.NoDirExists(t, filepath.Join(n.stateDir, "uid-"+name))
		})
	}
}

// TestSynchronizeRemovesStaleDirs: a coordination directory whose pod is
// gone (removed while the plugin was down) is removed when the plugin
// synchronizes; those of running pods stay.
func TestSynchronizeRemovesStaleDirs(t *testing.T) {
	n := startNode(t)
	annotated := `    sidecar-order.nri-suite.io/sidecars: proxy`
	kept := n.rt.RunPod(t, harness.ParsePod(t, podYAML("kept", annotated, "proxy", "app")))
	gone := n.rt.RunPod(t, harness.ParsePod(t, podYAML("gone", annotated, "proxy", "app")))
	n.plugin.Kill(t)
	n.rt.RemovePod(t, gone)
	require.DirExists(t, filepath.Join(n.stateDir, "uid-gone"), "removed while the plugin was down")
	n.plugin.Restart(t)
	assert.NoDirExists(t, filepath.Join(n.stateDir, "uid-gone"))
	assert.DirExists(t, filepath.Join(n.stateDir, "uid-kept"))
	n.rt.RemovePod(t, kept)
}

// TestSharedStateDirLosesNothing: pointed at the shared state directory,
// the plugin removes only the coordination directories it made. The other
// plugins' records survive its Synchronize, a pod whose uid names one of
// their directories is refused instead of being given it, and that pod's
// removal removes nothing either.
func TestSharedStateDirLosesNothing(t *testing.T) {
	rt := harness.New(t)
	shared := rt.SharedDir()
	others := []string{"placements/c1.json", "devices/c1.json", "pools/shared.json", "device-health/gpu0.json", "uid-other/data"}
	for _, f := range others {
		require.NoError(t, os.MkdirAll(filepath.Join(shared, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(shared, f), []byte("{}\n"), 0o644))
	}
	n := startNodeIn(t, rt, shared)
	annotated := `    sidecar-order.nri-suite.io/sidecars: proxy`
	gone := n.rt.RunPod(t, harness.ParsePod(t, podYAML("gone", annotated, "proxy", "app")))
	n.plugin.Kill(t)
	n.rt.RemovePod(t, gone)
	n.plugin.Restart(t)
	assert.NoDirExists(t, filepath.Join(shared, "uid-gone"), "the plugin's own stale directory goes")
	for _, f := range others {
		assert.FileExists(t, filepath.Join(shared, f), "Synchronize leaves what the plugin did not make")
	}

	for _, tc := range []struct{ uid, annotations string }{
		{"placements", annotated},
		{"devices", `    other.example.com/x: "y"`},
	} {
		p := n.rt.NewPod(t, harness.ParsePod(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  uid: %s
  annotations:
%s
spec:
  containers:
  - {name: proxy, image: busybox, command: [/bin/proxy]}
  - {name: app, image: busybox, command: [/bin/app]}
`, tc.uid, tc.uid, tc.annotations)))
		if err := n.rt.StartPod(p); tc.annotations == annotated {
			require.Error(t, err, "pod %s", tc.uid)
			assert.Contains(t, err.Error(), filepath.Join(shared, tc.uid)+" exists and was not made by sidecar-order")
		} else {
			require.NoError(t, err)
		}
		n.rt.RemovePod(t, p)
	}
	for _, f := range others {
		assert.FileExists(t, filepath.Join(shared, f), "pods whose uid names a directory of others remove none")
	}
	assert.NoFileExists(t, filepath.Join(shared, "placements", "pod.json"))
}
