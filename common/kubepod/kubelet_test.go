package kubepod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func list(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = q(kv[i+1])
	}
	return l
}

func ctr(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func podOf(init []v1.Container, app ...v1.Container) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{InitContainers: init, Containers: app}}
	p.Name, p.UID = "p", "1234-5678"
	ApplyDefaults(p)
	return p
}

func sidecar(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestMilliCPUToShares(t *testing.T) {
	// shares = milliCPU * 1024 / 1000, clamped to [2, 262144]; 0 means "no request".
	tests := []struct {
		milli int64
		want  uint64
	}{
		{0, MinShares},
		{1, MinShares},
		{2, MinShares},
		{100, 102},
		{250, 256},
		{1000, 1024},
		{1500, 1536},
		{256000, 262144},
		{300000, MaxShares},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, MilliCPUToShares(tc.milli), "milliCPU %d", tc.milli)
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	// quota = milliCPU * period / 1000 with a 1ms minimum; no limit means no quota.
	tests := []struct {
		milli, period, want int64
	}{
		{0, QuotaPeriod, 0},
		{5, QuotaPeriod, MinQuotaPeriod},
		{10, QuotaPeriod, 1000},
		{250, QuotaPeriod, 25000},
		{1000, QuotaPeriod, 100000},
		{2500, QuotaPeriod, 250000},
		{500, 50000, 25000},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, MilliCPUToQuota(tc.milli, tc.period), "milliCPU %d period %d", tc.milli, tc.period)
	}
}

func TestQOSClass(t *testing.T) {
	full := list("cpu", "1", "memory", "1Gi")
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"no resources", podOf(nil, ctr("a", nil, nil)), v1.PodQOSBestEffort},
		{"zero requests", podOf(nil, ctr("a", list("cpu", "0", "memory", "0"), nil)), v1.PodQOSBestEffort},
		{"only other resources", podOf(nil, ctr("a", list("ephemeral-storage", "1Gi"), nil)), v1.PodQOSBestEffort},
		{"limits only, defaulted requests", podOf(nil, ctr("a", nil, full)), v1.PodQOSGuaranteed},
		{"requests equal limits", podOf(nil, ctr("a", full, full)), v1.PodQOSGuaranteed},
		{"hugepages do not count", podOf(nil, ctr("a", nil, list("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi"))), v1.PodQOSGuaranteed},
		{"guaranteed init and app", podOf([]v1.Container{ctr("i", nil, full)}, ctr("a", nil, full)), v1.PodQOSGuaranteed},
		{"init without limits", podOf([]v1.Container{ctr("i", nil, nil)}, ctr("a", nil, full)), v1.PodQOSBurstable},
		{"requests below limits", podOf(nil, ctr("a", list("cpu", "500m", "memory", "1Gi"), full)), v1.PodQOSBurstable},
		{"no memory limit", podOf(nil, ctr("a", list("cpu", "1"), list("cpu", "1"))), v1.PodQOSBurstable},
		{"requests only", podOf(nil, ctr("a", list("cpu", "100m"), nil)), v1.PodQOSBurstable},
		{"one container without resources", podOf(nil, ctr("a", nil, full), ctr("b", nil, nil)), v1.PodQOSBurstable},
		{"status wins", func() *v1.Pod {
			p := podOf(nil, ctr("a", nil, nil))
			p.Status.QOSClass = v1.PodQOSGuaranteed
			return p
		}(), v1.PodQOSGuaranteed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, QOSClass(tc.pod))
		})
	}
}

func TestOOMScoreAdj(t *testing.T) {
	const capacity = 32 << 30
	full := list("cpu", "1", "memory", "1Gi")
	critical := podOf(nil, ctr("a", list("memory", "1Gi"), nil))
	critical.Spec.PriorityClassName = "system-node-critical"
	tests := []struct {
		name      string
		pod       *v1.Pod
		container string
		want      int
	}{
		{"guaranteed", podOf(nil, ctr("a", nil, full)), "a", GuaranteedOOMScoreAdj},
		{"besteffort", podOf(nil, ctr("a", nil, nil)), "a", BestEffortOOMScoreAdj},
		{"node critical", critical, "a", GuaranteedOOMScoreAdj},
		// 1000 - 1000*1Gi/32Gi = 1000 - 31
		{"burstable 1Gi", podOf(nil, ctr("a", list("memory", "1Gi"), nil)), "a", 969},
		// 1000 - 1000*16Gi/32Gi
		{"burstable half the node", podOf(nil, ctr("a", list("memory", "16Gi"), nil)), "a", 500},
		// 0, raised to 1000 + (-997) so it stays above Guaranteed
		{"burstable whole node", podOf(nil, ctr("a", list("memory", "32Gi"), nil)), "a", 3},
		// 1000 would equal BestEffort: lowered by one
		{"burstable without memory", podOf(nil, ctr("a", list("cpu", "1"), nil)), "a", 999},
		// sidecar 1000 - 0, but capped at the smallest app container: 1000 - 1000*4Gi/32Gi
		{"sidecar capped by app", podOf([]v1.Container{sidecar(ctr("s", list("memory", "32Mi"), nil))},
			ctr("a", list("memory", "4Gi"), nil), ctr("b", list("memory", "8Gi"), nil)), "s", 875},
		// a plain init container is not capped
		{"init not capped", podOf([]v1.Container{ctr("i", list("memory", "32Mi"), nil)},
			ctr("a", list("memory", "4Gi"), nil)), "i", 999},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := findContainer(tc.pod, tc.container)
			require.NotNil(t, c)
			assert.Equal(t, tc.want, OOMScoreAdj(tc.pod, c, capacity))
		})
	}
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, l := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

func TestCalculateLinuxResources(t *testing.T) {
	ptr := func(s string) *resource.Quantity { v := q(s); return &v }
	tests := []struct {
		name              string
		req, lim, mem     *resource.Quantity
		shares, quota     int64
		memoryLimitInByte int64
	}{
		{"nothing", nil, ptr("0"), ptr("0"), MinShares, 0, 0},
		{"request only", ptr("250m"), ptr("0"), ptr("0"), 256, 0, 0},
		{"limit without request uses the limit", nil, ptr("2"), ptr("1Gi"), 2048, 200000, 1 << 30},
		{"request and limit", ptr("500m"), ptr("1500m"), ptr("64Mi"), 512, 150000, 64 << 20},
		{"zero request is the minimum", ptr("0"), ptr("1"), ptr("0"), MinShares, 100000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := CalculateLinuxResources(tc.req, tc.lim, tc.mem)
			assert.Equal(t, tc.shares, r.CPUShares)
			assert.Equal(t, tc.quota, r.CPUQuota)
			assert.Equal(t, int64(QuotaPeriod), r.CPUPeriod)
			assert.Equal(t, tc.memoryLimitInByte, r.MemoryLimitInBytes)
		})
	}
}

func TestHugepageLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits v1.ResourceList
		want   []HugepageLimit
		err    string
	}{
		{"none asked: every size limited to 0", nil, []HugepageLimit{{"1GB", 0}, {"2MB", 0}}, ""},
		{"2Mi pages", list("hugepages-2Mi", "4Mi"), []HugepageLimit{{"1GB", 0}, {"2MB", 4 << 20}}, ""},
		{"1Gi pages", list("hugepages-1Gi", "2Gi", "cpu", "1"), []HugepageLimit{{"1GB", 2 << 30}, {"2MB", 0}}, ""},
		{"size the node lacks is dropped", list("hugepages-64Ki", "1Mi"), []HugepageLimit{{"1GB", 0}, {"2MB", 0}}, ""},
		{"bad size", list("hugepages-3000", "1Mi"), nil, `hugepage resource "hugepages-3000"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HugepageLimits(v1.ResourceRequirements{Limits: tc.limits}, DefaultHugePageSizes)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestHugePageUnitSize(t *testing.T) {
	tests := []struct {
		size int64
		want string
		err  bool
	}{
		{2 << 20, "2MB", false},
		{1 << 30, "1GB", false},
		{64 << 10, "64KB", false},
		{512, "512B", false},
		{0, "", true},
		{3000, "", true},
	}
	for _, tc := range tests {
		got, err := HugePageUnitSize(tc.size)
		if tc.err {
			assert.Error(t, err, "size %d", tc.size)
			continue
		}
		require.NoError(t, err, "size %d", tc.size)
		assert.Equal(t, tc.want, got)
	}
}

func TestCgroupParent(t *testing.T) {
	full := list("cpu", "1", "memory", "1Gi")
	guaranteed := podOf(nil, ctr("a", nil, full))
	burstable := podOf(nil, ctr("a", list("cpu", "1"), nil))
	besteffort := podOf(nil, ctr("a", nil, nil))
	tests := []struct {
		name   string
		pod    *v1.Pod
		driver CgroupDriver
		want   string
	}{
		{"guaranteed cgroupfs", guaranteed, CgroupfsDriver, "/kubepods/pod1234-5678"},
		{"burstable cgroupfs", burstable, CgroupfsDriver, "/kubepods/burstable/pod1234-5678"},
		{"besteffort cgroupfs", besteffort, CgroupfsDriver, "/kubepods/besteffort/pod1234-5678"},
		{"default driver is cgroupfs", besteffort, "", "/kubepods/besteffort/pod1234-5678"},
		{"guaranteed systemd", guaranteed, SystemdDriver, "/kubepods.slice/kubepods-pod1234_5678.slice"},
		{"burstable systemd", burstable, SystemdDriver, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice"},
		{"besteffort systemd", besteffort, SystemdDriver, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_5678.slice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CgroupParent(tc.pod, tc.driver)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := CgroupParent(besteffort, "cgroupv3")
	require.ErrorContains(t, err, `cgroup driver "cgroupv3"`)
}

func TestCgroupsPath(t *testing.T) {
	assert.Equal(t, "/kubepods/burstable/podU/abc", CgroupsPath("/kubepods/burstable/podU", "abc", CgroupfsDriver))
	assert.Equal(t, "/kubepods/abc", CgroupsPath("/kubepods/", "abc", CgroupfsDriver))
	assert.Equal(t, "kubepods-burstable-podU.slice:cri-containerd:abc",
		CgroupsPath("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podU.slice", "abc", SystemdDriver))
}

func TestAggregateContainerResources(t *testing.T) {
	requests := func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }
	tests := []struct {
		name string
		pod  *v1.Pod
		cpu  string
	}{
		{"apps add up", podOf(nil, ctr("a", list("cpu", "100m"), nil), ctr("b", list("cpu", "200m"), nil)), "300m"},
		// the init container runs alone, before the apps: the pod needs the larger
		{"big init container", podOf([]v1.Container{ctr("i", list("cpu", "1"), nil)}, ctr("a", list("cpu", "200m"), nil)), "1"},
		// sidecars run beside the apps and beside later init containers
		{"sidecar adds to apps", podOf([]v1.Container{sidecar(ctr("s", list("cpu", "100m"), nil))}, ctr("a", list("cpu", "200m"), nil)), "300m"},
		{"init after sidecar", podOf([]v1.Container{
			sidecar(ctr("s", list("cpu", "100m"), nil)),
			ctr("i", list("cpu", "1"), nil),
		}, ctr("a", list("cpu", "200m"), nil)), "1100m"},
		{"init before sidecar", podOf([]v1.Container{
			ctr("i", list("cpu", "1"), nil),
			sidecar(ctr("s", list("cpu", "100m"), nil)),
		}, ctr("a", list("cpu", "200m"), nil)), "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AggregateContainerResources(tc.pod, requests)
			want := q(tc.cpu)
			assert.Zero(t, want.Cmp(got[v1.ResourceCPU]), "cpu %s, expected %s", got.Cpu(), tc.cpu)
		})
	}
}
