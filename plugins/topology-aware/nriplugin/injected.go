package nriplugin

import (
	"fmt"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// InjectedDevices is the DeviceSource for device-injector (a lower index):
// it reads the state.ContainerDevices record device-injector publishes in
// the shared state before its CreateContainer returns, so the record of the
// container being created is there when this plugin runs.
//
// Only the entries of kind "cdi" are taken, and each gives exactly one hint
// in both of device-injector's modes:
//   - "node" entries (device paths from annotations) are always added as
//     Linux devices, which NRI shows: RequestBuilder locates them itself.
//   - "cdi" entries in runtime mode are handed to the runtime by name and
//     NRI never shows them: this source is their only report.
//   - "cdi" entries in plugin mode are added as Linux devices too, and the
//     record does not say which mode was used. Their nodes are named with
//     deviceID, the name RequestBuilder gives the Linux devices NRI shows,
//     which drops them as already counted.
//
// The record's locality is used as device-injector found it (both plugins
// read the same sysfs).
type InjectedDevices struct {
	records *state.Records[state.ContainerDevices]
}

// NewInjectedDevices reads device-injector's records in the shared state
// directory sharedDir (the runners' --shared-dir).
func NewInjectedDevices(sharedDir string) (*InjectedDevices, error) {
	records, err := state.ContainerDeviceRecords(sharedDir)
	if err != nil {
		return nil, fmt.Errorf("read device-injector's records: %w", err)
	}
	return &InjectedDevices{records: records}, nil
}

// Listed implements listingSource: a source that answers from one listing of
// the records' directory, opening only the records there.
func (s *InjectedDevices) Listed() (DeviceSource, error) {
	keys, err := s.records.Keys()
	if err != nil {
		return nil, fmt.Errorf("list device-injector's records: %w", err)
	}
	listed := make(map[string]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	return listedDevices{src: s, listed: listed}, nil
}

// listedDevices is InjectedDevices for the containers of one listing.
type listedDevices struct {
	src    *InjectedDevices
	listed map[string]bool
}

func (l listedDevices) ContainerDevices(id k8s.Identity) ([]policy.Device, error) {
	if !l.listed[id.ContainerID] {
		return nil, nil
	}
	return l.src.ContainerDevices(id)
}

// ContainerDevices implements DeviceSource. A container without a record got
// no devices from device-injector (or device-injector does not run): none,
// not an error. A record that cannot be read or makes no sense is an error,
// which fails the creation: placing the container as if it had no devices
// would silently break the alignment it was promised.
func (s *InjectedDevices) ContainerDevices(id k8s.Identity) ([]policy.Device, error) {
	rec, found, err := s.records.Read(id.ContainerID)
	if err != nil {
		return nil, fmt.Errorf("read device-injector's devices of container %s: %w", id, err)
	}
	if !found {
		return nil, nil
	}
	where := fmt.Sprintf("device-injector's record %s in %s", id.ContainerID, s.records.Dir())
	if rec.ContainerID != id.ContainerID {
		return nil, fmt.Errorf("%s: containerID %q, expected %q", where, rec.ContainerID, id.ContainerID)
	}
	var out []policy.Device
	for i, d := range rec.Devices {
		dev, ok, err := injectedDevice(d)
		if err != nil {
			return nil, fmt.Errorf("%s: devices[%d] (%s): %w", where, i, d.Name, err)
		}
		if ok {
			out = append(out, dev)
		}
	}
	return out, nil
}

// injectedDevice converts one entry of a record; ok is false for an entry
// that is not this source's to report (see InjectedDevices) or has no
// locality (a FIFO).
func injectedDevice(d state.InjectedDevice) (dev policy.Device, ok bool, err error) {
	switch d.Kind {
	case state.DeviceKindNode:
		return policy.Device{}, false, nil
	case state.DeviceKindCDI:
	default:
		return policy.Device{}, false, fmt.Errorf("kind %q, expected %q or %q", d.Kind, state.DeviceKindCDI, state.DeviceKindNode)
	}
	if d.NUMANode < locality.UnknownNode {
		return policy.Device{}, false, fmt.Errorf("numaNode %d, expected a node id or %d (unknown)", d.NUMANode, locality.UnknownNode)
	}
	cpus, err := cpuset.Parse(d.LocalCPUs)
	if err != nil {
		return policy.Device{}, false, fmt.Errorf("localCPUs: %w", err)
	}
	dev = policy.Device{NUMANode: d.NUMANode, CPUs: cpus}
	switch d.Type {
	case "":
		// A CDI device without nodes (mounts and env only): nothing to
		// match with the Linux devices, so it is named by its CDI name.
		dev.ID = "cdi " + d.Name
	case "p":
		return policy.Device{}, false, nil
	default:
		kind, known := deviceKind(d.Type)
		if !known {
			return policy.Device{}, false, fmt.Errorf("type %q, expected c, u, b or p", d.Type)
		}
		if d.Major < 0 || d.Minor < 0 {
			return policy.Device{}, false, fmt.Errorf("device number %d:%d, expected non-negative numbers", d.Major, d.Minor)
		}
		dev.ID = deviceID(kind, d.Major, d.Minor)
	}
	return dev, true, nil
}
