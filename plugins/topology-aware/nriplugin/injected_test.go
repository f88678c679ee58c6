package nriplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// Devices of snc-2s-4n-80c, as device-injector records them.
var (
	nvmeOnNode2 = state.InjectedDevice{Name: "example.com/disk=nvme0", Kind: state.DeviceKindCDI, Path: "/dev/nvme0n1",
		Type: "b", Major: 259, Minor: 0, NUMANode: 2, LocalCPUs: "20-29,60-69"}
	gpuOnNode3 = state.InjectedDevice{Name: "/dev/nvidia1", Kind: state.DeviceKindNode, Path: "/dev/nvidia1",
		Type: "c", Major: 195, Minor: 1, NUMANode: 3, LocalCPUs: "30-39,70-79"}
)

func mustCPUs(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	require.NoError(t, err)
	return set
}

// publishDevices writes device-injector's record for the container id in
// the shared state directory dir.
func publishDevices(t *testing.T, dir, id string, devices ...state.InjectedDevice) {
	t.Helper()
	recs, err := state.ContainerDeviceRecords(dir)
	require.NoError(t, err)
	require.NoError(t, recs.Publish(id, state.ContainerDevices{ContainerID: id, Namespace: "default", Pod: "p", Container: "app", Devices: devices}))
}

func TestInjectedDevices(t *testing.T) {
	const ctrID = "ctr-1"
	with := func(change func(*state.InjectedDevice)) state.InjectedDevice {
		d := nvmeOnNode2
		change(&d)
		return d
	}
	tests := []struct {
		name    string
		devices []state.InjectedDevice
		want    []policy.Device
		wantErr []string
	}{
		{name: "a CDI device node, with its locality as recorded", devices: []state.InjectedDevice{nvmeOnNode2},
			want: []policy.Device{{ID: "block 259:0", NUMANode: 2, CPUs: mustCPUs(t, "20-29,60-69")}}},
		{name: "device paths are Linux devices NRI shows: left out", devices: []state.InjectedDevice{gpuOnNode3}},
		{name: "a CDI device without nodes keeps its name and unknown locality",
			devices: []state.InjectedDevice{{Name: "example.com/net=vf0", Kind: state.DeviceKindCDI, NUMANode: locality.UnknownNode}},
			want:    []policy.Device{{ID: "cdi example.com/net=vf0", NUMANode: -1}}},
		{name: "a char node of unknown locality", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) {
			d.Type, d.Major, d.Minor, d.NUMANode, d.LocalCPUs = "c", 1, 3, -1, ""
		})}, want: []policy.Device{{ID: "char 1:3", NUMANode: -1}}},
		{name: "a FIFO has no locality", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) {
			d.Type, d.Major, d.Minor = "p", 0, 0
		})}},
		{name: "unknown kind", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) { d.Kind = "pci" })},
			wantErr: []string{`devices[0] (example.com/disk=nvme0)`, `kind "pci"`, `expected "cdi" or "node"`}},
		{name: "bad local CPUs", devices: []state.InjectedDevice{gpuOnNode3, with(func(d *state.InjectedDevice) { d.LocalCPUs = "20-x" })},
			wantErr: []string{"devices[1]", "localCPUs", `"20-x"`}},
		{name: "bad NUMA node", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) { d.NUMANode = -7 })},
			wantErr: []string{"numaNode -7", "expected a node id or -1"}},
		{name: "bad type", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) { d.Type = "x" })},
			wantErr: []string{`type "x"`, "expected c, u, b or p"}},
		{name: "bad device number", devices: []state.InjectedDevice{with(func(d *state.InjectedDevice) { d.Minor = -1 })},
			wantErr: []string{"device number 259:-1", "non-negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			publishDevices(t, dir, ctrID, tc.devices...)
			source, err := NewInjectedDevices(dir)
			require.NoError(t, err)
			got, err := source.ContainerDevices(k8s.Identity{Namespace: "default", Pod: "p", Container: "app", ContainerID: ctrID})
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, want := range append(tc.wantErr, "device-injector's record ctr-1 in "+filepath.Join(dir, state.ContainerDevicesKind)) {
					assert.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestInjectedDevicesRecordProblems(t *testing.T) {
	id := k8s.Identity{Namespace: "default", Pod: "p", Container: "app", ContainerID: "ctr-1"}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		wantErr []string // nil: no devices and no error
	}{
		{name: "no record: the container got no devices", prepare: func(t *testing.T, dir string) {
			publishDevices(t, dir, "another-container", nvmeOnNode2)
		}},
		{name: "no shared records at all", prepare: func(*testing.T, string) {}},
		{name: "corrupt record", prepare: func(t *testing.T, dir string) {
			publishDevices(t, dir, id.ContainerID, nvmeOnNode2)
			path := filepath.Join(dir, state.ContainerDevicesKind, id.ContainerID+".json")
			require.NoError(t, os.WriteFile(path, []byte(`{"format":1,"version":1,"checksum":"sha256:00","data":{}}`), 0o644))
		}, wantErr: []string{"default/p/app", "corrupt state file", filepath.Join(state.ContainerDevicesKind, "ctr-1.json"), "checksum"}},
		{name: "record of another container under its key", prepare: func(t *testing.T, dir string) {
			recs, err := state.ContainerDeviceRecords(dir)
			require.NoError(t, err)
			require.NoError(t, recs.Publish(id.ContainerID, state.ContainerDevices{ContainerID: "ctr-2", Devices: []state.InjectedDevice{nvmeOnNode2}}))
		}, wantErr: []string{"record ctr-1", `containerID "ctr-2", expected "ctr-1"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.prepare(t, dir)
			source, err := NewInjectedDevices(dir)
			require.NoError(t, err)
			got, err := source.ContainerDevices(id)
			assert.Empty(t, got)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// TestEachInjectedDeviceCountsOnce runs the plugin as New wires it (no
// DeviceSource, a shared state directory) on the container device-injector
// gave the NVMe disk of NUMA node 2 as a CDI device: in runtime mode NRI does
// not show it and only the record has it; in plugin mode the node is also a
// Linux device of the container. Either way the request has it once.
func TestEachInjectedDeviceCountsOnce(t *testing.T) {
	want := []policy.Device{{ID: "block 259:0", NUMANode: 2, CPUs: mustCPUs(t, "20-29,60-69")}}
	tests := []struct {
		mode  string
		linux []*api.LinuxDevice // what NRI shows
	}{
		{"runtime", nil},
		{"plugin", []*api.LinuxDevice{{Path: nvmeOnNode2.Path, Type: "b", Major: 259, Minor: 0}}},
		{"plugin, the same node at two paths", []*api.LinuxDevice{
			{Path: nvmeOnNode2.Path, Type: "b", Major: 259, Minor: 0}, {Path: "/dev/disk0", Type: "b", Major: 259, Minor: 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			p := newTestPlugin(t, "snc-2s-4n-80c", nil)
			pod, ctr := nriPod(t, "guaranteed-2cpu.yaml", "app")
			ctr.Linux.Devices = tc.linux
			publishDevices(t, p.shared, ctr.GetId(), nvmeOnNode2, gpuOnNode3)
			got, _, err := p.requests.Build(pod, ctr, nil)
			require.NoError(t, err)
			assert.Equal(t, want, got.Devices, "the device path's node is not shown by NRI here, so only the CDI device counts")
		})
	}
}

func TestCorruptDeviceRecordFailsTheCreation(t *testing.T) {
	p := newTestPlugin(t, "snc-2s-4n-80c", nil)
	_, err := p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	pod, ctr := nriPod(t, "guaranteed-2cpu.yaml", "app")
	bad := nvmeOnNode2
	bad.LocalCPUs = "twenty"
	publishDevices(t, p.shared, ctr.GetId(), bad)

	_, _, err = p.CreateContainer(context.Background(), pod, ctr)
	require.Error(t, err)
	for _, want := range []string{"topology-aware", "default/exclusive/app", "device-injector's record " + ctr.GetId(), `"twenty"`} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, "device-lookup", rejectionReason(err))
	assert.Empty(t, p.pol.Placements(), "nothing was placed")
}

// FuzzInjectedDevice feeds record entries to the conversion: it never
// panics, and what it accepts is a device the policy can use.
func FuzzInjectedDevice(f *testing.F) {
	f.Add("cdi", "b", int64(259), int64(0), 2, "20-29,60-69")
	f.Add("cdi", "", int64(0), int64(0), -1, "")
	f.Add("node", "c", int64(195), int64(1), 3, "30-39")
	f.Add("cdi", "p", int64(0), int64(0), -1, "")
	f.Add("pci", "c", int64(1), int64(3), 0, "0")
	f.Add("cdi", "u", int64(-1), int64(3), -2, "1-0")
	f.Fuzz(func(t *testing.T, kind, typ string, major, minor int64, node int, cpus string) {
		d := state.InjectedDevice{Name: "example.com/x=y", Kind: kind, Type: typ, Major: major, Minor: minor, NUMANode: node, LocalCPUs: cpus}
		dev, ok, err := injectedDevice(d)
		if err != nil {
			assert.False(t, ok)
			assert.NotEmpty(t, err.Error())
			return
		}
		if !ok {
			assert.True(t, kind == state.DeviceKindNode || typ == "p", "only node entries and FIFOs are skipped: %+v", d)
			return
		}
		assert.Equal(t, state.DeviceKindCDI, kind)
		assert.NotEmpty(t, dev.ID)
		assert.GreaterOrEqual(t, dev.NUMANode, locality.UnknownNode)
		assert.Equal(t, node, dev.NUMANode)
	})
}

// A Synchronize looks the devices of many containers up from one listing of
// the records: a listed container gets its devices, as one at a time, and
// one without a record gets none without its record being opened.
func TestInjectedDevicesListed(t *testing.T) {
	dir := t.TempDir()
	publishDevices(t, dir, "with", nvmeOnNode2)
	src, err := NewInjectedDevices(dir)
	require.NoError(t, err)
	listed, err := src.Listed()
	require.NoError(t, err)

	one, err := src.ContainerDevices(k8s.Identity{ContainerID: "with"})
	require.NoError(t, err)
	got, err := listed.ContainerDevices(k8s.Identity{ContainerID: "with"})
	require.NoError(t, err)
	assert.Equal(t, one, got)
	assert.Len(t, got, 1)

	// A record published after the listing is not looked for: the listing
	// is of the containers that exist at the Synchronize.
	publishDevices(t, dir, "later", nvmeOnNode2)
	got, err = listed.ContainerDevices(k8s.Identity{ContainerID: "later"})
	require.NoError(t, err)
	assert.Empty(t, got)
}
