package validator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

func (r *request) mount(plugin string, m *api.Mount) *request {
	r.req.Adjust.AddMount(m)
	require.NoError(r.t, r.req.Owners.ClaimMount(ctrID, m.Destination, plugin))
	return r
}

func (r *request) bind(plugin, source, destination string) *request {
	return r.mount(plugin, &api.Mount{Source: source, Destination: destination, Type: "bind", Options: []string{"rbind", "ro"}})
}

// deviceCgroup adds a rule as a plugin does; NRI claims no owner for it.
func (r *request) deviceCgroup(rule *api.LinuxDeviceCgroup) *request {
	a := r.req.Adjust
	if a.Linux == nil {
		a.Linux = &api.LinuxContainerAdjustment{}
	}
	if a.Linux.Resources == nil {
		a.Linux.Resources = &api.LinuxResources{}
	}
	a.Linux.Resources.Devices = append(a.Linux.Resources.Devices, rule)
	return r
}

func (r *request) cgroupsPath(plugin, parent, path string) *request {
	r.req.Pod.Linux = &api.LinuxPodSandbox{CgroupParent: parent}
	r.req.Adjust.SetLinuxCgroupsPath(path)
	require.NoError(r.t, r.req.Owners.ClaimCgroupsPath(ctrID, plugin))
	return r
}

func (r *request) oomScoreAdj(plugin string, original *int64, value int) *request {
	if original != nil {
		r.req.Container.Linux.OomScoreAdj = &api.OptionalInt{Value: *original}
	}
	r.req.Adjust.SetLinuxOomScoreAdj(&value)
	require.NoError(r.t, r.req.Owners.ClaimOomScoreAdj(ctrID, plugin))
	return r
}

func (r *request) env(plugin, name string) *request {
	r.req.Adjust.AddEnv(name, "/x")
	require.NoError(r.t, r.req.Owners.ClaimEnv(ctrID, name, plugin))
	return r
}

func (r *request) rlimit(plugin, typ string, soft, hard uint64) *request {
	r.req.Adjust.AddRlimit(typ, hard, soft)
	require.NoError(r.t, r.req.Owners.ClaimRlimit(ctrID, typ, plugin))
	return r
}

func int64p(v int64) *int64 { return &v }

func TestRoutes(t *testing.T) {
	const (
		other   = "50-e2e-test"
		di      = "10-device-injector"
		sidecar = "20-sidecar-order"
	)
	// A host directory with symlinks out of it.
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.Symlink("/", filepath.Join(tmp, "root")))
	require.NoError(t, os.Symlink("/dev", filepath.Join(tmp, "dev")))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "file"), nil, 0o644))

	routes := config.ValidatorFile{
		Mounts: config.PluginPatterns{Allowed: []string{tmp + "/*", tmp + "/*/*"}, Plugins: map[string][]string{
			sidecar: {"/usr/libexec/nri-suite/nri-sidecar-helper", "/run/nri-suite/sidecar-order/*"},
			di:      {"/*", "/dev/*", "/dev/fuse", "/run/containerd/*", "/var/lib/kubelet/pod-resources"},
		}},
		DeviceCgroups: config.DeviceCgroupPolicy{Allowed: []string{"c 10:229 rwm", "c 1:* rw"}},
		Env:           config.EnvPolicy{Denied: []string{"SECRET_*"}, Plugins: map[string][]string{di: {"LD_LIBRARY_PATH"}}},
		Rlimits:       config.RlimitPolicy{Max: map[string]uint64{"RLIMIT_MEMLOCK": 65536, "RLIMIT_RTPRIO": 0}},
	}
	i64 := func(v int64) *api.OptionalInt64 { return &api.OptionalInt64{Value: v} }
	for _, tc := range []struct {
		name string
		req  func(t *testing.T) *request
		want []Finding
	}{
		{name: "device-cgroup rules outside the policy, nobody to name", req: func(t *testing.T) *request {
			return newRequest(t).deviceCgroup(&api.LinuxDeviceCgroup{Allow: true, Type: "a", Access: "rwm"}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: true, Type: "b", Major: i64(8), Minor: i64(0), Access: "rwm"}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: true}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rw"}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(10), Minor: i64(229), Access: "rwm"}).
				deviceCgroup(&api.LinuxDeviceCgroup{Allow: false, Type: "a", Access: "rwm"})
		}, want: []Finding{{Rule: config.RuleDeviceCgroups, Unattributed: true, Items: []string{"a *:* rwm", "b 8:0 rwm", "c 1:3 rwm"}}}},
		{name: "kernel file systems, whatever the policy", req: func(t *testing.T) *request {
			return newRequest(t).mount(di, &api.Mount{Source: "devtmpfs", Destination: "/hostdev", Type: "devtmpfs"}).
				mount(di, &api.Mount{Source: "none", Destination: "/sys2", Type: "sysfs"}).
				mount(di, &api.Mount{Source: "tmpfs", Destination: "/scratch", Type: "tmpfs"})
		}, want: []Finding{{Rule: config.RuleMounts, Plugin: di, Items: []string{
			"devtmpfs at /hostdev (a kernel file system: it reaches the host whatever the policy)",
			"sysfs at /sys2 (a kernel file system: it reaches the host whatever the policy)"}}}},
		{name: "host routes need a pattern naming them exactly", req: func(t *testing.T) *request {
			return newRequest(t).bind(di, "/", "/host").bind(di, "/dev/mem", "/dev/mem").bind(di, "/dev/fuse", "/dev/fuse").
				bind(di, "/run/containerd/containerd.sock", "/run/c.sock").bind(di, "/var/lib/kubelet/pod-resources", "/pr").
				bind(di, "/run", "/hostrun").bind(di, "/dev//../dev/./sda", "/sda").
				mount(di, &api.Mount{Source: "/dev/sda1", Destination: "/data", Type: "ext4"})
		}, want: []Finding{{Rule: config.RuleMounts, Plugin: di, Items: []string{
			"/ at /host (the host's root: only a pattern naming it exactly allows it)",
			"/dev//../dev/./sda at /sda (under the host's /dev: only a pattern naming it exactly allows it)",
			"/dev/mem at /dev/mem (under the host's /dev: only a pattern naming it exactly allows it)",
			"/dev/sda1 at /data (under the host's /dev: only a pattern naming it exactly allows it)",
			"/run at /hostrun (it holds the host's /run/containerd: only a pattern naming it exactly allows it)",
			"/run/containerd/containerd.sock at /run/c.sock (under the host's /run/containerd: only a pattern naming it exactly allows it)",
		}}}},
		{name: "host paths outside the plugin's patterns", req: func(t *testing.T) *request {
			return newRequest(t).bind(other, "/", "/host").bind(other, "/var/run/containerd/containerd.sock", "/s").
				bind(other, "etc", "/etc2").bind(other, "/usr/libexec/nri-suite/nri-sidecar-helper", "/h").
				bind(other, tmp+"/file", "/f")
		}, want: []Finding{{Rule: config.RuleMounts, Plugin: other, Items: []string{
			"/ at /host (not in validator.mounts)",
			"/usr/libexec/nri-suite/nri-sidecar-helper at /h (not in validator.mounts)",
			"/var/run/containerd/containerd.sock at /s (not in validator.mounts)",
			"etc at /etc2 (not an absolute host path)",
		}}}},
		{name: "symlinks are judged where they lead", req: func(t *testing.T) *request {
			return newRequest(t).bind(other, tmp+"/root", "/a").bind(other, tmp+"/dev/mem", "/b").bind(di, tmp+"/root", "/c").
				bind(di, tmp+"/dev/no-such-device", "/d")
		}, want: []Finding{
			{Rule: config.RuleMounts, Plugin: di, Items: []string{
				tmp + "/dev/no-such-device at /d (it resolves to /dev/no-such-device on the host: under the host's /dev: only a pattern naming it exactly allows it)",
				tmp + "/root at /c (it resolves to / on the host: the host's root: only a pattern naming it exactly allows it)"}},
			{Rule: config.RuleMounts, Plugin: other, Items: []string{
				tmp + "/dev/mem at /b (it resolves to /dev/mem on the host: not in validator.mounts)",
				tmp + "/root at /a (it resolves to / on the host: not in validator.mounts)",
			}},
		}},
		{name: "an overlay's directories are host sources", req: func(t *testing.T) *request {
			return newRequest(t).mount(other, &api.Mount{Source: "overlay", Destination: "/o", Type: "overlay",
				Options: []string{"lowerdir=/:" + tmp + "/file", "upperdir=" + tmp + "/u", "workdir=/var/lib/containerd/w"}})
		}, want: []Finding{{Rule: config.RuleMounts, Plugin: other, Items: []string{
			"/ at /o (not in validator.mounts)", "/var/lib/containerd/w at /o (not in validator.mounts)"}}}},
		{name: "what the suite's plugins mount, and removals", req: func(t *testing.T) *request {
			r := newRequest(t).bind(sidecar, "/usr/libexec/nri-suite/nri-sidecar-helper", "/.nri-sidecar-order/helper").
				bind(sidecar, "/run/nri-suite/sidecar-order/uid-1", "/.nri-sidecar-order/pod")
			r.req.Adjust.RemoveMount("/etc/hosts")
			return r
		}},
		{name: "cgroups path out of the pod", req: func(t *testing.T) *request {
			return newRequest(t).cgroupsPath(other, "/kubepods/besteffort/podU", "/")
		}, want: []Finding{{Rule: config.RuleCgroupsPath, Plugin: other, Items: []string{"/ (the pod's cgroup: /kubepods/besteffort/podU)"}}}},
		{name: "cgroups path in the pod", req: func(t *testing.T) *request {
			return newRequest(t).cgroupsPath(other, "/kubepods/besteffort/podU", "/kubepods/besteffort/podU/ctr-1")
		}},
		{name: "oom_score_adj lowered", req: func(t *testing.T) *request {
			return newRequest(t).oomScoreAdj(other, int64p(1000), -1000)
		}, want: []Finding{{Rule: config.RuleOOMScoreAdj, Plugin: other, Items: []string{"-1000 (the container had 1000)"}}}},
		{name: "oom_score_adj below 0 without one of the kubelet's", req: func(t *testing.T) *request {
			return newRequest(t).oomScoreAdj(other, nil, -1)
		}, want: []Finding{{Rule: config.RuleOOMScoreAdj, Plugin: other, Items: []string{"-1 (the container had none, counted as 0)"}}}},
		{name: "oom_score_adj raised", req: func(t *testing.T) *request {
			return newRequest(t).oomScoreAdj(other, int64p(-997), 0)
		}},
		{name: "code-loading env", req: func(t *testing.T) *request {
			r := newRequest(t).env(other, "LD_PRELOAD").env(other, "GCONV_PATH").env(other, "SECRET_TOKEN").env(other, "PATH").
				env(di, "LD_LIBRARY_PATH").env(di, "LD_AUDIT")
			r.req.Adjust.RemoveEnv("LD_DEBUG")
			return r
		}, want: []Finding{
			{Rule: config.RuleEnv, Plugin: di, Items: []string{"LD_AUDIT"}},
			{Rule: config.RuleEnv, Plugin: other, Items: []string{"GCONV_PATH", "LD_PRELOAD", "SECRET_TOKEN"}},
		}},
		{name: "rlimits above their maximum or the container's", req: func(t *testing.T) *request {
			r := newRequest(t).rlimit(other, "RLIMIT_NOFILE", 1<<20+1, 1<<20+1).rlimit(other, "RLIMIT_RTPRIO", 1024, 65537).
				rlimit(other, "RLIMIT_NPROC", 50, 300).rlimit(other, "RLIMIT_CORE", 0, 0).rlimit(di, "RLIMIT_AS", 1, 1).rlimit("30-topology-aware", "RLIMIT_MEMLOCK", 1024, 65536).
				rlimit(di, "RLIMIT_STACK", 4096, 8192)
			r.req.Container.Rlimits = []*api.POSIXRlimit{{Type: "RLIMIT_NPROC", Soft: 100, Hard: 200}, {Type: "RLIMIT_STACK", Soft: 8192, Hard: 8192}}
			return r
		}, want: []Finding{
			{Rule: config.RuleRlimits, Plugin: di, Items: []string{"RLIMIT_AS soft 1 hard 1 (no maximum, and the container had none)"}},
			{Rule: config.RuleRlimits, Plugin: other, Items: []string{
				"RLIMIT_CORE soft 0 hard 0 (no maximum, and the container had none)",
				"RLIMIT_NOFILE soft 1048577 hard 1048577 (maximum 1048576)",
				"RLIMIT_NPROC soft 50 hard 300 (no maximum, and the container had soft 100 hard 200)",
				"RLIMIT_RTPRIO soft 1024 hard 65537 (maximum 0)",
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertFindings(t, tc.want, New(routes, "40-security", fakeHost{}, testBaseline(t)).Check(tc.req(t).req, allRules, Own{}))
		})
	}
}

func TestBelowCgroup(t *testing.T) {
	const (
		fs      = "/kubepods/besteffort/podU"
		systemd = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podU.slice"
	)
	for _, tc := range []struct {
		parent, path string
		want         bool
	}{
		{fs, fs + "/ctr", true},
		{fs + "/", fs + "/a/b", true},
		{fs, "/", false},
		{fs, fs, false},
		{fs, fs + "/../podV/ctr", false},
		{fs, fs + "X/ctr", false},
		{fs, "podU/ctr", false},
		{"", "/ctr", false},
		{"/", "/ctr", true},
		{"/", "/", false},
		{systemd, "kubepods-besteffort-podU.slice:cri-containerd:abc", true},
		{"kubepods-besteffort-podU.slice", "kubepods-besteffort-podU.slice:crio:abc", true},
		{systemd, "kubepods-besteffort-podU-extra.slice:crio:abc", true},
		{systemd, "kubepods-besteffort-podUX.slice:crio:abc", false},
		{systemd, "system.slice:crio:abc", false},
		{systemd, ":crio:abc", false},
		{systemd, "kubepods-besteffort-podU.slice:crio:", false},
		{systemd, "kubepods-besteffort-podU.slice:crio:../x", false},
		{fs, "kubepods-besteffort-podU.slice:crio:abc", false},
	} {
		assert.Equal(t, tc.want, belowCgroup(tc.path, tc.parent), "%q below %q", tc.path, tc.parent)
	}
}
