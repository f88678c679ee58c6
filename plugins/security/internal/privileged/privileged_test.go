package privileged

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
)

func sysfs(options ...string) *api.Mount {
	return &api.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: options}
}

func rules(r ...*api.LinuxDeviceCgroup) *api.LinuxContainer {
	return &api.LinuxContainer{Resources: &api.LinuxResources{Devices: r}}
}

func TestOf(t *testing.T) {
	allowAll := &api.LinuxDeviceCgroup{Allow: true, Access: "rwm"}
	denyAll := &api.LinuxDeviceCgroup{Allow: false, Access: "rwm"}
	for _, tc := range []struct {
		name string
		ctr  *api.Container
		want Signs
	}{
		// As containerd v2.4.2 and CRI-O v1.34.0 pass them to NRI.
		{"containerd privileged", &api.Container{Mounts: []*api.Mount{sysfs("nosuid", "noexec", "nodev", "rw")}, Linux: rules(allowAll)},
			Signs{AllDevicesAllowed: true, SysfsWritable: true}},
		{"CRI-O privileged", &api.Container{Mounts: []*api.Mount{sysfs("nosuid", "noexec", "nodev", "rw", "rslave")}, Linux: rules(allowAll)},
			Signs{AllDevicesAllowed: true, SysfsWritable: true}},
		{"unprivileged", &api.Container{Mounts: []*api.Mount{sysfs("nosuid", "noexec", "nodev", "ro")}, Linux: rules(denyAll)},
			Signs{}},
		{"the host's /sys bound in", &api.Container{Mounts: []*api.Mount{{Destination: "/sys", Type: "bind", Source: "/sys",
			Options: []string{"rbind", "rw"}}}, Linux: rules(denyAll)}, Signs{}},
		{"a device request: one device, not all", &api.Container{Mounts: []*api.Mount{sysfs("ro")},
			Linux: rules(denyAll, &api.LinuxDeviceCgroup{Allow: true, Type: "c", Major: api.Int64(1), Minor: api.Int64(3), Access: "rwm"})},
			Signs{}},
		{"every block device only", &api.Container{Mounts: []*api.Mount{sysfs("rw")},
			Linux: rules(&api.LinuxDeviceCgroup{Allow: true, Type: "b", Access: "rwm"})}, Signs{SysfsWritable: true}},
		{"all devices read-only", &api.Container{Mounts: []*api.Mount{sysfs("rw")},
			Linux: rules(&api.LinuxDeviceCgroup{Allow: true, Type: "a", Access: "r"})}, Signs{SysfsWritable: true}},
		{"nothing passed", &api.Container{}, Signs{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Of(tc.ctr)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want.AllDevicesAllowed && tc.want.SysfsWritable, got.Privileged())
		})
	}
}
