package nriplugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/state"
)

// nodeSpec describes example.com/node=dev0 whose node is hostPath, 1:3.
func nodeSpec(hostPath string) string {
	return `cdiVersion: "0.6.0"
kind: example.com/node
devices:
- name: dev0
  containerEdits:
    deviceNodes:
    - path: /dev/dev0
      hostPath: ` + hostPath + `
      type: c
      major: 1
      minor: 3
`
}

const dev0 = "example.com/node=dev0"

// healthFixture is the plugin with a spec for a real char node 1:3 made
// with mknod, checked every 100ms.
func healthFixture(t *testing.T, config string) (*fixture, string) {
	t.Helper()
	node := filepath.Join(t.TempDir(), "dev0")
	require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), "mknod needs root")
	f := newFixture(t, "health-interval: 100ms\nmode: plugin\n"+config)
	require.NoError(t, os.WriteFile(filepath.Join(f.specDirs, "node.yaml"), []byte(nodeSpec(node)), 0o644))
	f.waitHealth(t, dev0, state.HealthHealthy)
	return f, node
}

// waitHealth polls until the metrics say id has health want.
func (f *fixture) waitHealth(t *testing.T, id string, want state.Health) {
	t.Helper()
	sample := `nri_suite_device_injector_device_health{device="` + id + `",health="` + string(want) + `"}`
	require.Eventually(t, func() bool { return f.metric(t, sample) == 1 }, 10*time.Second, 20*time.Millisecond,
		"device %s never became %s", id, want)
}

func askFor(name string) map[string]string {
	return map[string]string{"cdi-devices.nri-suite.io": name}
}

func TestUnhealthyDeviceNodeFailsNewContainers(t *testing.T) {
	f, node := healthFixture(t, "")
	_, err := f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.NoError(t, err)
	ctrHealth, err := state.ContainerHealthRecords(f.shared)
	require.NoError(t, err)
	rec, found, err := ctrHealth.Read("ctr-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []state.ResourceHealth{{ResourceID: dev0, Health: state.HealthHealthy}}, rec.Resources)

	require.NoError(t, os.Remove(node))
	f.waitHealth(t, dev0, state.HealthUnhealthy)
	assert.GreaterOrEqual(t, f.metric(t, `nri_suite_device_injector_devices_by_health{health="Unhealthy"}`), 1.0)

	_, err = f.create(t, pod("default", askFor(dev0)), container("ctr-2"))
	require.Error(t, err)
	// The refusal names the annotation that asked, as the policy's refusals do.
	assert.Contains(t, err.Error(), `annotation cdi-devices.nri-suite.io="`+dev0+`": unhealthy device `+dev0+": device node "+node+" is missing")
	assert.Equal(t, 1.0, f.metric(t, `nri_suite_device_injector_failures_total{reason="unhealthy"}`))

	// The running container's record and the device set follow.
	require.Eventually(t, func() bool {
		rec, _, err := ctrHealth.Read("ctr-1")
		return err == nil && len(rec.Resources) == 1 && rec.Resources[0].Health == state.HealthUnhealthy &&
			strings.Contains(rec.Resources[0].Message, "missing")
	}, 10*time.Second, 20*time.Millisecond)
	devHealth, err := state.DeviceHealthRecords(f.shared)
	require.NoError(t, err)
	set, found, err := devHealth.Read(state.DeviceHealthKey)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, state.HealthUnhealthy, set.Devices[dev0].Health)

	// Recovery: the node is back.
	require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	f.waitHealth(t, dev0, state.HealthHealthy)
	_, err = f.create(t, pod("default", askFor(dev0)), container("ctr-3"))
	require.NoError(t, err)

	require.NoError(t, f.p.RemoveContainer(t.Context(), nil, container("ctr-1")))
	_, found, err = ctrHealth.Read("ctr-1")
	require.NoError(t, err)
	assert.False(t, found, "the health record goes with the container")
}

func TestUnhealthyWarnAllows(t *testing.T) {
	f, node := healthFixture(t, "unhealthy-action: warn\n")
	require.NoError(t, os.Remove(node))
	f.waitHealth(t, dev0, state.HealthUnhealthy)
	_, err := f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.NoError(t, err)
}

func TestInvalidSpecMakesItsDevicesUnhealthy(t *testing.T) {
	f, node := healthFixture(t, "")
	spec := filepath.Join(f.specDirs, "node.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(strings.Replace(nodeSpec(node), `"0.6.0"`, `"9.9.9"`, 1)), 0o644))
	f.waitHealth(t, dev0, state.HealthUnhealthy)
	_, err := f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.Error(t, err)
	for _, want := range []string{"unhealthy device", dev0, "spec " + spec + " is invalid", "9.9.9"} {
		assert.Contains(t, err.Error(), want)
	}

	require.NoError(t, os.WriteFile(spec, []byte(nodeSpec(node)), 0o644))
	f.waitHealth(t, dev0, state.HealthHealthy)
}

func TestWrongNumbersAreUnhealthy(t *testing.T) {
	f, node := healthFixture(t, "")
	require.NoError(t, os.Remove(node))
	require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
	f.waitHealth(t, dev0, state.HealthUnhealthy)
	_, err := f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.ErrorContains(t, err, "is c 1:5, the spec says c 1:3")
}

func TestOperatorCheckFailsNewContainers(t *testing.T) {
	healthDir := t.TempDir()
	status := filepath.Join(healthDir, "dev0")
	require.NoError(t, os.WriteFile(status, []byte("ok\n"), 0o644))
	f, _ := healthFixture(t, "health-checks:\n- devices: [\"example.com/node=*\"]\n  file: "+healthDir+"/{name}\n  expect: ok\n"+
		"- devices: [\"example.com/dev=*\"]\n  command: [/bin/sh, -c, \"echo driver wedged >&2; exit 2\"]\n")
	_, err := f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(status, []byte("ecc-errors\n"), 0o644))
	f.waitHealth(t, dev0, state.HealthUnhealthy)
	_, err = f.create(t, pod("default", askFor(dev0)), container("ctr-2"))
	require.Error(t, err)
	for _, want := range []string{"unhealthy device " + dev0, "health check health-checks[0]", `"ecc-errors"`, "expected it to match"} {
		assert.Contains(t, err.Error(), want)
	}

	// The command check applies to the other spec's devices only.
	f.waitHealth(t, "example.com/dev=null", state.HealthUnhealthy)
	_, err = f.create(t, pod("default", askFor("example.com/dev=null")), container("ctr-3"))
	require.ErrorContains(t, err, "health check health-checks[1]: /bin/sh exited with status 2: driver wedged")
	assert.Equal(t, 2.0, f.metric(t, `nri_suite_device_injector_failures_total{reason="unhealthy"}`))
}

// TestUnwritableHealthRecord: a container health record that cannot be
// written does not refuse the container, unlike its locality record
// (TestCreateContainerFailsWhenLocalityCannotBePublished); it is counted
// and written at a later round.
func TestUnwritableHealthRecord(t *testing.T) {
	f, _ := healthFixture(t, "")
	ctrHealth, err := state.ContainerHealthRecords(f.shared)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(ctrHealth.Dir()))
	require.NoError(t, os.WriteFile(ctrHealth.Dir(), nil, 0o644), "a file where the records' directory belongs")

	_, err = f.create(t, pod("default", askFor(dev0)), container("ctr-1"))
	require.NoError(t, err, "the container is created")
	_, found, err := f.records.Read("ctr-1")
	require.NoError(t, err)
	assert.True(t, found, "its locality record is written")
	assert.GreaterOrEqual(t, f.metric(t, "nri_suite_device_injector_record_errors_total{}"), 1.0)

	require.NoError(t, os.Remove(ctrHealth.Dir()))
	require.Eventually(t, func() bool {
		rec, found, err := ctrHealth.Read("ctr-1")
		return err == nil && found && len(rec.Resources) == 1 && rec.Resources[0].Health == state.HealthHealthy
	}, 10*time.Second, 20*time.Millisecond, "the health record is written at a later round")
}
