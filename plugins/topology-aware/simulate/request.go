package simulate

import (
	"errors"
	"fmt"
	"math"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/nriplugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/policy"
)

// requestBuilder describes a container to the policy from its NRI objects,
// step for step as the plugin's CreateContainer, UpdateContainer and
// Synchronize do (nriplugin's buildRequest, which is not exported): the
// Kubernetes view (k8s.FromNRI), the plugin's annotations
// (nriplugin.ParseAnnotations), the hugepage limits, the devices NRI shows
// located under the sysfs root plus those it does not show, and the
// Memory Manager's amount for a Guaranteed container. The parity test
// holds it to the plugin's results.
type requestBuilder struct {
	sysfsRoot string
	// pageSizes maps the runtime's hugepage size names to bytes; the
	// kubelet only ever names the machine's sizes.
	pageSizes map[string]uint64
}

// build returns the request for ctr of pod; res, when not nil, replaces the
// container's resources (an in-place resize). extra are the devices NRI
// does not show (see nriplugin.DeviceSource).
func (b requestBuilder) build(pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources, extra []policy.Device) (policy.Request, error) {
	c := k8s.FromNRI(pod, ctr)
	if res == nil {
		res = ctr.GetLinux().GetResources()
	} else {
		c.Resources = k8s.EstimateResources(res)
		if c.QOSSource == k8s.QOSFromResources {
			c.QOS = c.Resources.QOSClass()
		}
	}
	var errs []error
	prefs, err := nriplugin.ParseAnnotations(c.Annotations)
	if err != nil {
		errs = append(errs, err)
	}
	hugePages, err := b.hugePages(res.GetHugepageLimits())
	if err != nil {
		errs = append(errs, err)
	}
	devices, err := b.devices(ctr)
	if err != nil {
		errs = append(errs, err)
	}
	req := policy.Request{
		ContainerID:   c.ContainerID,
		PodUID:        c.PodUID,
		Namespace:     c.Namespace,
		Pod:           c.Pod,
		Container:     c.Container,
		QOS:           c.QOS,
		CPURequest:    c.Resources.CPURequest,
		CPULimit:      c.Resources.CPULimit,
		HugePages:     hugePages,
		CPU:           prefs.CPU,
		CPULessMemory: prefs.CPULessMemory,
		Devices:       append(devices, extra...),
	}
	if c.QOS == k8s.QOSGuaranteed {
		req.Memory = c.Resources.MemoryLimit
	}
	return req, errors.Join(errs...)
}

// hugePages converts the runtime's limits to page size in bytes -> bytes,
// leaving out the zero limits the kubelet sets for every size not asked for.
func (b requestBuilder) hugePages(limits []*api.HugepageLimit) (map[uint64]int64, error) {
	var out map[uint64]int64
	for _, l := range limits {
		if l.GetLimit() == 0 {
			continue
		}
		size, ok := b.pageSizes[l.GetPageSize()]
		if !ok {
			return nil, fmt.Errorf("hugepage size %q: the machine has no pages of that size", l.GetPageSize())
		}
		if l.GetLimit() > math.MaxInt64 {
			return nil, fmt.Errorf("hugepage limit %d for page size %s: expected at most %d bytes", l.GetLimit(), l.GetPageSize(), int64(math.MaxInt64))
		}
		if out == nil {
			out = map[uint64]int64{}
		}
		out[size] += int64(l.GetLimit())
	}
	return out, nil
}

// devices locates the container's char and block devices under the sysfs
// root. The workload's devices were checked to exist when the container was
// created, so a lookup failure here is an error, not a device to skip.
func (b requestBuilder) devices(ctr *api.Container) ([]policy.Device, error) {
	var out []policy.Device
	for _, d := range ctr.GetLinux().GetDevices() {
		kind := locality.Char
		switch d.GetType() {
		case "c", "u":
		case "b":
			kind = locality.Block
		default:
			continue
		}
		loc, err := locality.OfDevice(b.sysfsRoot, kind, d.GetMajor(), d.GetMinor())
		if err != nil {
			return nil, err
		}
		out = append(out, policy.Device{
			ID:       fmt.Sprintf("%s %d:%d", kind, d.GetMajor(), d.GetMinor()),
			NUMANode: loc.NUMANode,
			CPUs:     loc.CPUs,
		})
	}
	return out, nil
}

// pageSizeNames renames page size in bytes -> bytes to the kubelet's names
// of the sizes, for the report.
func (b requestBuilder) pageSizeNames(hugePages map[uint64]int64) map[string]int64 {
	if len(hugePages) == 0 {
		return nil
	}
	out := make(map[string]int64, len(hugePages))
	for name, size := range b.pageSizes {
		if bytes, ok := hugePages[size]; ok {
			out[name] = bytes
		}
	}
	return out
}
