package k8s

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testUID = "5c2a1b3e-7d4f-4e0a-9b1c-2d3e4f5a6b7c"

// systemdUID is testUID as the kubelet escapes it in systemd slice names.
var systemdUID = strings.ReplaceAll(testUID, "-", "_")

func TestParsePodCgroup(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		want   PodCgroup
		wantOK bool
	}{
		// Pod cgroup parents as the kubelet passes them (cgroupfs driver).
		{"cgroupfs guaranteed", "/kubepods/pod" + testUID, PodCgroup{QOSGuaranteed, testUID}, true},
		{"cgroupfs burstable", "/kubepods/burstable/pod" + testUID, PodCgroup{QOSBurstable, testUID}, true},
		{"cgroupfs besteffort", "/kubepods/besteffort/pod" + testUID, PodCgroup{QOSBestEffort, testUID}, true},
		{"cgroupfs custom cgroup root", "/custom/root/kubepods/burstable/pod" + testUID, PodCgroup{QOSBurstable, testUID}, true},
		{"cgroupfs static pod uid (hash, no dashes)", "/kubepods/podd41d8cd98f00b204e9800998ecf8427e", PodCgroup{QOSGuaranteed, "d41d8cd98f00b204e9800998ecf8427e"}, true},
		{"cgroupfs qos level only", "/kubepods/besteffort", PodCgroup{QOSBestEffort, ""}, true},
		// Container cgroups paths (cgroupfs): containerd appends the id, CRI-O crio-<id>.
		{"containerd cgroupfs container", "/kubepods/burstable/pod" + testUID + "/0123abcd", PodCgroup{QOSBurstable, testUID}, true},
		{"containerd cgroupfs guaranteed container", "/kubepods/pod" + testUID + "/0123abcd", PodCgroup{QOSGuaranteed, testUID}, true},
		{"CRI-O cgroupfs container", "/kubepods/besteffort/pod" + testUID + "/crio-0123abcd", PodCgroup{QOSBestEffort, testUID}, true},
		// Pod cgroup parents (systemd driver), full and as CRI-O shortens them.
		{"systemd guaranteed", "/kubepods.slice/kubepods-pod" + systemdUID + ".slice", PodCgroup{QOSGuaranteed, testUID}, true},
		{"systemd burstable", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID + ".slice", PodCgroup{QOSBurstable, testUID}, true},
		{"systemd besteffort", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + systemdUID + ".slice", PodCgroup{QOSBestEffort, testUID}, true},
		{"systemd leaf slice only", "kubepods-burstable-pod" + systemdUID + ".slice", PodCgroup{QOSBurstable, testUID}, true},
		{"systemd qos level only", "/kubepods.slice/kubepods-burstable.slice", PodCgroup{QOSBurstable, ""}, true},
		// Container cgroups paths (systemd): slice:prefix:id.
		{"containerd systemd container", "kubepods-besteffort-pod" + systemdUID + ".slice:cri-containerd:0123abcd", PodCgroup{QOSBestEffort, testUID}, true},
		{"CRI-O systemd container", "kubepods-burstable-pod" + systemdUID + ".slice:crio:0123abcd", PodCgroup{QOSBurstable, testUID}, true},
		{"CRI-O systemd guaranteed container", "kubepods-pod" + systemdUID + ".slice:crio:0123abcd", PodCgroup{QOSGuaranteed, testUID}, true},
		// Paths that name no class.
		{"empty", "", PodCgroup{}, false},
		{"root", "/", PodCgroup{}, false},
		{"kubepods root cgroupfs", "/kubepods", PodCgroup{}, false},
		{"kubepods root systemd", "/kubepods.slice", PodCgroup{}, false},
		{"not kubelet", "/system.slice/containerd.service", PodCgroup{}, false},
		{"pod without uid", "/kubepods/pod", PodCgroup{}, false},
		{"systemd pod without uid", "kubepods-burstable-pod.slice", PodCgroup{}, false},
		{"systemd uid not escaped", "kubepods-burstable-pod" + testUID + ".slice", PodCgroup{}, false},
		{"unknown tier", "/kubepods/gold/pod" + testUID, PodCgroup{}, false},
		{"docker-style path", "/docker/0123abcd", PodCgroup{}, false},
		{"kubepods not a whole segment", "/mykubepods/burstable/pod" + testUID, PodCgroup{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParsePodCgroup(tt.path)
			require.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestQOSClassOf(t *testing.T) {
	guaranteedResources := &api.LinuxResources{
		Cpu:    &api.LinuxCPU{Shares: api.UInt64(2048), Quota: api.Int64(200000), Period: api.UInt64(100000)},
		Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)},
	}
	tests := []struct {
		name       string
		pod        *api.PodSandbox
		ctr        *api.Container
		wantClass  QOSClass
		wantSource QOSSource
	}{
		{
			name:       "cgroup parent wins over resources",
			pod:        &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/besteffort/pod" + testUID}},
			ctr:        &api.Container{Linux: &api.LinuxContainer{Resources: guaranteedResources}},
			wantClass:  QOSBestEffort,
			wantSource: QOSFromCgroupParent,
		},
		{
			name:       "cgroup parent wins over cgroups path",
			pod:        &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods.slice/kubepods-pod" + systemdUID + ".slice"}},
			ctr:        &api.Container{Linux: &api.LinuxContainer{CgroupsPath: "kubepods-burstable-pod" + systemdUID + ".slice:crio:abc"}},
			wantClass:  QOSGuaranteed,
			wantSource: QOSFromCgroupParent,
		},
		{
			name:       "container cgroups path when the parent is missing",
			pod:        &api.PodSandbox{},
			ctr:        &api.Container{Linux: &api.LinuxContainer{CgroupsPath: "kubepods-burstable-pod" + systemdUID + ".slice:crio:abc"}},
			wantClass:  QOSBurstable,
			wantSource: QOSFromCgroupsPath,
		},
		{
			name:       "resources when no path names a class",
			pod:        &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: "/"}},
			ctr:        &api.Container{Linux: &api.LinuxContainer{CgroupsPath: "/abc", Resources: guaranteedResources}},
			wantClass:  QOSGuaranteed,
			wantSource: QOSFromResources,
		},
		{
			name:       "nil pod and container",
			wantClass:  QOSBestEffort,
			wantSource: QOSFromResources,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, source := QOSClassOf(tt.pod, tt.ctr)
			assert.Equal(t, tt.wantClass, class)
			assert.Equal(t, tt.wantSource, source)
		})
	}
}

// kubeletPodCgroups builds the paths the kubelet and the runtimes would make
// for a pod uid and class, the inputs ParsePodCgroup must read back.
func kubeletPodCgroups(class QOSClass, uid string) []string {
	escaped := strings.ReplaceAll(uid, "-", "_")
	if class == QOSGuaranteed {
		return []string{
			"/kubepods/pod" + uid,
			"/kubepods/pod" + uid + "/ctr",
			"/kubepods.slice/kubepods-pod" + escaped + ".slice",
			"kubepods-pod" + escaped + ".slice:crio:ctr",
		}
	}
	tier := strings.ToLower(string(class))
	return []string{
		"/kubepods/" + tier + "/pod" + uid,
		"/kubepods/" + tier + "/pod" + uid + "/crio-ctr",
		"/kubepods.slice/kubepods-" + tier + ".slice/kubepods-" + tier + "-pod" + escaped + ".slice",
		"kubepods-" + tier + "-pod" + escaped + ".slice:cri-containerd:ctr",
	}
}

func FuzzParsePodCgroup(f *testing.F) {
	f.Add("/kubepods/burstable/pod"+testUID, testUID)
	f.Add("kubepods-pod"+systemdUID+".slice:crio:abc", "d41d8cd98f00b204e9800998ecf8427e")
	f.Add("/kubepods.slice/kubepods-besteffort.slice", "x")
	f.Add("/kubepods/pod/:", "")
	f.Add("kubepods-burstable-pod.slice", "pod")
	f.Fuzz(func(t *testing.T, path, uid string) {
		// Any input: a known class or nothing, and a uid taken from the path.
		pc, ok := ParsePodCgroup(path)
		if !ok {
			assert.Equal(t, PodCgroup{}, pc)
		} else {
			assert.Contains(t, []QOSClass{QOSGuaranteed, QOSBurstable, QOSBestEffort}, pc.QOS)
			if pc.PodUID != "" {
				assert.True(t, strings.Contains(path, pc.PodUID) || strings.Contains(path, strings.ReplaceAll(pc.PodUID, "-", "_")),
					"uid %q not in path %q", pc.PodUID, path)
			}
		}

		// A uid the kubelet could produce round-trips through every naming.
		if uid == "" || strings.ContainsAny(uid, "/:_") || strings.HasSuffix(uid, ".slice") {
			return
		}
		for _, class := range []QOSClass{QOSGuaranteed, QOSBurstable, QOSBestEffort} {
			for _, p := range kubeletPodCgroups(class, uid) {
				got, ok := ParsePodCgroup(p)
				require.True(t, ok, "path %q", p)
				require.Equal(t, PodCgroup{class, uid}, got, "path %q", p)
			}
		}
	})
}
