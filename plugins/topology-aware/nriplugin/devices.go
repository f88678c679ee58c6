package nriplugin

import (
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// DeviceSource supplies devices of a container that the CreateContainer
// request does not show. NRI passes a plugin the Linux devices the runtime
// and lower-index plugins added, but not the CDI devices lower-index plugins
// asked for (the runtime resolves those after every plugin ran); their
// locality has to come from whoever injected them.
type DeviceSource interface {
	// ContainerDevices returns the located devices of the container being
	// created; none when it has none. An error fails the creation.
	ContainerDevices(id k8s.Identity) ([]policy.Device, error)
}

// devices returns the container's located devices: its char and block
// devices by major:minor under the sysfs root, then those of extra. A device
// sysfs does not know (a virtual one such as /dev/fuse in a recorded tree)
// gives no hint and is left out; one found without a NUMA node is kept with
// node -1, so that the request shows it.
func (b RequestBuilder) devices(ctr *api.Container, id k8s.Identity) ([]policy.Device, error) {
	var out []policy.Device
	for _, d := range ctr.GetLinux().GetDevices() {
		kind, ok := deviceKind(d.GetType())
		if !ok {
			continue
		}
		loc, err := locality.OfDevice(b.SysfsRoot, kind, d.GetMajor(), d.GetMinor())
		if err != nil {
			entry := b.Log.WithFields(id.Fields()).WithField("device", d.GetPath()).WithError(err)
			if errors.Is(err, locality.ErrNotFound) {
				entry.Debug("device unknown to sysfs; it gives no topology hint")
			} else {
				entry.Warn("could not locate device; it gives no topology hint")
			}
			continue
		}
		out = append(out, policy.Device{
			ID:       fmt.Sprintf("%s %d:%d", kind, d.GetMajor(), d.GetMinor()),
			NUMANode: loc.NUMANode,
			CPUs:     loc.CPUs,
		})
	}
	if b.Devices != nil {
		extra, err := b.Devices.ContainerDevices(id)
		if err != nil {
			return nil, fmt.Errorf("locate devices NRI does not show: %w", err)
		}
		out = append(out, extra...)
	}
	return out, nil
}

// deviceKind maps an OCI device type to the sysfs kind: "c" and "u"
// (unbuffered char) are char devices, "b" block; "p" (FIFO) has no locality.
func deviceKind(ociType string) (locality.Kind, bool) {
	switch ociType {
	case "c", "u":
		return locality.Char, true
	case "b":
		return locality.Block, true
	default:
		return "", false
	}
}
