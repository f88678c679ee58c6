package k8s

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/containerd/nri/pkg/api"
)

// Constants of the kubelet's conversion of requests and limits to cgroup
// settings (pkg/kubelet/cm/helpers_linux.go), which EstimateResources inverts.
const (
	// minShares is what the kubelet sets for a zero CPU request, and what
	// any request below 2m rounds up to.
	minShares = 2
	// maxShares is the kernel's cap on cpu.shares (and the kubelet's): more
	// shares mean nothing more.
	maxShares = 262144
	// sharesPerCPU and milliPerCPU: shares = milli * 1024 / 1000.
	sharesPerCPU = 1024
	milliPerCPU  = 1000
	// defaultQuotaPeriod is the CFS period (µs) the kubelet and the OCI
	// runtime use when none is given.
	defaultQuotaPeriod = 100000
)

// Resources are a container's requests and limits as far as the runtime's
// Linux resources reveal them. Zero means "none" or "unknown", as each field
// says.
type Resources struct {
	// CPURequest in millicores, from cpu shares. 0 when shares are absent or
	// at the minimum of 2, which the kubelet sets for no request but also for
	// requests of 1m and 2m. At most 256 CPUs: see CPURequestCapped.
	CPURequest int64
	// CPURequestCapped is set when the shares are at the cap of 262144 that
	// the kubelet and the kernel put on them: the request is then at least
	// CPURequest (256 CPUs), maybe more. ForQOS completes it for a
	// Guaranteed container, whose request is its limit.
	CPURequestCapped bool
	// CPULimit in millicores, from CFS quota/period. 0 means unlimited (no
	// quota, or the kubelet runs with cpuCFSQuota=false). Limits below 10m
	// read as 10m: the kubelet raises smaller quotas to 1ms per 100ms.
	CPULimit int64
	// MemoryRequest in bytes. The request has no cgroup v1 setting, so it is
	// only known on cgroup v2 when the kubelet's MemoryQoS feature writes it
	// to memory.min (Guaranteed) or memory.low (Burstable); 0 otherwise.
	MemoryRequest int64
	// MemoryLimit in bytes. 0 means unlimited.
	MemoryLimit int64
}

// EstimateResources inverts the kubelet's conversions. The CPU inverses are
// exact for every value the kubelet produces: shares = floor(milli*1024/1000)
// and quota = floor(milli*period/1000) never map two requests to the same
// value (the factors are >= 1), so rounding up recovers the request; integer
// CPUs in particular round-trip exactly. r may be nil.
func EstimateResources(r *api.LinuxResources) Resources {
	var res Resources
	cpu := r.GetCpu()
	if shares := min(cpu.GetShares().GetValue(), maxShares); shares > minShares {
		res.CPURequest = mulDivCeil(shares, milliPerCPU, sharesPerCPU)
		res.CPURequestCapped = shares == maxShares
	}
	if quota := cpu.GetQuota().GetValue(); quota > 0 {
		period := cpu.GetPeriod().GetValue()
		if period == 0 {
			period = defaultQuotaPeriod
		}
		res.CPULimit = mulDivCeil(uint64(quota), milliPerCPU, period)
	}
	if limit := r.GetMemory().GetLimit().GetValue(); limit > 0 {
		res.MemoryLimit = limit
	}
	res.MemoryRequest = unifiedBytes(r.GetUnified(), "memory.min")
	if res.MemoryRequest == 0 {
		res.MemoryRequest = unifiedBytes(r.GetUnified(), "memory.low")
	}
	return res
}

// ForQOS completes the resources with what the container's QoS class
// implies: a Guaranteed container's CPU request equals its limit, so a
// request that the shares cap at 256 CPUs is its limit, from the CFS quota,
// which has no such cap. Without a quota (the kubelet's cpuCFSQuota: false)
// the request stays capped.
func (r Resources) ForQOS(qos QOSClass) Resources {
	if qos == QOSGuaranteed && r.CPURequestCapped && r.CPULimit >= r.CPURequest {
		r.CPURequest, r.CPURequestCapped = r.CPULimit, false
	}
	return r
}

// mulDivCeil returns ceil(a*b/c), saturated at MaxInt64, without overflowing
// on the way. c must not be 0.
func mulDivCeil(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, c)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if rem != 0 {
		q++
	}
	return int64(q)
}

// unifiedBytes reads a positive byte count from a cgroup v2 unified setting;
// anything else ("0", "max", garbage) is unknown.
func unifiedBytes(unified map[string]string, key string) int64 {
	s, ok := unified[key]
	if !ok {
		return 0 // the usual case, without the parse error's allocation
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// IsIntegerCPU reports whether the CPU request is a whole, non-zero number of
// CPUs: with a Guaranteed class, what qualifies for exclusive CPUs.
func (r Resources) IsIntegerCPU() bool {
	return r.CPURequest > 0 && r.CPURequest%milliPerCPU == 0
}

// QOSClass infers the QoS class from one container's resources, for when
// the cgroup path names none. It is an estimate:
//   - the class belongs to the pod and is the weakest of its containers';
//     one container cannot see its siblings, so only Burstable is certain;
//   - the memory request is usually invisible (see MemoryRequest) and is then
//     taken to equal the limit, as the kubelet defaults it when only a limit
//     is set;
//   - requests of 1m and 2m read as none; limits below 10m read as 10m;
//     without CFS quota (cpuCFSQuota=false) a Guaranteed pod reads as
//     Burstable;
//   - a request capped at 256 CPUs (CPURequestCapped) matches any limit at
//     or above it.
//
// Guaranteed: a CPU limit equal to the CPU request and a memory limit (equal
// to the memory request when that is known). BestEffort: nothing set.
// Burstable: anything else.
func (r Resources) QOSClass() QOSClass {
	memoryRequestMatches := r.MemoryRequest == 0 || r.MemoryRequest == r.MemoryLimit
	cpuRequestMatches := r.CPURequest == r.CPULimit || r.CPURequestCapped && r.CPULimit > r.CPURequest
	switch {
	case r.CPULimit > 0 && cpuRequestMatches && r.MemoryLimit > 0 && memoryRequestMatches:
		return QOSGuaranteed
	case r == Resources{}:
		return QOSBestEffort
	default:
		return QOSBurstable
	}
}
