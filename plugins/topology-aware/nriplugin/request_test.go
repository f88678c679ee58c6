package nriplugin

import (
	"errors"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

func TestBuildRequest(t *testing.T) {
	p := newTestPlugin(t, "snc-2s-4n-80c", nil)
	tests := []struct {
		file, container string
		want            policy.Request
	}{
		{"guaranteed-2cpu.yaml", "app", policy.Request{
			Namespace: "default", Pod: "exclusive", Container: "app", QOS: k8s.QOSGuaranteed,
			CPURequest: 2000, CPULimit: 2000, Memory: 256 << 20, HugePages: map[uint64]int64{2 << 20: 4 << 20},
			PodCPURequest: 2000, PodMemory: 256 << 20, // the sandbox's sums: hugepages are not among them
		}},
		{"burstable.yaml", "web", policy.Request{
			Namespace: "default", Pod: "burstable", Container: "web", QOS: k8s.QOSBurstable,
			CPURequest: 250, CPULimit: 1000, PodCPURequest: 250, // no pod memory: not Guaranteed
		}},
		{"besteffort.yaml", "idle", policy.Request{
			Namespace: "default", Pod: "besteffort", Container: "idle", QOS: k8s.QOSBestEffort,
		}},
		{"annotated-shared.yaml", "app", policy.Request{
			Namespace: "default", Pod: "annotated-shared", Container: "app", QOS: k8s.QOSGuaranteed,
			CPURequest: 2000, CPULimit: 2000, Memory: 128 << 20, CPU: policy.CPUShared,
			CPUAnnotation: `cpu.nri-suite.io/container.app="shared"`, PodCPURequest: 2000, PodMemory: 128 << 20,
		}},
		{"require-isolated.yaml", "rt", policy.Request{
			Namespace: "default", Pod: "isolated", Container: "rt", QOS: k8s.QOSGuaranteed,
			CPURequest: 2000, CPULimit: 2000, Memory: 128 << 20, CPU: policy.CPUIsolatedRequire,
			CPUAnnotation: `cpu.nri-suite.io="require-isolated"`, PodCPURequest: 2000, PodMemory: 128 << 20,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			pod, ctr := nriPod(t, tc.file, tc.container)
			got, id, err := p.requests.Build(pod, ctr, nil)
			require.NoError(t, err)
			tc.want.ContainerID, tc.want.PodUID = ctr.GetId(), pod.GetUid()
			assert.NotEmpty(t, got.ContainerID)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want.Namespace+"/"+tc.want.Pod+"/"+tc.want.Container, id.String())
		})
	}
}

func TestBuildRequestForResize(t *testing.T) {
	p := newTestPlugin(t, "snc-2s-4n-80c", nil)
	pod, ctr := nriPod(t, "burstable.yaml", "web")
	shares, quota, period := uint64(1024), int64(200000), uint64(100000)
	res := &api.LinuxResources{Cpu: &api.LinuxCPU{
		Shares: api.UInt64(&shares), Quota: api.Int64(&quota), Period: api.UInt64(&period),
	}}
	got, _, err := p.requests.Build(pod, ctr, res)
	require.NoError(t, err)
	assert.Equal(t, int64(1000), got.CPURequest, "the new request, not the created one")
	assert.Equal(t, int64(2000), got.CPULimit)
	assert.Equal(t, k8s.QOSBurstable, got.QOS, "the class comes from the pod's cgroup parent")
}

// The kubelet caps cpu.shares at 256 CPUs: a Guaranteed request above them
// is read from the quota (its limit), the container's and its pod's, and one
// without a quota is refused rather than granted 256 CPUs.
func TestBuildRequestAbove256CPUs(t *testing.T) {
	p := newTestPlugin(t, "smt-8s-8n-512c", nil)
	pod, ctr := nriPod(t, "guaranteed-300cpu.yaml", "app")
	require.Equal(t, uint64(262144), ctr.GetLinux().GetResources().GetCpu().GetShares().GetValue(), "the kubelet's cap")
	got, _, err := p.requests.Build(pod, ctr, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(300000), got.CPURequest)
	assert.Equal(t, int64(300000), got.PodCPURequest, "the sandbox's sum, capped the same way")

	res := ctr.GetLinux().GetResources()
	got, _, err = p.requests.Build(pod, ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{
		Shares: res.GetCpu().GetShares(), Quota: api.Int64(40_000_000), Period: res.GetCpu().GetPeriod(),
	}, Memory: res.GetMemory()})
	require.NoError(t, err)
	assert.Equal(t, int64(400000), got.CPURequest, "a resize above the cap")

	res.Cpu.Quota = nil // the kubelet's cpuCFSQuota: false
	_, _, err = p.requests.Build(pod, ctr, nil)
	require.Error(t, err)
	assert.Equal(t, "invalid-resources", rejectionReason(err))
	for _, want := range []string{"cpu shares 262144", "256 CPUs or more", "expected a CPU quota"} {
		assert.Contains(t, err.Error(), want)
	}
}

// fakeDevices stands for device-injector's shared records.
type fakeDevices struct {
	devices []policy.Device
	err     error
	asked   []k8s.Identity
}

func (f *fakeDevices) ContainerDevices(id k8s.Identity) ([]policy.Device, error) {
	f.asked = append(f.asked, id)
	return f.devices, f.err
}

func TestBuildRequestLocatesDevices(t *testing.T) {
	cdi := policy.Device{ID: "cdi vendor.com/gpu=0", NUMANode: 3}
	source := &fakeDevices{devices: []policy.Device{cdi}}
	p := newTestPlugin(t, "snc-2s-4n-80c", source)
	pod, ctr := nriPod(t, "guaranteed-2cpu.yaml", "app")
	ctr.Linux.Devices = []*api.LinuxDevice{
		{Path: "/dev/gpu0", Type: "c", Major: 195, Minor: 0},    // GPU on node 1
		{Path: "/dev/nvme0n1", Type: "b", Major: 259, Minor: 0}, // NVMe on node 2
		{Path: "/dev/null", Type: "c", Major: 1, Minor: 3},      // not in the recorded tree
		{Path: "/dev/fifo", Type: "p"},                          // no locality
	}
	got, _, err := p.requests.Build(pod, ctr, nil)
	require.NoError(t, err)
	node := func(n int) cpuset.CPUSet {
		cpus, err := cpuset.Parse(map[int]string{1: "10-19,50-59", 2: "20-29,60-69"}[n])
		require.NoError(t, err)
		return cpus
	}
	assert.Equal(t, []policy.Device{
		{ID: "char 195:0", NUMANode: 1, CPUs: node(1)},
		{ID: "block 259:0", NUMANode: 2, CPUs: node(2)},
		cdi,
	}, got.Devices)
	require.Len(t, source.asked, 1)
	assert.Equal(t, "default/exclusive/app", source.asked[0].String())

	source.err = errors.New("records unreadable")
	_, _, err = p.requests.Build(pod, ctr, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "records unreadable")
	assert.Equal(t, "device-lookup", rejectionReason(err))
}

func TestBuildRequestKeepsWhatItCanOnBadInput(t *testing.T) {
	p := newTestPlugin(t, "smt-2s-12c-interleaved", nil)
	pod, ctr := nriPod(t, "bad-annotation.yaml", "app")
	got, _, err := p.requests.Build(pod, ctr, nil)
	var annErr *k8s.AnnotationError
	require.True(t, errors.As(err, &annErr), "%v", err)
	assert.Equal(t, "cpu.nri-suite.io/container.app", annErr.Key)
	assert.Equal(t, invalidAnnotationReason, rejectionReason(err))
	assert.Equal(t, ctr.GetId(), got.ContainerID, "the rest of the request is built")
	assert.Equal(t, policy.CPUAuto, got.CPU)
}

func TestParsePageSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  bool
	}{
		{"64KB", 64 << 10, false},
		{"2MB", 2 << 20, false},
		{"1GB", 1 << 30, false},
		{"16GB", 16 << 30, false},
		{"1TB", 1 << 40, false},
		{"2Mi", 0, true},
		{"MB", 0, true},
		{"0MB", 0, true},
		{"-2MB", 0, true},
		{"99999999999999999GB", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parsePageSize(tc.in)
			if tc.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "2MB")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestHugePageLimits(t *testing.T) {
	got, err := hugePageLimits([]*api.HugepageLimit{
		{PageSize: "2MB", Limit: 8 << 20},
		{PageSize: "1GB", Limit: 0}, // the kubelet's zero limit for a size not asked for
	})
	require.NoError(t, err)
	assert.Equal(t, map[uint64]int64{2 << 20: 8 << 20}, got)

	_, err = hugePageLimits([]*api.HugepageLimit{{PageSize: "huge", Limit: 1}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"huge"`)
}
