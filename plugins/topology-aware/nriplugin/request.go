package nriplugin

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// invalidAnnotationReason labels rejections caused by the pod's annotations
// rather than by the policy.
const invalidAnnotationReason = "invalid-annotation"

// requestError is a request that could not be built, with the reason it is
// counted under.
type requestError struct {
	reason string
	err    error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// RequestBuilder describes containers to the policy the way the plugin does:
// the Kubernetes view of the container, the plugin's annotations, its
// hugepage limits and its located devices.
type RequestBuilder struct {
	// SysfsRoot is where the container's devices are located.
	SysfsRoot string
	// Devices supplies the devices NRI does not show; may be nil.
	Devices DeviceSource
	// Log receives why a device gives no topology hint.
	Log *logrus.Entry
}

// Build describes the container to the policy. res, when not nil, replaces
// the container's resources (UpdateContainer passes the new ones). On an
// error it still returns the best request it could build, with the defaults
// where the input was bad: Synchronize must account for a running container
// even when, say, its annotation has become invalid.
func (b RequestBuilder) Build(pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) (policy.Request, k8s.Identity, error) {
	c := k8s.FromNRI(pod, ctr)
	if res == nil {
		res = ctr.GetLinux().GetResources()
	} else {
		c.Resources = k8s.EstimateResources(res)
		if c.QOSSource == k8s.QOSFromResources {
			c.QOS = c.Resources.QOSClass()
		}
		c.Resources = c.Resources.ForQOS(c.QOS)
	}
	var errs []error
	if c.QOS == k8s.QOSGuaranteed && c.Resources.CPURequestCapped {
		// Granting the 256 CPUs the shares tell would silently give less.
		errs = append(errs, &requestError{reason: "invalid-resources", err: fmt.Errorf(
			"cpu shares %d: a Guaranteed CPU request of %d CPUs or more, where cpu shares stop, and no CFS quota at or above it to read the request from: "+
				"expected a CPU quota equal to the limit (the kubelet's cpuCFSQuota: true)",
			res.GetCpu().GetShares().GetValue(), c.Resources.CPURequest/1000)})
	}
	prefs, err := ParseAnnotations(c.Annotations)
	if err != nil {
		errs = append(errs, &requestError{reason: invalidAnnotationReason, err: err})
	}
	hugePages, err := hugePageLimits(res.GetHugepageLimits())
	if err != nil {
		errs = append(errs, &requestError{reason: "invalid-resources", err: err})
	}
	devices, err := b.devices(ctr, c.Identity)
	if err != nil {
		errs = append(errs, &requestError{reason: "device-lookup", err: err})
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
		CPUAnnotation: prefs.CPUAnnotation,
		CPULessMemory: prefs.CPULessMemory,
		Devices:       devices,
	}
	// The whole pod's sums, which the kubelet gives the sandbox: the pod
	// scope admits and reserves the pod as a unit from them.
	podRes := k8s.EstimateResources(pod.GetLinux().GetPodResources()).ForQOS(c.QOS)
	req.PodCPURequest = podRes.CPURequest
	// The Memory Manager accounts only for Guaranteed containers, whose
	// request equals their limit.
	if c.QOS == k8s.QOSGuaranteed {
		req.Memory = c.Resources.MemoryLimit
		req.PodMemory = podRes.MemoryLimit
	}
	return req, c.Identity, errors.Join(errs...)
}

// hugePageLimits converts the runtime's hugepage limits ("2MB" -> bytes) to
// page size in bytes -> bytes, leaving out the zero limits the kubelet sets
// for every page size a container does not ask for.
func hugePageLimits(limits []*api.HugepageLimit) (map[uint64]int64, error) {
	var out map[uint64]int64
	for _, l := range limits {
		if l.GetLimit() == 0 {
			continue
		}
		size, err := parsePageSize(l.GetPageSize())
		if err != nil {
			return nil, err
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

// pageSizeUnits are the binary units the kubelet's HugePageUnitSize writes.
var pageSizeUnits = []struct {
	suffix string
	shift  uint
}{{"KB", 10}, {"MB", 20}, {"GB", 30}, {"TB", 40}}

// parsePageSize reads a cgroup hugetlb page size such as "2MB" or "1GB".
func parsePageSize(s string) (uint64, error) {
	for _, u := range pageSizeUnits {
		digits, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		if err == nil && n > 0 && n <= math.MaxUint64>>u.shift {
			return n << u.shift, nil
		}
		break
	}
	return 0, fmt.Errorf("hugepage size %q: expected a positive size with a unit of KB, MB, GB or TB, such as 2MB", s)
}
