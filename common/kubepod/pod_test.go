package kubepod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func load(t *testing.T, name string) *Pod {
	t.Helper()
	manifest, err := LoadFile(filepath.Join("testdata", "pods", name))
	require.NoError(t, err)
	p, err := Config{}.Convert(manifest)
	require.NoError(t, err)
	return p
}

func TestConvertContainerResources(t *testing.T) {
	// Expected values follow the kubelet's formulas by hand:
	// shares = milliCPU*1024/1000 (min 2), quota = milliCPU*100000/1000 (none
	// without a limit), Burstable OOM = 1000 - 1000*memoryRequest/32Gi.
	type want struct {
		shares, quota, memory int64
		oom                   int64
		hugepages2M           uint64
	}
	tests := []struct {
		manifest string
		qos      v1.PodQOSClass
		want     map[string]want
	}{
		{"guaranteed.yaml", v1.PodQOSGuaranteed, map[string]want{
			"app":    {shares: 2048, quota: 200000, memory: 256 << 20, oom: -997, hugepages2M: 4 << 20},
			"helper": {shares: 512, quota: 50000, memory: 64 << 20, oom: -997},
		}},
		{"burstable.yaml", v1.PodQOSBurstable, map[string]want{
			"web":    {shares: 256, quota: 100000, memory: 2 << 30, oom: 969},
			"logger": {shares: 102, oom: 999},
		}},
		{"besteffort.yaml", v1.PodQOSBestEffort, map[string]want{
			"idle": {shares: 2, oom: 1000},
		}},
		// Pod-level resources: a container without limits gets the pod's,
		// and without a request of its own its shares follow that limit:
		// it reads as requesting the whole pod.
		{"pod-level.yaml", v1.PodQOSGuaranteed, map[string]want{
			"app":     {shares: 2048, quota: 200000, memory: 256 << 20, oom: -997},
			"sidecar": {shares: 4096, quota: 400000, memory: 1 << 30, oom: -997},
		}},
		// 1000 - 1000*(0 + 2Gi/2)/32Gi = 969
		{"pod-level-burstable.yaml", v1.PodQOSBurstable, map[string]want{
			"web":   {shares: 2048, quota: 200000, memory: 4 << 30, oom: 969},
			"cache": {shares: 2048, quota: 200000, memory: 4 << 30, oom: 969},
		}},
		{"with-sidecar.yaml", v1.PodQOSBurstable, map[string]want{
			"setup": {shares: 2, oom: 999},
			// 1000 - 1000*32Mi/32Gi = 1000, capped by main's 1000 - 1000*128Mi/32Gi = 997
			"proxy": {shares: 102, oom: 997},
			"main":  {shares: 204, memory: 256 << 20, oom: 997},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.manifest, func(t *testing.T) {
			p := load(t, tc.manifest)
			assert.Equal(t, tc.qos, p.QOS)
			require.Len(t, p.Containers, len(tc.want))
			for _, c := range p.Containers {
				w, ok := tc.want[c.Name]
				require.True(t, ok, "unexpected container %s", c.Name)
				assert.Equal(t, w.shares, c.Resources.CPUShares, "%s shares", c.Name)
				assert.Equal(t, w.quota, c.Resources.CPUQuota, "%s quota", c.Name)
				assert.Equal(t, int64(QuotaPeriod), c.Resources.CPUPeriod, "%s period", c.Name)
				assert.Equal(t, w.memory, c.Resources.MemoryLimitInBytes, "%s memory", c.Name)
				assert.Equal(t, w.oom, c.Resources.OOMScoreAdj, "%s oom_score_adj", c.Name)
				assert.Equal(t, []HugepageLimit{{"1GB", 0}, {"2MB", w.hugepages2M}}, c.Resources.HugepageLimits, "%s hugepages", c.Name)

				// The same values in containerd's spec: zero means "not set".
				cpu := c.Spec.Linux.Resources.CPU
				require.NotNil(t, cpu.Shares)
				assert.Equal(t, uint64(w.shares), *cpu.Shares)
				if w.quota == 0 {
					assert.Nil(t, cpu.Quota, "%s quota", c.Name)
				} else {
					require.NotNil(t, cpu.Quota)
					assert.Equal(t, w.quota, *cpu.Quota)
				}
				if w.memory == 0 {
					assert.Nil(t, c.Spec.Linux.Resources.Memory.Limit, "%s memory", c.Name)
				} else {
					require.NotNil(t, c.Spec.Linux.Resources.Memory.Limit)
					assert.Equal(t, w.memory, *c.Spec.Linux.Resources.Memory.Limit)
					assert.Equal(t, w.memory, *c.Spec.Linux.Resources.Memory.Swap)
				}
				require.NotNil(t, c.Spec.Process.OOMScoreAdj)
				assert.Equal(t, int(w.oom), *c.Spec.Process.OOMScoreAdj)
			}
		})
	}
}

func TestConvertSandbox(t *testing.T) {
	tests := []struct {
		manifest       string
		namespace      string
		parentPrefix   string
		shares, quota  int64
		memory         int64
		extraPodLabels map[string]string
	}{
		// requests 2 + 0.5 CPU, limits the same, memory 256Mi + 64Mi
		{"guaranteed.yaml", "default", "/kubepods/pod", 2560, 250000, 320 << 20, nil},
		// requests 250m + 100m, limit 1 CPU on one container only
		{"burstable.yaml", "team-a", "/kubepods/burstable/pod", 358, 100000, 2 << 30, map[string]string{"app": "burstable"}},
		{"besteffort.yaml", "default", "/kubepods/besteffort/pod", 2, 0, 0, nil},
		// main 200m + sidecar 100m beat the init container alone
		{"with-sidecar.yaml", "default", "/kubepods/burstable/pod", 307, 0, 256 << 20, nil},
		// the pod-level values, not the containers' sums (2 CPUs, 256Mi)
		{"pod-level.yaml", "default", "/kubepods/pod", 4096, 400000, 1 << 30, nil},
		{"pod-level-burstable.yaml", "default", "/kubepods/burstable/pod", 1024, 200000, 4 << 30, nil},
	}
	for _, tc := range tests {
		t.Run(tc.manifest, func(t *testing.T) {
			p := load(t, tc.manifest)
			uid := string(p.Manifest.UID)
			assert.Len(t, uid, 32, "a static pod's uid is an md5 in hex")
			assert.Equal(t, tc.parentPrefix+uid, p.CgroupParent)
			assert.Len(t, p.ID, 64)

			sb := NRIPodSandbox(p)
			assert.Equal(t, p.ID, sb.Id)
			assert.Equal(t, tc.namespace, sb.Namespace)
			assert.Equal(t, uid, sb.Uid)
			wantLabels := map[string]string{LabelPodName: p.Manifest.Name, LabelPodNamespace: tc.namespace, LabelPodUID: uid}
			for k, v := range tc.extraPodLabels {
				wantLabels[k] = v
			}
			assert.Equal(t, wantLabels, sb.Labels)
			assert.Equal(t, ContainerTypeSandbox, sb.Annotations[AnnotationContainerType])
			assert.Equal(t, p.ID, sb.Annotations[AnnotationSandboxID])
			assert.Equal(t, p.Manifest.Name, sb.Annotations[AnnotationSandboxName])
			assert.Equal(t, tc.namespace, sb.Annotations[AnnotationSandboxNamespace])
			assert.Equal(t, uid, sb.Annotations[AnnotationSandboxUID])
			assert.Equal(t, p.CgroupParent, sb.Linux.CgroupParent)
			assert.Equal(t, p.CgroupParent+"/"+p.ID, sb.Linux.CgroupsPath)
			assert.Equal(t, uint64(tc.shares), sb.Linux.PodResources.Cpu.Shares.GetValue())
			assert.Equal(t, tc.quota, sb.Linux.PodResources.Cpu.Quota.GetValue())
			assert.Equal(t, tc.memory, sb.Linux.PodResources.Memory.Limit.GetValue())
			for k, v := range p.Manifest.Annotations {
				assert.Equal(t, v, sb.Annotations[k], "pod annotation %s reaches the sandbox", k)
			}
		})
	}
}

func TestConvertContainers(t *testing.T) {
	p := load(t, "with-sidecar.yaml")
	names := []string{}
	kinds := []Kind{}
	for _, c := range p.Containers {
		names = append(names, c.Name)
		kinds = append(kinds, c.Kind)
	}
	assert.Equal(t, []string{"setup", "proxy", "main"}, names, "kubelet start order")
	assert.Equal(t, []Kind{InitContainer, SidecarContainer, AppContainer}, kinds)

	main := p.Container("main")
	require.NotNil(t, main)
	assert.Nil(t, p.Container("nope"))
	status := ContainerStatus{State: api.ContainerState_CONTAINER_RUNNING, Pid: 0, CreatedAt: 1, StartedAt: 2}
	c := NRIContainer(main, main.Spec, status)
	uid := string(p.Manifest.UID)
	assert.Equal(t, main.ID, c.Id)
	assert.Equal(t, p.ID, c.PodSandboxId)
	assert.Equal(t, "main", c.Name)
	assert.Equal(t, api.ContainerState_CONTAINER_RUNNING, c.State)
	assert.Equal(t, map[string]string{
		LabelPodName: "with-sidecar", LabelPodNamespace: "default", LabelPodUID: uid,
		LabelContainerName: "main", LabelContainerdKind: ContainerTypeContainer,
	}, c.Labels)
	assert.Equal(t, ContainerTypeContainer, c.Annotations[AnnotationContainerType])
	assert.Equal(t, p.ID, c.Annotations[AnnotationSandboxID])
	assert.Equal(t, "main", c.Annotations[AnnotationContainerName])
	assert.Equal(t, "busybox", c.Annotations[AnnotationImageName])
	assert.Equal(t, "0", c.Annotations[AnnotationRestartCount])
	assert.Equal(t, "/dev/termination-log", c.Annotations[AnnotationTerminationMessage])
	assert.Equal(t, "30", c.Annotations[AnnotationTerminationGracePeriod])
	assert.NotEmpty(t, c.Annotations[AnnotationContainerHash])
	assert.Equal(t, []string{"sh", "-c", "cat /work/ready && sleep 3600"}, c.Args)
	assert.Equal(t, []string{DefaultPathEnv, "HOSTNAME=" + DefaultNodeName}, c.Env, "host network pods get the node's hostname")
	assert.Equal(t, p.CgroupParent+"/"+main.ID, c.Linux.CgroupsPath)
	assert.Equal(t, int64(997), c.Linux.OomScoreAdj.GetValue())
	assert.Equal(t, api.SecurityProfile_UNCONFINED, c.Linux.SeccompProfile.ProfileType)

	var work *api.Mount
	for _, m := range c.Mounts {
		if m.Destination == "/work" {
			work = m
		}
	}
	require.NotNil(t, work, "the emptyDir volume is mounted")
	assert.Equal(t, "/var/lib/kubelet/pods/"+uid+"/volumes/kubernetes.io~empty-dir/work", work.Source)

	// Ids are derived from names: converting again gives the same ones.
	again := load(t, "with-sidecar.yaml")
	assert.Equal(t, p.ID, again.ID)
	assert.Equal(t, main.ID, again.Container("main").ID)
	assert.NotEqual(t, main.ID, p.Container("proxy").ID)
}

func TestConvertSystemd(t *testing.T) {
	manifest, err := LoadFile(filepath.Join("testdata", "pods", "burstable.yaml"))
	require.NoError(t, err)
	p, err := Config{CgroupDriver: SystemdDriver}.Convert(manifest)
	require.NoError(t, err)
	uid := string(p.Manifest.UID)
	assert.Equal(t, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+uid+".slice", p.CgroupParent)
	web := p.Container("web")
	assert.Equal(t, "kubepods-burstable-pod"+uid+".slice:cri-containerd:"+web.ID, web.Spec.Linux.CgroupsPath)
}

func TestConvertSecurityAndEnv(t *testing.T) {
	manifest := `
apiVersion: v1
kind: Pod
metadata: {name: sec, namespace: ns1, uid: 11111111-2222-3333-4444-555555555555}
spec:
  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: a
    image: busybox
    env:
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
  - name: b
    image: busybox
    securityContext:
      runAsUser: 0
      seccompProfile: {type: Localhost, localhostProfile: profiles/audit.json}
`
	pod, err := Parse([]byte(manifest))
	require.NoError(t, err)
	p, err := Config{NodeName: "node-7"}.Convert(pod)
	require.NoError(t, err)
	assert.Equal(t, "11111111-2222-3333-4444-555555555555", string(p.Manifest.UID), "a given uid is kept")

	a := NRIContainer(p.Container("a"), p.Container("a").Spec, ContainerStatus{})
	assert.Equal(t, []string{DefaultPathEnv, "HOSTNAME=sec", "POD=sec", "NS=ns1",
		"UID=11111111-2222-3333-4444-555555555555", "NODE=node-7"}, a.Env)
	assert.Equal(t, &api.User{Uid: 1000, Gid: 3000, AdditionalGids: []uint32{4000}}, a.User)
	assert.Equal(t, api.SecurityProfile_RUNTIME_DEFAULT, a.Linux.SeccompProfile.ProfileType)
	assert.Equal(t, []string{"busybox"}, a.Args, "no command: the image's entrypoint")

	b := NRIContainer(p.Container("b"), p.Container("b").Spec, ContainerStatus{})
	assert.Equal(t, uint32(0), b.User.Uid, "the container's runAsUser beats the pod's")
	assert.Equal(t, api.SecurityProfile_LOCALHOST, b.Linux.SeccompProfile.ProfileType)
	assert.Equal(t, "/var/lib/kubelet/seccomp/profiles/audit.json", b.Linux.SeccompProfile.LocalhostRef)
}

func TestConvertErrors(t *testing.T) {
	base := func(mutate func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "busybox"}}}}
		p.Name = "bad"
		mutate(p)
		return p
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		err  string
	}{
		{"unsupported env source", base(func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{}}}}
		}), `env "X": valueFrom other than fieldRef`},
		{"unsupported field", base(func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
		}), `fieldRef "status.podIP" is not supported`},
		{"missing volume", base(func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}), `volumeMount "data": no such volume`},
		{"unsupported volume", base(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cm", MountPath: "/cm"}}
		}), `volume "cm": only emptyDir and hostPath`},
		{"bad hugepage size", base(func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = list("hugepages-3000", "1Mi")
		}), `hugepage resource "hugepages-3000"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Config{}.Convert(tc.pod)
			require.ErrorContains(t, err, tc.err)
			require.ErrorContains(t, err, "default/bad", "the error names the pod")
		})
	}
	_, err := Config{CgroupDriver: "nope"}.Convert(base(func(*v1.Pod) {}))
	require.ErrorContains(t, err, `cgroup driver "nope"`)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		err      string
	}{
		{"not yaml", "{", "decoding pod manifest"},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: a, imag: x}]\n", `unknown field "imag"`},
		{"wrong kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n", `kind "Deployment": expected apiVersion "v1" kind "Pod"`},
		{"no name", "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a}]\n", "metadata.name is empty"},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n", "spec.containers is empty"},
		{"unnamed container", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{image: x}]\n", "a container has no name"},
		{"duplicate", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  initContainers: [{name: a}]\n  containers: [{name: a}]\n", `container name "a" is used twice`},
		{"pod-level storage", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  resources: {limits: {ephemeral-storage: 1Gi}}\n  containers: [{name: a}]\n",
			`spec.resources: resource "ephemeral-storage": expected cpu, memory or hugepages-<size> at pod level`},
		{"pod-level request above its limit", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  resources: {requests: {cpu: 2}, limits: {cpu: 1}}\n  containers: [{name: a}]\n",
			"spec.resources: cpu request 2 is above its limit 1"},
		{"container limit above the pod's", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  resources: {limits: {memory: 1Gi}}\n  containers: [{name: a, resources: {limits: {memory: 2Gi}}}]\n",
			`container "a": memory limit 2Gi is above the pod-level limit 1Gi`},
		{"containers' requests above the pod's", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  resources: {requests: {cpu: 1}}\n  containers: [{name: a, resources: {requests: {cpu: 600m}}}, {name: b, resources: {requests: {cpu: 600m}}}]\n",
			"spec.resources: the containers request 1200m of cpu together, above the pod-level request 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.manifest))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "reading pod manifest")

	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("kind: Pod\n"), 0o644))
	_, err = LoadFile(path)
	require.ErrorContains(t, err, path, "the error names the file")
}

func TestApplyDefaults(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{ctr("i", nil, list("memory", "1Gi"))},
		Containers:     []v1.Container{ctr("a", list("cpu", "100m"), list("cpu", "1", "memory", "2Gi"))},
	}}
	ApplyDefaults(p)
	assert.Equal(t, "default", p.Namespace)
	assert.Equal(t, "1Gi", p.Spec.InitContainers[0].Resources.Requests.Memory().String())
	assert.Equal(t, "100m", p.Spec.Containers[0].Resources.Requests.Cpu().String(), "a request is kept")
	assert.Equal(t, "2Gi", p.Spec.Containers[0].Resources.Requests.Memory().String(), "a missing request takes the limit")
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"guaranteed.yaml", "burstable.yaml", "besteffort.yaml", "with-sidecar.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "pods", name))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: a, resources: {limits: {hugepages-2Mi: 1x}}}]\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: a, env: [{name: X, valueFrom: {}}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses converts to a pod or to an error, never a panic.
		p, err := Config{}.Convert(pod)
		if err != nil {
			return
		}
		require.Len(t, p.Containers, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
		for _, c := range p.Containers {
			require.NotNil(t, NRIContainer(c, c.Spec, ContainerStatus{}))
		}
		require.NotNil(t, NRIPodSandbox(p))
	})
}

func TestConvertUserNamespace(t *testing.T) {
	for _, tc := range []struct {
		hostUsers string
		want      bool
	}{{"", false}, {"hostUsers: true", false}, {"hostUsers: false", true}} {
		t.Run(tc.hostUsers, func(t *testing.T) {
			pod, err := Parse([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: u, namespace: ns1}\nspec:\n  " +
				tc.hostUsers + "\n  containers: [{name: a, image: busybox}]\n"))
			require.NoError(t, err)
			p, err := Config{}.Convert(pod)
			require.NoError(t, err)
			hasUser := func(namespaces []*api.LinuxNamespace) bool {
				for _, ns := range namespaces {
					if ns.Type == "user" {
						return true
					}
				}
				return false
			}
			assert.Equal(t, tc.want, hasUser(NRIPodSandbox(p).GetLinux().GetNamespaces()), "sandbox")
			a := NRIContainer(p.Container("a"), p.Container("a").Spec, ContainerStatus{})
			assert.Equal(t, tc.want, hasUser(a.GetLinux().GetNamespaces()), "container")
		})
	}
}
