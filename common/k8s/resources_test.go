package k8s

import (
	"math"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeletShares and kubeletQuota are the kubelet's conversions
// (pkg/kubelet/cm/helpers_linux.go, v1.37), which EstimateResources inverts.
func kubeletShares(milli int64) uint64 {
	if milli == 0 {
		return minShares
	}
	return uint64(min(max(milli*sharesPerCPU/milliPerCPU, minShares), maxShares))
}

func kubeletQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*period/milliPerCPU, 1000)
}

func cpuResources(shares uint64, quota int64, period uint64) *api.LinuxResources {
	return &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(quota), Period: api.UInt64(period)}}
}

func TestEstimateResources(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name string
		in   *api.LinuxResources
		want Resources
	}{
		{"nil", nil, Resources{}},
		{"empty", &api.LinuxResources{}, Resources{}},
		{
			name: "burstable 250m/500m 128Mi",
			in: &api.LinuxResources{
				Cpu:    &api.LinuxCPU{Shares: api.UInt64(256), Quota: api.Int64(50000), Period: api.UInt64(100000)},
				Memory: &api.LinuxMemory{Limit: api.Int64(128 * mi)},
			},
			want: Resources{CPURequest: 250, CPULimit: 500, MemoryLimit: 128 * mi},
		},
		{"besteffort minimum shares", cpuResources(minShares, 0, 0), Resources{}},
		{"shares 0 (unset in OCI)", cpuResources(0, 0, 0), Resources{}},
		{"smallest visible request", cpuResources(3, 0, 0), Resources{CPURequest: 3}},
		{"request 100m (shares 102) rounds back up", cpuResources(102, 0, 0), Resources{CPURequest: 100}},
		{"integer CPUs", cpuResources(4096, 400000, 100000), Resources{CPURequest: 4000, CPULimit: 4000}},
		{"shares above the kernel cap", cpuResources(1_000_000, 0, 0), Resources{CPURequest: 256000, CPURequestCapped: true}},
		{"shares at the cap: 256 CPUs or more", cpuResources(maxShares, 30_000_000, 100000), Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 300000}},
		{"shares just below the cap are exact", cpuResources(maxShares-1, 0, 0), Resources{CPURequest: 256000}},
		{"quota -1 is unlimited", cpuResources(1024, -1, 100000), Resources{CPURequest: 1000}},
		{"custom period", cpuResources(0, 75000, 50000), Resources{CPULimit: 1500}},
		{"zero period defaults to 100ms", cpuResources(0, 150000, 0), Resources{CPULimit: 1500}},
		{"absent period defaults to 100ms", &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(150000)}}, Resources{CPULimit: 1500}},
		{"clamped 1ms quota reads 10m", cpuResources(5, 1000, 100000), Resources{CPURequest: 5, CPULimit: 10}},
		{"huge quota saturates", cpuResources(0, math.MaxInt64, 1), Resources{CPULimit: math.MaxInt64}},
		{"memory limit -1 is unlimited", &api.LinuxResources{Memory: &api.LinuxMemory{Limit: api.Int64(-1)}}, Resources{}},
		{
			name: "MemoryQoS memory.min is the request",
			in:   &api.LinuxResources{Memory: &api.LinuxMemory{Limit: api.Int64(64 * mi)}, Unified: map[string]string{"memory.min": "67108864", "memory.low": "0"}},
			want: Resources{MemoryRequest: 64 * mi, MemoryLimit: 64 * mi},
		},
		{
			name: "MemoryQoS memory.low is the request",
			in:   &api.LinuxResources{Unified: map[string]string{"memory.min": "0", "memory.low": "33554432"}},
			want: Resources{MemoryRequest: 32 * mi},
		},
		{"unparsable unified value is unknown", &api.LinuxResources{Unified: map[string]string{"memory.min": "max", "memory.low": "-5"}}, Resources{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EstimateResources(tt.in))
		})
	}
}

// Every request and limit the kubelet can express comes back exactly, except
// where its conversion loses information (documented on Resources).
func TestEstimateResourcesInvertsKubelet(t *testing.T) {
	for milli := int64(0); milli <= 256000; milli++ {
		want := milli
		if milli <= 2 { // below 3m the kubelet writes the minimum of 2 shares
			want = 0
		}
		got := EstimateResources(cpuResources(kubeletShares(milli), 0, 0)).CPURequest
		require.Equal(t, want, got, "request %dm", milli)
	}
	for _, period := range []int64{1000, 50000, 100000, 250000, 1000000} {
		for milli := int64(1); milli <= 64000; milli++ {
			quota := kubeletQuota(milli, period)
			if quota == 1000 { // the 1ms floor: smaller limits are lost
				continue
			}
			got := EstimateResources(cpuResources(0, quota, uint64(period))).CPULimit
			require.Equal(t, milli, got, "limit %dm, period %d", milli, period)
		}
	}
}

// A Guaranteed container's request is its limit: above 256 CPUs, where the
// shares stop, the quota tells it.
func TestResourcesForQOS(t *testing.T) {
	capped := EstimateResources(cpuResources(kubeletShares(300000), kubeletQuota(300000, 100000), 100000))
	require.Equal(t, Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 300000}, capped)
	tests := []struct {
		name string
		in   Resources
		qos  QOSClass
		want Resources
	}{
		{"guaranteed above 256 CPUs: the limit", capped, QOSGuaranteed, Resources{CPURequest: 300000, CPULimit: 300000}},
		{"burstable above 256 CPUs: at least 256", capped, QOSBurstable, capped},
		{"guaranteed without a quota stays capped", Resources{CPURequest: 256000, CPURequestCapped: true}, QOSGuaranteed,
			Resources{CPURequest: 256000, CPURequestCapped: true}},
		{"guaranteed of exactly 256 CPUs", Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 256000}, QOSGuaranteed,
			Resources{CPURequest: 256000, CPULimit: 256000}},
		{"guaranteed below the cap is untouched", Resources{CPURequest: 4000, CPULimit: 4000}, QOSGuaranteed, Resources{CPURequest: 4000, CPULimit: 4000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.in.ForQOS(tt.qos))
		})
	}
}

func TestIsIntegerCPU(t *testing.T) {
	tests := []struct {
		request int64
		want    bool
	}{
		{0, false},
		{500, false},
		{1000, true},
		{1500, false},
		{4000, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Resources{CPURequest: tt.request}.IsIntegerCPU(), "request %dm", tt.request)
	}
}

func TestResourcesQOSClass(t *testing.T) {
	const gi = 1 << 30
	tests := []struct {
		name string
		in   Resources
		want QOSClass
	}{
		{"nothing set", Resources{}, QOSBestEffort},
		{"requests equal limits", Resources{CPURequest: 2000, CPULimit: 2000, MemoryLimit: gi}, QOSGuaranteed},
		{"fractional guaranteed", Resources{CPURequest: 250, CPULimit: 250, MemoryLimit: gi}, QOSGuaranteed},
		{"known memory request equal to limit", Resources{CPURequest: 1000, CPULimit: 1000, MemoryRequest: gi, MemoryLimit: gi}, QOSGuaranteed},
		{"known memory request below limit", Resources{CPURequest: 1000, CPULimit: 1000, MemoryRequest: gi / 2, MemoryLimit: gi}, QOSBurstable},
		{"cpu request below limit", Resources{CPURequest: 500, CPULimit: 1000, MemoryLimit: gi}, QOSBurstable},
		{"no memory limit", Resources{CPURequest: 1000, CPULimit: 1000}, QOSBurstable},
		{"no cpu limit", Resources{CPURequest: 1000, MemoryLimit: gi}, QOSBurstable},
		{"request only", Resources{CPURequest: 100}, QOSBurstable},
		{"memory limit only", Resources{MemoryLimit: gi}, QOSBurstable},
		{"request capped at 256 CPUs, limit above", Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 300000, MemoryLimit: gi}, QOSGuaranteed},
		{"request capped at 256 CPUs, limit below", Resources{CPURequest: 256000, CPURequestCapped: true, CPULimit: 200000, MemoryLimit: gi}, QOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.in.QOSClass())
		})
	}
}

func FuzzEstimateResources(f *testing.F) {
	f.Add(uint64(1024), int64(100000), uint64(100000), int64(1<<30), "0")
	f.Add(uint64(2), int64(-1), uint64(0), int64(-1), "max")
	f.Add(uint64(math.MaxUint64), int64(math.MaxInt64), uint64(1), int64(math.MaxInt64), "9223372036854775807")
	f.Add(uint64(maxShares), int64(30_000_000), uint64(100000), int64(1<<40), "0") // 300 CPUs
	f.Fuzz(func(t *testing.T, shares uint64, quota int64, period uint64, memLimit int64, memMin string) {
		r := EstimateResources(&api.LinuxResources{
			Cpu:     &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(quota), Period: api.UInt64(period)},
			Memory:  &api.LinuxMemory{Limit: api.Int64(memLimit)},
			Unified: map[string]string{"memory.min": memMin},
		})
		assert.GreaterOrEqual(t, r.CPURequest, int64(0))
		assert.LessOrEqual(t, r.CPURequest, int64(maxShares*milliPerCPU/sharesPerCPU))
		assert.Equal(t, shares > minShares, r.CPURequest > 0)
		assert.Equal(t, quota > 0, r.CPULimit > 0)
		assert.Equal(t, shares >= maxShares, r.CPURequestCapped)
		if g := r.ForQOS(QOSGuaranteed); r.CPURequestCapped && r.CPULimit >= r.CPURequest {
			assert.Equal(t, g.CPULimit, g.CPURequest, "a Guaranteed request above the cap is its limit")
		} else {
			assert.Equal(t, r, g)
		}
		assert.GreaterOrEqual(t, r.MemoryRequest, int64(0))
		assert.Equal(t, max(memLimit, 0), r.MemoryLimit)
		assert.Contains(t, []QOSClass{QOSGuaranteed, QOSBurstable, QOSBestEffort}, r.QOSClass())
	})
}
