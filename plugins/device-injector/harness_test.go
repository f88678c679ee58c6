package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

const pluginPkg = "./plugins/device-injector"

func TestMain(m *testing.M) { harness.Main(m) }

// exampleSpec describes /dev/null (1:3, on every Linux host) under another
// path, with an env var and a mount, as example.com/dev=null, and /dev/zero
// as example.com/dev=zero.
const exampleSpec = `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    deviceNodes:
    - path: /dev/example-null
      hostPath: /dev/null
      type: c
      major: 1
      minor: 3
    env: [EXAMPLE_DEVICE=null]
    mounts:
    - hostPath: /opt/example
      containerPath: /opt/example
      options: [ro, bind]
- name: zero
  containerEdits:
    deviceNodes:
    - path: /dev/zero
`

// node is a runtime with the device-injector connected.
type node struct {
	rt      *harness.Runtime
	plugin  *harness.Plugin
	specDir string
	records *state.Records[state.ContainerDevices]
}

// startNode starts a runtime and the plugin on a spec directory holding
// specs (file name -> content) and a sysfs tree where 1:3 is on NUMA node 1,
// with the plugin's further args. The runtime resolves CDI devices the
// plugin hands it with the CDI library on the same directory, as containerd
// does.
func startNode(t testing.TB, config string, specs map[string]string, args ...string) *node {
	t.Helper()
	n := &node{specDir: t.TempDir()}
	for name, content := range specs {
		require.NoError(t, os.WriteFile(filepath.Join(n.specDir, name), []byte(content), 0o644))
	}
	sysfs := t.TempDir()
	require.NoError(t, locality.WriteDevice(sysfs, locality.Device{
		PCIAddress: "0000:3b:00.0", NUMANode: 1, LocalCPUs: cpuset.New(2, 3),
		Nodes: []locality.DeviceNode{{Kind: locality.Char, Major: 1, Minor: 3}},
	}))
	runtimeCDI, err := cdi.NewCache(cdi.WithSpecDirs(n.specDir), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	n.rt = harness.New(t, harness.WithCDIInjector(func(spec *rspec.Spec, devices []string) error {
		_, err := runtimeCDI.InjectDevices(spec, devices...)
		return err
	}))
	n.plugin = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "10", "device-injector",
		harness.WithConfig(fmt.Sprintf("spec-dirs: [%s]\n%s", n.specDir, config)),
		harness.WithArgs(append([]string{"--log-level", "debug", "--http-addr", "127.0.0.1:0", "--sysfs-root", sysfs}, args...)...))
	n.records, err = state.ContainerDeviceRecords(n.rt.SharedDir())
	require.NoError(t, err)
	return n
}

func podYAML(name, annotations string, containers ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  uid: uid-%s\n  annotations:\n%s\nspec:\n  containers:\n", name, name, annotations)
	for _, c := range containers {
		s += fmt.Sprintf("  - name: %s\n    image: busybox\n", c)
	}
	return s
}

func TestInjectsIntoTheSpec(t *testing.T) {
	for _, mode := range []string{"plugin", "runtime"} {
		t.Run(mode, func(t *testing.T) {
			n := startNode(t, "mode: "+mode+"\n", map[string]string{"example.yaml": exampleSpec})
			p := n.rt.RunPod(t, harness.ParsePod(t, podYAML("gpu",
				`    cdi-devices.nri-suite.io/container.app: example.com/dev=null`, "app", "sidecar")))
			app := p.Container("app")
			spec := app.Spec()

			dev := spec.Device("/dev/example-null")
			require.NotNil(t, dev, "the device node is in the OCI spec")
			assert.Equal(t, [3]any{"c", int64(1), int64(3)}, [3]any{dev.Type, dev.Major, dev.Minor})
			v, ok := spec.Env("EXAMPLE_DEVICE")
			assert.True(t, ok)
			assert.Equal(t, "null", v)
			m := spec.Mount("/opt/example")
			require.NotNil(t, m)
			assert.Equal(t, "/opt/example", m.Source)
			allowed := false
			for _, rule := range spec.Linux.Resources.Devices {
				allowed = allowed || rule.Allow && rule.Type == "c" && *rule.Major == 1 && *rule.Minor == 3
			}
			assert.True(t, allowed, "the device cgroup allows 1:3")

			if mode == "runtime" {
				assert.Equal(t, []string{"example.com/dev=null"}, app.CDIDevices(), "the runtime injected it")
			} else {
				assert.Empty(t, app.CDIDevices(), "the plugin injected it")
			}
			assert.Nil(t, p.Container("sidecar").Spec().Device("/dev/example-null"), "only the annotated container")

			rec, found, err := n.records.Read(app.ID())
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, []state.InjectedDevice{{Name: "example.com/dev=null", Kind: "cdi", Path: "/dev/example-null",
				Type: "c", Major: 1, Minor: 3, NUMANode: 1, LocalCPUs: "2-3"}}, rec.Devices)
			assert.Equal(t, "gpu", rec.Pod)

			n.rt.RemovePod(t, p)
			keys, err := n.records.Keys()
			require.NoError(t, err)
			assert.Empty(t, keys, "records go with their containers")
		})
	}
}

func TestAnnotationKeys(t *testing.T) {
	models, err := filepath.EvalSymlinks(t.TempDir()) // a mount source must exist
	require.NoError(t, err)
	n := startNode(t, "mode: plugin\npolicy:\n  default:\n    device-paths: [/dev/full]\n    mount-sources: ["+filepath.Dir(models)+"/*]\n",
		map[string]string{"example.yaml": exampleSpec})
	p := n.rt.RunPod(t, harness.ParsePod(t, podYAML("keys", `    cdi-devices.nri-suite.io/pod: example.com/dev=zero
    cdi-devices.nri-suite.io/container.a: example.com/dev=null
    cdi.k8s.io/container.b: example.com/dev=null
    devices.noderesource.dev/container.c: |
      - path: /dev/full
    mounts.noderesource.dev/container.c: |
      - {source: `+models+`, destination: /models, type: bind, options: [rbind, ro]}
    cdi-devices.noderesource.dev/container.d: |
      - example.com/dev=null`, "a", "b", "c", "d")))

	for _, tc := range []struct {
		container string
		has       []string // device paths
		lacks     []string
	}{
		{"a", []string{"/dev/example-null"}, []string{"/dev/zero"}},              // container key beats pod key
		{"b", []string{"/dev/example-null", "/dev/zero"}, nil},                   // standard key joins the pod key
		{"c", []string{"/dev/full", "/dev/zero"}, []string{"/dev/example-null"}}, // sample device key
		{"d", []string{"/dev/example-null", "/dev/zero"}, nil},                   // sample CDI key
	} {
		t.Run(tc.container, func(t *testing.T) {
			spec := p.Container(tc.container).Spec()
			for _, path := range tc.has {
				assert.NotNil(t, spec.Device(path), "%s has %s", tc.container, path)
			}
			for _, path := range tc.lacks {
				assert.Nil(t, spec.Device(path), "%s lacks %s", tc.container, path)
			}
		})
	}
	m := p.Container("c").Spec().Mount("/models")
	require.NotNil(t, m, "sample mount key")
	assert.Equal(t, models, m.Source)
	assert.Equal(t, []string{"rbind", "ro"}, m.Options)
}

func TestRefusedCreations(t *testing.T) {
	conflicting := `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    env: [OTHER=1]
`
	for _, tc := range []struct {
		name        string
		config      string
		specs       map[string]string
		annotations string
		volume      string // a hostPath volume mounted at /opt/example
		want        []string
	}{
		{
			name: "policy", config: "policy:\n  default:\n    cdi: [other.com/*]\n",
			annotations: "    cdi-devices.nri-suite.io: example.com/dev=null",
			want:        []string{"denied by policy", "CDI device example.com/dev=null in namespace default"},
		},
		{
			name: "host device path not allowed", annotations: "    devices.nri-suite.io: '[{path: /dev/full}]'",
			want: []string{"device /dev/full", "policy.device-paths allows nothing"},
		},
		{
			name: "unknown device", annotations: "    cdi-devices.nri-suite.io: example.com/dev=gpu7",
			want: []string{"unresolvable CDI device example.com/dev=gpu7"},
		},
		{
			name: "device two specs define", specs: map[string]string{"other.yaml": conflicting},
			annotations: "    cdi-devices.nri-suite.io: example.com/dev=null",
			want:        []string{"unresolvable CDI device example.com/dev=null", `conflicting device "example.com/dev=null"`, "other.yaml"},
		},
		{
			name: "mount already present", annotations: "    cdi-devices.nri-suite.io: example.com/dev=null",
			volume: "/var/lib/models",
			want:   []string{"mount at /opt/example", "already mounts /var/lib/models there"},
		},
		{
			name: "malformed annotation", annotations: "    devices.noderesource.dev: 'path: /dev/full'",
			want: []string{"annotation devices.noderesource.dev=", "a YAML list of devices"},
		},
		{
			// Was echoed whole, three times over, into the runtime's error.
			name: "CDI name of a megabyte", annotations: "    cdi-devices.nri-suite.io: example.com/dev=" + strings.Repeat("n", 1<<20),
			want: []string{`annotation cdi-devices.nri-suite.io="example.com/dev=nnnn`, "…(1048592 bytes): want a value of at most 16384 bytes"},
		},
		{
			name: "standard annotation above the size limit", annotations: "    cdi.k8s.io/claim: " + strings.Repeat("example.com/dev=null,", 1000) + "example.com/dev=null",
			want: []string{`annotation cdi.k8s.io/claim="example.com/dev=null,`, "want a value of at most 16384 bytes"},
		},
		{
			// Was ignored: the container came out without the device.
			name: "unknown annotation suffix", annotations: "    cdi-devices.nri-suite.io/containers.app: example.com/dev=null",
			want: []string{`annotation cdi-devices.nri-suite.io/containers.app="example.com/dev=null"`,
				"want a key of the form cdi-devices.nri-suite.io, cdi-devices.nri-suite.io/pod or cdi-devices.nri-suite.io/container.<name>"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs := map[string]string{"example.yaml": exampleSpec}
			for k, v := range tc.specs {
				specs[k] = v
			}
			n := startNode(t, "mode: plugin\n"+tc.config, specs)
			manifest := podYAML("refused", tc.annotations, "app")
			if tc.volume != "" {
				manifest += fmt.Sprintf("    volumeMounts:\n    - {name: v, mountPath: /opt/example}\n  volumes:\n  - name: v\n    hostPath: {path: %s}\n", tc.volume)
			}
			p := n.rt.NewPod(t, harness.ParsePod(t, manifest))
			err := n.rt.StartPod(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "device-injector: container default/refused/app")
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Less(t, len(err.Error()), 4096, "the runtime gets a bounded error")
		})
	}
}

// TestSynchronizeRebuildsRecords creates a container while the plugin is
// down: the restarted plugin finds it at Synchronize and publishes its
// device, locality and health records from the pod's annotations, without
// adjusting it.
func TestSynchronizeRebuildsRecords(t *testing.T) {
	n := startNode(t, "mode: plugin\npolicy:\n  default:\n    device-paths: [/dev/full]\n",
		map[string]string{"example.yaml": exampleSpec})
	n.plugin.Stop(t)
	p := n.rt.RunPod(t, harness.ParsePod(t, podYAML("early", `    cdi-devices.nri-suite.io/container.app: example.com/dev=null,example.com/dev=gone
    devices.nri-suite.io/container.app: '[{path: /dev/full}]'`, "app", "plain")))
	app := p.Container("app")
	assert.Nil(t, app.Spec().Device("/dev/example-null"), "created without the plugin")

	n.plugin.Restart(t)
	rec, found, err := n.records.Read(app.ID())
	require.NoError(t, err)
	require.True(t, found, "the device record is rebuilt at Synchronize")
	assert.Equal(t, "early", rec.Pod)
	assert.Equal(t, []state.InjectedDevice{
		{Name: "example.com/dev=null", Kind: "cdi", Path: "/dev/example-null", Type: "c", Major: 1, Minor: 3, NUMANode: 1, LocalCPUs: "2-3"},
		{Name: "/dev/full", Kind: "node", Path: "/dev/full", Type: "c", Major: 1, Minor: 7, NUMANode: -1},
		{Name: "example.com/dev=gone", Kind: "cdi", NUMANode: -1},
	}, rec.Devices, "located devices, then the one that no longer resolves")
	_, found, err = n.records.Read(p.Container("plain").ID())
	require.NoError(t, err)
	assert.False(t, found, "a container that asks for nothing has no record")

	health, err := state.ContainerHealthRecords(n.rt.SharedDir())
	require.NoError(t, err)
	h, found, err := health.Read(app.ID())
	require.NoError(t, err)
	require.True(t, found, "the container's health record is rebuilt")
	assert.Equal(t, []string{"example.com/dev=null", "/dev/full", "example.com/dev=gone"}, resourceIDs(h.Resources))

	assert.Empty(t, app.Updates(), "Synchronize adjusts nothing")
	assert.Nil(t, app.Spec().Device("/dev/example-null"))
	assert.Contains(t, n.plugin.Log(), "rebuilt device record from the pod's annotations")

	n.rt.RemovePod(t, p)
	keys, err := n.records.Keys()
	require.NoError(t, err)
	assert.Empty(t, keys, "rebuilt records go with their containers")
}

func resourceIDs(resources []state.ResourceHealth) []string {
	var ids []string
	for _, r := range resources {
		ids = append(ids, r.ResourceID)
	}
	return ids
}

// TestMountSourcesAreResolved: a mount annotation's source is checked as the
// host resolves it, `..` and symlinks included, and mounted as checked; its
// destination stays out of what the runtime mounts itself; and it is a bind
// mount, whose options cannot name other host paths. Every refusal names the
// annotation. The policy allows the direct children of a temporary
// directory, as `/opt/*` would.
func TestMountSourcesAreResolved(t *testing.T) {
	allowed, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	outside := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(allowed, "models"), 0o755))
	require.NoError(t, os.Symlink("/", filepath.Join(allowed, "root")))
	require.NoError(t, os.Symlink(outside, filepath.Join(allowed, "elsewhere")))
	require.NoError(t, os.Symlink("models", filepath.Join(allowed, "alias")))
	n := startNode(t, fmt.Sprintf("mode: plugin\npolicy:\n  default:\n    mount-sources: [%q]\n", allowed+"/*"), nil)
	const key = "mounts.noderesource.dev/container.app"
	annotation := func(mount string) string { return fmt.Sprintf("    %s: '[%s]'", key, mount) }

	for _, tc := range []struct {
		name, mount string
		want        []string // in the error, besides the annotation
	}{
		{"parent of the allowed directory", "{source: " + allowed + "/.., destination: /host, type: bind, options: [rbind, rw]}",
			[]string{`source "` + allowed + `/.."`, "expected a clean absolute path"}},
		{"up and elsewhere", "{source: " + allowed + "/./../etc, destination: /host, type: bind}",
			[]string{"expected a clean absolute path"}},
		{"symlink to /", "{source: " + allowed + "/root, destination: /host, type: bind}",
			[]string{"source " + allowed + "/root is / on the host", "denied by policy", "policy.mount-sources allows " + allowed + "/*"}},
		{"symlink out of the allowed directory", "{source: " + allowed + "/elsewhere, destination: /host, type: bind}",
			[]string{"is " + outside + " on the host", "denied by policy"}},
		{"relative source", "{source: models, destination: /host, type: bind}",
			[]string{`source "models"`, "expected a clean absolute path"}},
		{"missing source", "{source: " + allowed + "/absent, destination: /host, type: bind}",
			[]string{"mount source not resolvable on the host", "no such file or directory"}},
		{"destination /", "{source: " + allowed + "/models, destination: /, type: bind}",
			[]string{"destination /:", "outside / itself and /proc, /sys, /dev"}},
		{"destination in /proc", "{source: " + allowed + "/models, destination: /proc/sys/kernel, type: bind}",
			[]string{"destination /proc/sys/kernel"}},
		{"destination escaping", "{source: " + allowed + "/models, destination: /models/../dev/x, type: bind}",
			[]string{`destination "/models/../dev/x"`, "expected a clean absolute path"}},
		{"overlay naming another host path", "{source: " + allowed + "/models, destination: /host, type: overlay, options: [lowerdir=/]}",
			[]string{`type "overlay"`, "expected a bind mount"}},
		{"sysfs", "{source: " + allowed + "/models, destination: /host, type: sysfs}",
			[]string{`type "sysfs"`, "expected a bind mount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := n.rt.NewPod(t, harness.ParsePod(t, podYAML("refused", annotation(tc.mount), "app")))
			err := n.rt.StartPod(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "annotation "+key+`="[`+tc.mount+`]"`, "the error names the annotation and its value")
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}

	t.Run("allowed", func(t *testing.T) {
		p := n.rt.RunPod(t, harness.ParsePod(t, podYAML("allowed", annotation(
			"{source: "+allowed+"/models, destination: /models, type: bind, options: [rbind, ro]}, "+
				"{source: "+allowed+"/alias, destination: /alias, type: bind, options: [rbind, ro]}"), "app")))
		spec := p.Container("app").Spec()
		m := spec.Mount("/models")
		require.NotNil(t, m)
		assert.Equal(t, allowed+"/models", m.Source)
		assert.Equal(t, []string{"rbind", "ro"}, m.Options)
		m = spec.Mount("/alias")
		require.NotNil(t, m, "a symlink inside the allowed directory")
		assert.Equal(t, allowed+"/models", m.Source, "mounted as resolved, so that the runtime mounts what was checked")
	})
}
