package state

const (
	// ContainerDevicesKind is the kind of ContainerDevices records.
	ContainerDevicesKind = "devices"
	// ContainerDevicesVersion is the schema version of ContainerDevices.
	ContainerDevicesVersion = 1
)

// Kinds of an InjectedDevice.
const (
	// DeviceKindCDI is a device named by CDI (vendor.com/class=name).
	DeviceKindCDI = "cdi"
	// DeviceKindNode is a host device node asked for by path.
	DeviceKindNode = "node"
)

// ContainerDevices are the devices device-injector gave one container and
// where they sit, keyed by container id. It is published before the
// container's CreateContainer returns, so that plugins of a higher index
// (topology-aware) read it in the same creation; it is removed with the
// container.
type ContainerDevices struct {
	ContainerID string           `json:"containerID"`
	PodUID      string           `json:"podUID"`
	Namespace   string           `json:"namespace"`
	Pod         string           `json:"pod"`
	Container   string           `json:"container"`
	Devices     []InjectedDevice `json:"devices"`
}

// InjectedDevice is one device node of a container's device: a CDI device
// with several nodes has one entry per node (all with its name), one
// without nodes a single entry without Path.
type InjectedDevice struct {
	// Name is the CDI name, or the host path of a device node.
	Name string `json:"name"`
	// Kind is DeviceKindCDI or DeviceKindNode.
	Kind string `json:"kind"`
	// Path is the node's path in the container; empty for a CDI device
	// without nodes.
	Path string `json:"path,omitempty"`
	// Type is the OCI device type: "c" or "b"; empty without a node.
	Type  string `json:"type,omitempty"`
	Major int64  `json:"major,omitempty"`
	Minor int64  `json:"minor,omitempty"`
	// NUMANode is the node's NUMA node, -1 when unknown.
	NUMANode int `json:"numaNode"`
	// LocalCPUs are the CPUs local to the node (kernel list syntax); empty
	// when the kernel reports none.
	LocalCPUs string `json:"localCPUs,omitempty"`
}

// ContainerDeviceRecords binds the ContainerDevices records under root
// (usually DefaultDir).
func ContainerDeviceRecords(root string) (*Records[ContainerDevices], error) {
	return NewRecords[ContainerDevices](root, ContainerDevicesKind, ContainerDevicesVersion)
}
