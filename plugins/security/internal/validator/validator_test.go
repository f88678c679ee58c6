package validator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/security/config"
	"github.com/nri-suite/nri-suite/plugins/security/internal/seccomp"
)

const ctrID = "ctr-1"

// fakeHost says /host/<type> are the host's namespaces and fails on /broken.
type fakeHost struct{}

func (fakeHost) IsHost(nsType, path string) (bool, error) {
	if path == "/broken" {
		return false, errors.New("no such file")
	}
	return path == "/host/"+nsType, nil
}

// request builds a validation request in which each change is claimed by
// the plugin named beside it, as NRI's adaptation does.
type request struct {
	req *api.ValidateContainerAdjustmentRequest
	t   *testing.T
}

func newRequest(t *testing.T, plugins ...string) *request {
	req := &api.ValidateContainerAdjustmentRequest{
		Pod:       &api.PodSandbox{Name: "web", Namespace: "default"},
		Container: &api.Container{Id: ctrID, Name: "app", Linux: &api.LinuxContainer{}},
		Adjust:    &api.ContainerAdjustment{},
		Owners:    api.NewOwningPlugins(),
	}
	for _, p := range plugins {
		req.AddPlugin(config.PluginID(p).Name(), config.PluginID(p).Index())
	}
	return &request{req: req, t: t}
}

func (r *request) hook(plugin, path string) *request {
	r.req.Adjust.AddHooks(&api.Hooks{CreateRuntime: []*api.Hook{{Path: path}}})
	require.NoError(r.t, r.req.Owners.ClaimHooks(ctrID, plugin))
	return r
}

func (r *request) seccomp(plugin string, p *api.LinuxSeccomp) *request {
	r.req.Adjust.SetLinuxSeccompPolicy(p)
	require.NoError(r.t, r.req.Owners.ClaimSeccompPolicy(ctrID, plugin))
	return r
}

func (r *request) namespace(plugin string, ns *api.LinuxNamespace, remove bool) *request {
	if remove {
		r.req.Adjust.RemoveNamespace(ns)
	} else {
		r.req.Adjust.AddOrReplaceNamespace(ns)
	}
	require.NoError(r.t, r.req.Owners.ClaimNamespace(ctrID, ns.Type, plugin))
	return r
}

func (r *request) sysctl(plugin, key, value string) *request {
	r.req.Adjust.SetLinuxSysctl(key, value)
	require.NoError(r.t, r.req.Owners.ClaimSysctl(ctrID, key, plugin))
	return r
}

func (r *request) device(plugin, path string) *request {
	r.req.Adjust.AddDevice(&api.LinuxDevice{Path: path, Type: "c", Major: 1, Minor: 1})
	require.NoError(r.t, r.req.Owners.ClaimDevice(ctrID, path, plugin))
	return r
}

func (r *request) cdi(plugin, name string) *request {
	r.req.Adjust.AddCDIDevice(&api.CDIDevice{Name: name})
	require.NoError(r.t, r.req.Owners.ClaimCdiDevice(ctrID, name, plugin))
	return r
}

func allRules(config.Rule) bool { return true }

var policy = config.ValidatorFile{
	HookPlugins:     []string{"10-device-injector"},
	AllowedSysctls:  []string{"kernel.msgmax"},
	Devices:         config.PluginPatterns{Allowed: []string{"/dev/fuse"}, Plugins: map[string][]string{"10-device-injector": {"/dev/dri/*", "example.com/gpu=*"}}},
	RequiredPlugins: []string{"30-topology-aware", "40-security"},
}

// ownComplain is the policy the security plugin set, in the cases where it did.
var ownComplain = &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_LOG"}

var runtimeDefault = &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO",
	Syscalls: []*api.LinuxSyscall{{Names: []string{"read"}, Action: "SCMP_ACT_ALLOW"}}}

func TestCheck(t *testing.T) {
	const (
		other = "50-e2e-test"
		di    = "10-device-injector"
		self  = "40-security"
	)
	present := []string{di, "30-topology-aware", self, other}
	for _, tc := range []struct {
		name     string
		req      func(t *testing.T) *request
		original *api.LinuxSeccomp
		own      Own
		ctr      *api.Container // the container as the runtime made it; default: plain
		want     []Finding
	}{
		{name: "nothing changed", req: func(t *testing.T) *request { return newRequest(t, present...) }},
		{name: "hook from a plugin not allowed", req: func(t *testing.T) *request {
			return newRequest(t, present...).hook(other, "/bin/true")
		}, want: []Finding{{Rule: config.RuleOCIHooks, Plugin: other, Items: []string{"/bin/true"}}}},
		{name: "hook from an allowed plugin", req: func(t *testing.T) *request {
			return newRequest(t, present...).hook(di, "/usr/bin/nvidia-hook")
		}},
		{name: "hooks from both: only the other is named", req: func(t *testing.T) *request {
			return newRequest(t, present...).hook(di, "/a").hook(other, "/b")
		}, want: []Finding{{Rule: config.RuleOCIHooks, Plugin: other, Items: []string{"/a", "/b"}}}},
		{name: "unconfined seccomp", req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"})
		}, want: []Finding{everyDenied(other)}},
		{name: "log-only seccomp is unconfined", req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_LOG",
				Syscalls: []*api.LinuxSyscall{{Names: []string{"mkdir"}, Action: "SCMP_ACT_LOG"}}})
		}, want: []Finding{everyDenied(other)}},
		{name: "allow-by-default replacing deny-by-default", original: runtimeDefault, req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW",
				Syscalls: []*api.LinuxSyscall{{Names: []string{"mkdir"}, Action: "SCMP_ACT_ERRNO"}}})
		}, want: []Finding{everyDenied(other)}},
		{name: "a deny list on an unconfined container lets through what the runtime default denies", req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW",
				Syscalls: []*api.LinuxSyscall{{Names: []string{"mkdir"}, Action: "SCMP_ACT_ERRNO"}}})
		}, want: []Finding{everyDenied(other)}},
		{name: "deny by default with explicit allows of what the runtime default denies", original: runtimeDefault, req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO",
				Syscalls: []*api.LinuxSyscall{{Names: []string{"ptrace", "mount", "bpf", "read"}, Action: "SCMP_ACT_ALLOW"}}})
		}, want: []Finding{{Rule: config.RuleSeccompAdjustment, Plugin: other, Items: []string{"bpf", "mount"}}}},
		{name: "the runtime default from another plugin", req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(other, testRuntimeDefault(t))
		}},
		{name: "the security plugin's own complain policy", own: Own{Seccomp: ownComplain}, req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(self, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_LOG"})
		}},
		{name: "a policy under the security plugin's name that it did not set", req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(self, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"})
		}, want: []Finding{{Rule: config.RuleSeccompAdjustment, Plugin: self, Items: []string{"default action SCMP_ACT_ALLOW"}}}},
		{name: "another policy than the one it set", own: Own{Seccomp: ownComplain}, req: func(t *testing.T) *request {
			return newRequest(t, present...).seccomp(self, &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ALLOW"})
		}, want: []Finding{{Rule: config.RuleSeccompAdjustment, Plugin: self, Items: []string{"default action SCMP_ACT_ALLOW"}}}},
		{name: "a sysctl under the security plugin's name", req: func(t *testing.T) *request {
			return newRequest(t, present...).sysctl(self, "kernel.msgmax", "1").sysctl(self, "kernel.panic", "0")
		}, want: []Finding{{Rule: config.RuleSysctls, Plugin: self, Items: []string{"kernel.panic=0"}}}},
		{name: "left unconfined as privileged, and privileged", own: Own{LeftPrivileged: true}, ctr: privilegedContainer(),
			req: func(t *testing.T) *request { return newRequest(t, present...) }},
		{name: "left unconfined as privileged, made to look so by a plugin", own: Own{LeftPrivileged: true},
			req:  func(t *testing.T) *request { return newRequest(t, present...) },
			want: []Finding{{Rule: config.RuleSeccomp, Unattributed: true, Items: []string{"device-cgroup rules", "/sys mount"}}}},
		{name: "namespace removed", req: func(t *testing.T) *request {
			return newRequest(t, present...).namespace(other, &api.LinuxNamespace{Type: "network"}, true)
		}, want: []Finding{{Rule: config.RuleHostNamespaces, Plugin: other,
			Items: []string{"network (namespace removed: the container shares the host's)"}}}},
		{name: "host namespace joined", req: func(t *testing.T) *request {
			return newRequest(t, present...).namespace(other, &api.LinuxNamespace{Type: "pid", Path: "/host/pid"}, false)
		}, want: []Finding{{Rule: config.RuleHostNamespaces, Plugin: other, Items: []string{"pid at /host/pid (the host's)"}}}},
		{name: "another pod's namespace joined", req: func(t *testing.T) *request {
			return newRequest(t, present...).namespace(other, &api.LinuxNamespace{Type: "network", Path: "/var/run/netns/cni-1"}, false)
		}},
		{name: "new namespace", req: func(t *testing.T) *request {
			return newRequest(t, present...).namespace(other, &api.LinuxNamespace{Type: "time"}, false)
		}},
		{name: "unverifiable namespace", req: func(t *testing.T) *request {
			return newRequest(t, present...).namespace(other, &api.LinuxNamespace{Type: "ipc", Path: "/broken"}, false)
		}, want: []Finding{{Rule: config.RuleHostNamespaces, Plugin: other,
			Items: []string{"ipc at /broken (cannot tell whether it is the host's: no such file)"}}}},
		{name: "unsafe sysctls", req: func(t *testing.T) *request {
			return newRequest(t, present...).sysctl(other, "kernel.panic", "0").sysctl(other, "net.ipv4.tcp_rmem", "1 2 3").
				sysctl(other, "kernel.msgmax", "1").sysctl(di, "vm.swappiness", "0")
		}, want: []Finding{
			{Rule: config.RuleSysctls, Plugin: di, Items: []string{"vm.swappiness=0"}},
			{Rule: config.RuleSysctls, Plugin: other, Items: []string{"kernel.panic=0"}},
		}},
		{name: "devices of a trusted name at another index", req: func(t *testing.T) *request {
			return newRequest(t, append(present, "55-device-injector")...).device("55-device-injector", "/dev/dri/card0")
		}, want: []Finding{
			{Rule: config.RuleDevices, Plugin: "55-device-injector", Items: []string{"/dev/dri/card0"}},
			{Rule: config.RulePluginIdentity, Plugin: "55-device-injector", Items: []string{"55-device-injector besides the trusted 10-device-injector"}},
		}},
		{name: "a second security plugin", req: func(t *testing.T) *request {
			return newRequest(t, append(present, "55-security")...)
		}, want: []Finding{{Rule: config.RulePluginIdentity, Plugin: "55-security", Items: []string{"55-security besides the trusted 40-security"}}}},
		{name: "two plugins registered as one trusted", req: func(t *testing.T) *request {
			return newRequest(t, append(present, di)...)
		}, want: []Finding{{Rule: config.RulePluginIdentity, Plugin: di, Items: []string{"2 plugins registered as 10-device-injector"}}}},
		{name: "required plugins satisfied by a name at another index", req: func(t *testing.T) *request {
			return newRequest(t, di, self, "55-topology-aware")
		}, want: []Finding{
			{Rule: config.RuleRequiredPlugins, Items: []string{"30-topology-aware"}},
			{Rule: config.RulePluginIdentity, Plugin: "55-topology-aware", Items: []string{"55-topology-aware besides the trusted 30-topology-aware"}},
		}},
		{name: "devices outside policy", req: func(t *testing.T) *request {
			return newRequest(t, present...).device(other, "/dev/mem").device(other, "/dev/fuse").
				device(di, "/dev/dri/card0").device(other, "/dev/dri/card1").cdi(di, "example.com/gpu=0").cdi(other, "example.com/gpu=1")
		}, want: []Finding{{Rule: config.RuleDevices, Plugin: other, Items: []string{"/dev/dri/card1", "/dev/mem", "example.com/gpu=1"}}}},
		{name: "required plugins missing", req: func(t *testing.T) *request { return newRequest(t, di, self) },
			want: []Finding{{Rule: config.RuleRequiredPlugins, Items: []string{"30-topology-aware"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req(t)
			if tc.ctr != nil {
				r.req.Container = tc.ctr
			}
			r.req.Container.Linux.SeccompPolicy = tc.original
			assertFindings(t, tc.want, New(policy, self, fakeHost{}, testBaseline(t)).Check(r.req, allRules, tc.own))
		})
	}
}

// assertFindings compares what is compared of findings: all but the problem's text.
func assertFindings(t *testing.T, want, got []Finding) {
	t.Helper()
	require.Len(t, got, len(want), "findings: %v", got)
	for i := range got {
		assert.Equal(t, want[i].Rule, got[i].Rule)
		assert.Equal(t, want[i].Plugin, got[i].Plugin)
		assert.Equal(t, want[i].Items, got[i].Items)
		assert.Equal(t, want[i].Unattributed, got[i].Unattributed)
		assert.Equal(t, len(want[i].Items)+want[i].More, got[i].Count())
		assert.Contains(t, got[i].String(), "rule "+string(want[i].Rule)+": ")
		assert.NotEmpty(t, got[i].Problem)
	}
}

func TestCheckSkipsDisabledRules(t *testing.T) {
	r := newRequest(t).hook("50-x", "/bin/true").sysctl("50-x", "kernel.panic", "0")
	got := New(policy, "40-security", fakeHost{}, testBaseline(t)).Check(r.req, func(rule config.Rule) bool { return rule == config.RuleSysctls }, Own{})
	require.Len(t, got, 1)
	assert.Equal(t, config.RuleSysctls, got[0].Rule)
}

func TestFindingString(t *testing.T) {
	f := Finding{Rule: config.RuleOCIHooks, Plugin: "50-x", Items: []string{"/a", "/b"}, Problem: "added OCI hooks"}
	assert.Equal(t, "rule oci-hooks: plugin 50-x added OCI hooks: /a, /b", f.String())
	f = Finding{Rule: config.RuleRequiredPlugins, Items: []string{"a"}, Problem: "is missing plugins"}
	assert.Equal(t, "rule required-plugins: node is missing plugins: a", f.String())
	f = Finding{Rule: config.RuleDeviceCgroups, Unattributed: true, Problem: "added rules"}.bounded([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"})
	assert.Equal(t, "rule device-cgroups: a plugin added rules: a, b, c, d, e, f, g, h, i, j and 2 more", f.String())
	assert.Equal(t, 12, f.Count())
}

func testBaseline(t *testing.T) *seccomp.Baseline {
	b, err := seccomp.NewBaseline("", seccomp.DefaultCapabilities)
	require.NoError(t, err)
	return b
}

// testRuntimeDefault is the runtime default profile as the seccomp store builds it.
func testRuntimeDefault(t *testing.T) *api.LinuxSeccomp {
	s, err := seccomp.NewStore(seccomp.Options{})
	require.NoError(t, err)
	p, err := s.Build(seccomp.Request{Capabilities: seccomp.DefaultCapabilities})
	require.NoError(t, err)
	return p
}

// everyDenied is the finding of a policy that lets through every syscall the
// runtime default denies.
func everyDenied(plugin string) Finding {
	b, _ := seccomp.NewBaseline("", seccomp.DefaultCapabilities)
	return Finding{Rule: config.RuleSeccompAdjustment, Plugin: plugin}.bounded(b.LetsThrough(nil))
}

// privilegedContainer is what containerd and CRI-O make of a privileged container.
func privilegedContainer() *api.Container {
	return &api.Container{Id: ctrID, Name: "app",
		Mounts: []*api.Mount{{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "rw"}}},
		Linux:  &api.LinuxContainer{Resources: &api.LinuxResources{Devices: []*api.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}}}}
}

func TestAnnotatedPlugins(t *testing.T) {
	const (
		di      = "10-device-injector"
		sidecar = "20-sidecar-order"
		self    = "40-security"
	)
	owned := config.ValidatorFile{AnnotationPlugins: map[string]string{
		"cdi-devices.nri-suite.io": di, "cdi.k8s.io": di, "sidecar-order.nri-suite.io": sidecar}}
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("cdi.k8s.io/claim-%02d", i)] = "vendor.com/gpu=0"
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		plugins     []string
		want        []Finding
	}{
		{name: "no annotations, plugins absent", plugins: []string{self}},
		{name: "other annotations, plugins absent", plugins: []string{self}, annotations: map[string]string{
			"ready.sidecar-order.nri-suite.io/container.app": "process", "cdi.k8s.io.example/x": "y", "seccomp.nri-suite.io/pod": "x.json"}},
		{name: "pod-level key, plugin absent", plugins: []string{self, sidecar},
			annotations: map[string]string{"cdi-devices.nri-suite.io/pod": "vendor.com/gpu=0"},
			want:        []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi-devices.nri-suite.io/pod"}}}},
		{name: "bare key, plugin absent", plugins: []string{self},
			annotations: map[string]string{"cdi-devices.nri-suite.io": "vendor.com/gpu=0"},
			want:        []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi-devices.nri-suite.io"}}}},
		{name: "this container's key, plugin absent", plugins: []string{self},
			annotations: map[string]string{"cdi-devices.nri-suite.io/container.app": "vendor.com/gpu=0"},
			want:        []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi-devices.nri-suite.io/container.app"}}}},
		{name: "another container's keys, plugin absent", plugins: []string{self}, annotations: map[string]string{
			"cdi-devices.nri-suite.io/container.web": "vendor.com/gpu=0", "cdi.k8s.io/container.web": "vendor.com/gpu=1"}},
		{name: "standard CDI keys, plugin absent", plugins: []string{self}, annotations: map[string]string{
			"cdi.k8s.io/claim": "vendor.com/gpu=0", "cdi.k8s.io/container.app": "vendor.com/gpu=1"},
			want: []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi.k8s.io/claim", "cdi.k8s.io/container.app"}}}},
		{name: "annotations, plugins present", plugins: []string{di, sidecar, self}, annotations: map[string]string{
			"cdi-devices.nri-suite.io/container.app": "vendor.com/gpu=0", "sidecar-order.nri-suite.io/sidecars": "proxy"}},
		{name: "two plugins absent", plugins: []string{self}, annotations: map[string]string{
			"cdi.k8s.io/claim": "vendor.com/gpu=0", "sidecar-order.nri-suite.io/sidecars": "proxy"},
			want: []Finding{
				{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi.k8s.io/claim"}},
				{Rule: config.RuleAnnotatedPlugins, Plugin: sidecar, Items: []string{"sidecar-order.nri-suite.io/sidecars"}},
			}},
		{name: "the plugin's name at another index is not it", plugins: []string{"55-device-injector", self},
			annotations: map[string]string{"cdi.k8s.io/claim": "vendor.com/gpu=0"},
			want:        []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, Items: []string{"cdi.k8s.io/claim"}}}},
		{name: "many keys are bounded", plugins: []string{self}, annotations: many,
			want: []Finding{{Rule: config.RuleAnnotatedPlugins, Plugin: di, More: 2, Items: []string{
				"cdi.k8s.io/claim-00", "cdi.k8s.io/claim-01", "cdi.k8s.io/claim-02", "cdi.k8s.io/claim-03", "cdi.k8s.io/claim-04",
				"cdi.k8s.io/claim-05", "cdi.k8s.io/claim-06", "cdi.k8s.io/claim-07", "cdi.k8s.io/claim-08", "cdi.k8s.io/claim-09"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest(t, tc.plugins...)
			r.req.Pod.Annotations = tc.annotations
			only := func(rule config.Rule) bool { return rule == config.RuleAnnotatedPlugins }
			assertFindings(t, tc.want, New(owned, self, fakeHost{}, testBaseline(t)).Check(r.req, only, Own{}))
		})
	}

	r := newRequest(t, self)
	r.req.Pod.Annotations = map[string]string{"cdi-devices.nri-suite.io/container.app": "vendor.com/gpu=0"}
	got := New(owned, self, fakeHost{}, testBaseline(t)).Check(r.req, allRules, Own{})
	require.Len(t, got, 1)
	assert.Equal(t, "rule annotated-plugins: plugin 10-device-injector is not connected, and the pod's annotations ask it to act on this container "+
		"(validator.annotation-plugins): refused rather than created without it: cdi-devices.nri-suite.io/container.app", got[0].String())
	r = newRequest(t, self, "55-sidecar-order")
	assertFindings(t, []Finding{{Rule: config.RulePluginIdentity, Plugin: "55-sidecar-order", Items: []string{"55-sidecar-order besides the trusted 20-sidecar-order"}}},
		New(owned, self, fakeHost{}, testBaseline(t)).Check(r.req, allRules, Own{}))
}
