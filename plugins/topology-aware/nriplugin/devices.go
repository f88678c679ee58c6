package nriplugin

import (
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
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

// listingSource is a DeviceSource that can look up the containers it has
// devices for all at once: a Synchronize of 10,000 containers, of which a
// few have devices, then opens a few records instead of trying 10,000.
type listingSource interface {
	DeviceSource
	// Listed returns a source that answers from one listing, for the
	// containers that exist now.
	Listed() (DeviceSource, error)
}

// forMany returns the builder to use for many containers that exist now.
func (b RequestBuilder) forMany() RequestBuilder {
	if l, ok := b.Devices.(listingSource); ok {
		if src, err := l.Listed(); err == nil {
			b.Devices = src
		} else {
			b.Log.WithError(err).Warn("could not list the devices of the containers; looking each up")
		}
	}
	return b
}

// devices returns the container's located devices: its char and block
// devices by major:minor under the sysfs root, then those of the source. A
// device sysfs does not know (a virtual one such as /dev/fuse in a recorded
// tree) gives no hint and is left out; one found without a NUMA node is kept
// with node -1, so that the request shows it.
//
// Each device number counts once: a node NRI shows under two paths, or one
// the source reports too (a CDI device whose nodes device-injector added in
// plugin mode, or that the runtime resolved before NRI), is the same
// physical device and gives one hint. The source names its nodes with
// deviceID so that they match. On a source error the devices NRI shows are
// still returned: Synchronize accounts a running container with what is
// known.
func (b RequestBuilder) devices(ctr *api.Container, id k8s.Identity) ([]policy.Device, error) {
	var out []policy.Device
	seen := map[string]bool{}
	for _, d := range ctr.GetLinux().GetDevices() {
		kind, ok := deviceKind(d.GetType())
		if !ok {
			continue
		}
		devID := deviceID(kind, d.GetMajor(), d.GetMinor())
		if seen[devID] {
			continue
		}
		// Marked seen even when it cannot be located: the source's entry for
		// the same node would only repeat the lookup that failed.
		seen[devID] = true
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
		out = append(out, policy.Device{ID: devID, NUMANode: loc.NUMANode, CPUs: loc.CPUs})
	}
	if b.Devices == nil {
		return out, nil
	}
	extra, err := b.Devices.ContainerDevices(id)
	if err != nil {
		return out, fmt.Errorf("locate devices NRI does not show: %w", err)
	}
	for _, d := range extra {
		if !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d)
		}
	}
	return out, nil
}

// deviceID names a device node in requests, whoever reports it.
func deviceID(kind locality.Kind, major, minor int64) string {
	return fmt.Sprintf("%s %d:%d", kind, major, minor)
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
