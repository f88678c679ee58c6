package nriplugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

// exampleSpec describes /dev/null (1:3, on every Linux host) as
// example.com/dev=null with env, a mount and a hook.
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
    env: [EXAMPLE=null]
    mounts:
    - hostPath: /opt/example
      containerPath: /opt/example
      options: [ro, bind]
    hooks:
    - hookName: createContainer
      path: /usr/bin/example-hook
- name: env-only
  containerEdits:
    env: [EXAMPLE_ENV_ONLY=1]
`

// otherSpec defines a device whose node takes the same path as
// example.com/dev=null's with other numbers.
const otherSpec = `cdiVersion: "0.6.0"
kind: other.com/dev
devices:
- name: zero
  containerEdits:
    deviceNodes:
    - path: /dev/example-null
      hostPath: /dev/zero
`

type fixture struct {
	p        *Plugin
	reg      *prometheus.Registry
	shared   string
	records  *state.Records[state.ContainerDevices]
	specDirs string
}

// newFixture builds the plugin on a spec directory holding exampleSpec and
// otherSpec, with a sysfs tree where /dev/null's 1:3 sits on NUMA node 1.
func newFixture(t testing.TB, config string) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), shared: t.TempDir(), specDirs: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(f.specDirs, "example.yaml"), []byte(exampleSpec), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.specDirs, "other.yaml"), []byte(otherSpec), 0o644))
	sysfs := t.TempDir()
	require.NoError(t, locality.WriteDevice(sysfs, locality.Device{
		PCIAddress: "0000:3b:00.0", NUMANode: 1, LocalCPUs: cpuset.New(4, 5, 6, 7),
		Nodes: []locality.DeviceNode{{Kind: locality.Char, Major: 1, Minor: 3}},
	}))
	log := logrus.New()
	log.SetOutput(io.Discard)
	var err error
	f.p, err = New(plugin.Deps{Name: "device-injector", Log: logrus.NewEntry(log), Registry: f.reg,
		MetricsNamespace: "nri_suite_device_injector", SharedDir: f.shared}, Options{SysfsRoot: sysfs})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.p.Close()) })
	require.NoError(t, f.p.Configure([]byte("spec-dirs: ["+f.specDirs+"]\n"+config), "test.yaml"))
	f.records, err = state.ContainerDeviceRecords(f.shared)
	require.NoError(t, err)
	return f
}

func pod(namespace string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: "pod-1", Name: "web", Namespace: namespace, Uid: "uid-1", Annotations: annotations}
}

func container(id string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: "pod-1", Name: "app",
		Env: []string{"PATH=/bin"}, Linux: &api.LinuxContainer{}}
}

func (f *fixture) create(t *testing.T, p *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, error) {
	t.Helper()
	adjust, updates, err := f.p.CreateContainer(context.Background(), p, c)
	assert.Empty(t, updates)
	return adjust, err
}

func TestCreateContainerPluginMode(t *testing.T) {
	data, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	f := newFixture(t, "mode: plugin\npolicy:\n  default:\n    device-paths: [/dev/zero]\n    mount-sources: ["+filepath.Dir(data)+"/*]\n")
	adjust, err := f.create(t, pod("default", map[string]string{
		"cdi-devices.nri-suite.io/container.app": "example.com/dev=null,example.com/dev=env-only",
		"devices.nri-suite.io":                   "- path: /dev/zero\n",
		"mounts.noderesource.dev":                "- {source: " + data + ", destination: /data, type: bind, options: [rbind]}\n",
	}), container("ctr-1"))
	require.NoError(t, err)
	require.NotNil(t, adjust)

	assert.Empty(t, adjust.GetCDIDevices(), "plugin mode resolves CDI itself")
	devices := map[string]string{}
	for _, d := range adjust.GetLinux().GetDevices() {
		devices[d.GetPath()] = fmt.Sprintf("%s %d:%d", d.GetType(), d.GetMajor(), d.GetMinor())
	}
	assert.Equal(t, map[string]string{"/dev/example-null": "c 1:3", "/dev/zero": "c 1:5"}, devices)
	env := map[string]string{}
	for _, kv := range adjust.GetEnv() {
		env[kv.GetKey()] = kv.GetValue()
	}
	assert.Equal(t, map[string]string{"EXAMPLE": "null", "EXAMPLE_ENV_ONLY": "1"}, env)
	mounts := map[string]string{}
	for _, m := range adjust.GetMounts() {
		mounts[m.GetDestination()] = m.GetSource()
	}
	assert.Equal(t, map[string]string{"/opt/example": "/opt/example", "/data": data}, mounts)
	require.Len(t, adjust.GetHooks().GetCreateContainer(), 1)
	assert.Equal(t, "/usr/bin/example-hook", adjust.GetHooks().GetCreateContainer()[0].GetPath())

	rec, found, err := f.records.Read("ctr-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, state.ContainerDevices{
		ContainerID: "ctr-1", PodUID: "uid-1", Namespace: "default", Pod: "web", Container: "app",
		Devices: []state.InjectedDevice{
			{Name: "example.com/dev=null", Kind: "cdi", Path: "/dev/example-null", Type: "c", Major: 1, Minor: 3, NUMANode: 1, LocalCPUs: "4-7"},
			{Name: "example.com/dev=env-only", Kind: "cdi", NUMANode: -1},
			{Name: "/dev/zero", Kind: "node", Path: "/dev/zero", Type: "c", Major: 1, Minor: 5, NUMANode: -1},
		},
	}, rec)
	assert.Equal(t, 2.0, f.metric(t, `nri_suite_device_injector_injections_total{kind="cdi",mode="plugin"}`))
	assert.Equal(t, 1.0, f.metric(t, `nri_suite_device_injector_injections_total{kind="node",mode="plugin"}`))
	assert.Equal(t, 1.0, f.metric(t, `nri_suite_device_injector_injections_total{kind="mount",mode="plugin"}`))

	require.NoError(t, f.p.RemoveContainer(context.Background(), nil, container("ctr-1")))
	_, found, err = f.records.Read("ctr-1")
	require.NoError(t, err)
	assert.False(t, found, "the record goes with the container")
}

func TestCreateContainerRuntimeMode(t *testing.T) {
	f := newFixture(t, "mode: runtime\npolicy:\n  default:\n    device-paths: [/dev/zero]\n")
	adjust, err := f.create(t, pod("default", map[string]string{
		"cdi.k8s.io/example":   "example.com/dev=null",
		"devices.nri-suite.io": "- {path: /dev/zero, file_mode: 0o600}\n",
	}), container("ctr-1"))
	require.NoError(t, err)
	require.NotNil(t, adjust)
	require.Len(t, adjust.GetCDIDevices(), 1)
	assert.Equal(t, "example.com/dev=null", adjust.GetCDIDevices()[0].GetName())
	require.Len(t, adjust.GetLinux().GetDevices(), 1, "only the plain node; the runtime applies the CDI device")
	d := adjust.GetLinux().GetDevices()[0]
	assert.Equal(t, "/dev/zero", d.GetPath())
	assert.Equal(t, uint32(0o600), d.GetFileMode().GetValue())
	assert.Empty(t, adjust.GetEnv())
	assert.Empty(t, adjust.GetMounts())
	assert.Nil(t, adjust.GetHooks())

	rec, found, err := f.records.Read("ctr-1")
	require.NoError(t, err)
	require.True(t, found, "runtime mode locates the CDI device's nodes too")
	require.Len(t, rec.Devices, 2)
	assert.Equal(t, 1, rec.Devices[0].NUMANode)
	assert.Equal(t, "4-7", rec.Devices[0].LocalCPUs)
}

func TestCreateContainerNothingAsked(t *testing.T) {
	f := newFixture(t, "")
	adjust, err := f.create(t, pod("default", map[string]string{"other": "x"}), container("ctr-1"))
	require.NoError(t, err)
	assert.Nil(t, adjust)
	keys, err := f.records.Keys()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

func TestCreateContainerAlreadyPresent(t *testing.T) {
	// A runtime that applied a standard CDI annotation itself leaves the
	// device's edits in the container: nothing is added twice.
	f := newFixture(t, "mode: plugin\n")
	c := container("ctr-1")
	c.Env = append(c.Env, "EXAMPLE=null")
	c.Mounts = []*api.Mount{{Source: "/opt/example", Destination: "/opt/example", Options: []string{"ro", "bind"}}}
	c.Linux.Devices = []*api.LinuxDevice{{Path: "/dev/example-null", Type: "c", Major: 1, Minor: 3}}
	c.Hooks = &api.Hooks{CreateContainer: []*api.Hook{{Path: "/usr/bin/example-hook"}}}
	adjust, err := f.create(t, pod("default", map[string]string{"cdi.k8s.io/x": "example.com/dev=null"}), c)
	require.NoError(t, err)
	assert.Nil(t, adjust)
	_, found, err := f.records.Read("ctr-1")
	require.NoError(t, err)
	assert.True(t, found, "the devices are still recorded")
}

func TestCreateContainerFailures(t *testing.T) {
	for _, tc := range []struct {
		name        string
		config      string
		namespace   string
		annotations map[string]string
		ctr         func(*api.Container)
		reason      string
		want        []string
	}{
		{
			name: "malformed annotation", annotations: map[string]string{"cdi-devices.nri-suite.io": "gpu"},
			reason: "invalid-annotation", want: []string{"container default/web/app", "cdi-devices.nri-suite.io", `"gpu"`},
		},
		{
			name: "policy", config: "policy:\n  namespaces:\n    team:\n      cdi: [other.com/*]\n", namespace: "team",
			annotations: map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=null"},
			reason:      "policy", want: []string{"denied by policy", "CDI device example.com/dev=null in namespace team", "other.com/*"},
		},
		{
			name: "device path denied by default", annotations: map[string]string{"devices.nri-suite.io": "- path: /dev/zero"},
			reason: "policy", want: []string{"device /dev/zero", "policy.device-paths allows nothing"},
		},
		{
			name: "mount denied by default", annotations: map[string]string{"mounts.noderesource.dev": "- {source: /, destination: /host, type: bind}"},
			reason: "policy", want: []string{"annotation mounts.noderesource.dev=", "mount source /", "policy.mount-sources allows nothing"},
		},
		{
			// /proc/self/root is a symlink to / on every Linux host.
			name: "mount source a symlink out of the rule", config: "policy:\n  default:\n    mount-sources: [/proc/self/*]\n",
			annotations: map[string]string{"mounts.noderesource.dev/pod": "- {source: /proc/self/root, destination: /host, type: bind}"},
			reason:      "policy", want: []string{"annotation mounts.noderesource.dev/pod=", "source /proc/self/root is / on the host", "allows /proc/self/*"},
		},
		{
			name: "mount source missing", config: "policy:\n  default:\n    mount-sources: [/*]\n",
			annotations: map[string]string{"mounts.noderesource.dev": "- {source: /nri-suite-missing, destination: /x, type: bind}"},
			reason:      "missing-mount-source", want: []string{"mounts.noderesource.dev", "mount source not resolvable on the host", "no such file"},
		},
		{
			name: "mount over /dev", annotations: map[string]string{"mounts.noderesource.dev": "- {source: /, destination: /dev/x, type: bind}"},
			reason: "invalid-annotation", want: []string{"destination /dev/x", "outside / itself"},
		},
		{
			name: "unknown device", annotations: map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=gpu9"},
			reason: "unresolvable", want: []string{"unresolvable CDI device example.com/dev=gpu9"},
		},
		{
			name: "missing device path", config: "policy:\n  default:\n    device-paths: [\"/dev/*\"]\n",
			annotations: map[string]string{"devices.nri-suite.io/pod": "- path: /dev/nri-suite-missing"},
			reason:      "missing-device", want: []string{"device /dev/nri-suite-missing", "devices.nri-suite.io/pod", "no such file"},
		},
		{
			name: "not a device node", config: "policy:\n  default:\n    device-paths: [\"/*\"]\n",
			annotations: map[string]string{"devices.nri-suite.io": "- path: /tmp"},
			reason:      "missing-device", want: []string{"/tmp", "not a char or block device"},
		},
		{
			name: "numbers disagree with the host", config: "policy:\n  default:\n    device-paths: [/dev/null]\n",
			annotations: map[string]string{"devices.nri-suite.io": "- {path: /dev/null, type: c, major: 1, minor: 5}"},
			reason:      "other", want: []string{"/dev/null", "annotation says c 1:5", "host's node is c 1:3"},
		},
		{
			name:        "two specs want one device path",
			annotations: map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=null,other.com/dev=zero"},
			reason:      "conflict", want: []string{"conflict: device /dev/example-null", "CDI device example.com/dev=null gives c 1:3", "CDI device other.com/dev=zero gives c 1:5"},
		},
		{
			name:        "mount destination already present",
			annotations: map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=null"},
			ctr: func(c *api.Container) {
				c.Mounts = []*api.Mount{{Source: "/var/lib/x", Destination: "/opt/example", Type: "bind"}}
			},
			reason: "conflict", want: []string{"mount at /opt/example", "mounts /opt/example", "already mounts /var/lib/x there"},
		},
		{
			name:        "device path already present",
			annotations: map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=null"},
			ctr: func(c *api.Container) {
				c.Linux.Devices = []*api.LinuxDevice{{Path: "/dev/example-null", Type: "c", Major: 10, Minor: 200}}
			},
			reason: "conflict", want: []string{"device /dev/example-null", "already has c 10:200"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "mode: plugin\n"+tc.config)
			ns := tc.namespace
			if ns == "" {
				ns = "default"
			}
			c := container("ctr-1")
			if tc.ctr != nil {
				tc.ctr(c)
			}
			adjust, err := f.create(t, pod(ns, tc.annotations), c)
			require.Error(t, err)
			assert.Nil(t, adjust)
			assert.Contains(t, err.Error(), "device-injector: container "+ns+"/web/app")
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Equal(t, 1.0, f.metric(t, `nri_suite_device_injector_failures_total{reason="`+tc.reason+`"}`))
			keys, err := f.records.Keys()
			require.NoError(t, err)
			assert.Empty(t, keys, "no record for a refused container")
		})
	}
}

func TestUnsupportedInPluginMode(t *testing.T) {
	f := newFixture(t, "mode: plugin\n")
	require.NoError(t, os.WriteFile(filepath.Join(f.specDirs, "gid.yaml"), []byte(`cdiVersion: "0.7.0"
kind: gid.com/dev
devices:
- name: a
  containerEdits:
    additionalGids: [44]
`), 0o644))
	ann := map[string]string{"cdi-devices.nri-suite.io": "gid.com/dev=a"}
	require.Eventually(t, func() bool {
		_, err := f.create(t, pod("default", ann), container("ctr-1"))
		return err != nil && failureReason(err) == "unsupported"
	}, 10*time.Second, 20*time.Millisecond)
	_, err := f.create(t, pod("default", ann), container("ctr-1"))
	assert.ErrorContains(t, err, "needs additionalGids")

	require.NoError(t, f.p.Configure([]byte("mode: runtime\nspec-dirs: ["+f.specDirs+"]\n"), "test.yaml"))
	adjust, err := f.create(t, pod("default", ann), container("ctr-2"))
	require.NoError(t, err, "the runtime can apply it")
	assert.Len(t, adjust.GetCDIDevices(), 1)
}

func TestSynchronizeDropsStaleRecords(t *testing.T) {
	f := newFixture(t, "")
	ann := map[string]string{"cdi-devices.nri-suite.io": "example.com/dev=env-only"}
	for _, id := range []string{"live", "gone"} {
		_, err := f.create(t, pod("default", ann), container(id))
		require.NoError(t, err)
	}
	_, err := f.p.Synchronize(context.Background(), nil, []*api.Container{container("live")})
	require.NoError(t, err)
	keys, err := f.records.Keys()
	require.NoError(t, err)
	assert.Equal(t, []string{"live"}, keys)
}

func TestMetricsFromCache(t *testing.T) {
	f := newFixture(t, "")
	require.NoError(t, os.WriteFile(filepath.Join(f.specDirs, "bad.yaml"), []byte("cdiVersion: \"9.9.9\"\nkind: bad.com/x\ndevices: []\n"), 0o644))
	require.Eventually(t, func() bool {
		return f.metric(t, "nri_suite_device_injector_spec_errors{}") == 1
	}, 10*time.Second, 20*time.Millisecond, "the watcher sees the bad spec")
	assert.Equal(t, 3.0, f.metric(t, "nri_suite_device_injector_cdi_devices{}"), "the good specs still count")
}

// metric returns the value of one sample, written name{label="value",...}
// with labels sorted, or -1 when there is no such sample.
func (f *fixture) metric(t *testing.T, sample string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if fam.GetName()+"{"+strings.Join(labels, ",")+"}" == sample {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestIdentityFromKubeletLabels(t *testing.T) {
	// The kubelet's labels name the container, as common/k8s reads them.
	f := newFixture(t, "")
	c := container("ctr-1")
	c.Name = "runtime-name"
	c.Labels = map[string]string{k8s.LabelContainerName: "app"}
	_, err := f.create(t, pod("default", map[string]string{"cdi-devices.nri-suite.io/container.app": "example.com/dev=env-only"}), c)
	require.NoError(t, err)
	rec, found, err := f.records.Read("ctr-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "app", rec.Container)
}

func TestCreateContainerFailsWhenLocalityCannotBePublished(t *testing.T) {
	f := newFixture(t, "")
	// A directory where the record belongs: the write fails even for root.
	require.NoError(t, os.MkdirAll(filepath.Join(f.records.Dir(), "ctr-1.json"), 0o755))

	adjust, err := f.create(t, pod("default", map[string]string{
		"cdi-devices.nri-suite.io": "example.com/dev=null",
	}), container("ctr-1"))
	require.ErrorIs(t, err, ErrPublish)
	assert.Nil(t, adjust, "no devices without their published locality")
	assert.Contains(t, err.Error(), "default/web/app")
	assert.Contains(t, err.Error(), f.records.Dir())
	assert.Equal(t, 1.0, f.metric(t, `nri_suite_device_injector_failures_total{reason="record"}`))
}

// TestDevicePathSymlinkOutOfPolicy: a device path in an allowed directory
// that is a symlink to a node outside it is refused; before, the policy saw
// the link and the container got the target's numbers.
func TestDevicePathSymlinkOutOfPolicy(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dir, "disk")))
	f := newFixture(t, "mode: plugin\npolicy:\n  default:\n    device-paths: [\""+dir+"/*\"]\n")
	ann := map[string]string{"devices.nri-suite.io": "- path: " + dir + "/disk"}
	_, err := f.create(t, pod("default", ann), container("ctr-1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "annotation devices.nri-suite.io=")
	assert.Contains(t, err.Error(), "device "+dir+"/disk is /dev/null on the host")

	f = newFixture(t, "mode: plugin\npolicy:\n  default:\n    device-paths: [\""+dir+"/*\", /dev/null]\n")
	adjust, err := f.create(t, pod("default", ann), container("ctr-1"))
	require.NoError(t, err, "a link whose target the rule allows too")
	require.Len(t, adjust.GetLinux().GetDevices(), 1)
	assert.Equal(t, int64(3), adjust.GetLinux().GetDevices()[0].GetMinor(), "the target's numbers")
}
