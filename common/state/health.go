package state

import "time"

const (
	// DeviceHealthKind is the kind of the DeviceHealthSet record.
	DeviceHealthKind = "device-health"
	// DeviceHealthVersion is the schema version of DeviceHealthSet.
	DeviceHealthVersion = 1
	// DeviceHealthKey is the key of the node's one DeviceHealthSet record.
	DeviceHealthKey = "node"
	// ContainerHealthKind is the kind of ContainerHealth records.
	ContainerHealthKind = "container-health"
	// ContainerHealthVersion is the schema version of ContainerHealth.
	ContainerHealthVersion = 1
)

// Health is a device's health, with KEP-4680's values.
type Health string

const (
	HealthHealthy   Health = "Healthy"
	HealthUnhealthy Health = "Unhealthy"
	// HealthUnknown is a device not checked yet.
	HealthUnknown Health = "Unknown"
)

// DeviceHealth is one device's health, why, and since when.
type DeviceHealth struct {
	Health  Health    `json:"health"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
}

// DeviceHealthSet is the health of every device device-injector watches,
// by resource id (CDI name, or host path of a device node in use).
type DeviceHealthSet struct {
	Devices map[string]DeviceHealth `json:"devices"`
}

// ResourceHealth is KEP-4680's ResourceHealth: one resource of a container.
type ResourceHealth struct {
	// ResourceID is the CDI name or the host path of a device node.
	ResourceID string `json:"resourceID"`
	Health     Health `json:"health"`
	Message    string `json:"message,omitempty"`
}

// ContainerHealth is the health of the devices one container got, keyed by
// container id, as KEP-4680's allocatedResourcesStatus; republished when a
// device's health changes, removed with the container.
type ContainerHealth struct {
	ContainerID string           `json:"containerID"`
	PodUID      string           `json:"podUID"`
	Namespace   string           `json:"namespace"`
	Pod         string           `json:"pod"`
	Container   string           `json:"container"`
	Resources   []ResourceHealth `json:"resources"`
}

// DeviceHealthRecords binds the DeviceHealthSet record under root (usually
// DefaultDir).
func DeviceHealthRecords(root string) (*Records[DeviceHealthSet], error) {
	return NewRecords[DeviceHealthSet](root, DeviceHealthKind, DeviceHealthVersion)
}

// ContainerHealthRecords binds the ContainerHealth records under root.
func ContainerHealthRecords(root string) (*Records[ContainerHealth], error) {
	return NewRecords[ContainerHealth](root, ContainerHealthKind, ContainerHealthVersion)
}
