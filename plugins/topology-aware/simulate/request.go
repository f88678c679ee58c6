package simulate

import (
	"io"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// quietLog takes the request builder's notes on devices that give no hint;
// the report says where every container went and why.
var quietLog = logrus.NewEntry(&logrus.Logger{Out: io.Discard, Formatter: &logrus.TextFormatter{}, Level: logrus.PanicLevel})

// requests is the plugin's own request builder for sc, with the devices the
// workload gives it by NUMA node: those NRI would not show the plugin (as
// device-injector's CDI devices), so they come through the builder's
// DeviceSource.
func (s *Simulator) requests(sc *simContainer) nriplugin.RequestBuilder {
	return nriplugin.RequestBuilder{SysfsRoot: s.machine.SysfsRoot, Devices: fixedDevices(sc.extra), Log: quietLog}
}

// fixedDevices is a DeviceSource for one container.
type fixedDevices []policy.Device

func (d fixedDevices) ContainerDevices(k8s.Identity) ([]policy.Device, error) { return d, nil }

// pageSizeNames renames page size in bytes -> bytes to the kubelet's names
// of the sizes, for the report.
func (s *Simulator) pageSizeNames(hugePages map[uint64]int64) map[string]int64 {
	if len(hugePages) == 0 {
		return nil
	}
	out := make(map[string]int64, len(hugePages))
	for name, size := range s.pageSizes {
		if bytes, ok := hugePages[size]; ok {
			out[name] = bytes
		}
	}
	return out
}
