package main

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWeaken(t *testing.T) {
	const all = `weaken:
  hooks: [/bin/true]
  seccompUnconfined: true
  namespaces: [{type: network, path: /proc/1/ns/net}, {type: ipc, remove: true}]
  sysctls: {kernel.msgmax: "65536"}
  devices: [{path: /dev/mem, type: c, major: 1, minor: 1}]
`
	const routes = `env: {}
weaken:
  seccomp:
    defaultAction: SCMP_ACT_ALLOW
    syscalls:
    - {names: ["", no_such_call], action: SCMP_ACT_ERRNO}
    - {names: [mount], action: SCMP_ACT_ERRNO, args: [{index: 0, value: 1, op: SCMP_CMP_EQ}]}
  deviceCgroups: [{type: a, access: rwm}, {type: b, major: 8, minor: 0, access: rwm}]
  mounts: [{source: /run/containerd/containerd.sock, destination: /run/c.sock, type: bind, options: [rbind]}]
  cgroupsPath: /
  oomScoreAdj: -1000
  env: {LD_PRELOAD: /tmp/x.so}
  rlimits: [{type: RLIMIT_NOFILE, soft: 1073741824, hard: 1073741824}]
`
	for _, tc := range []struct {
		name    string
		config  string
		pod     string
		check   func(t *testing.T, adjust *api.ContainerAdjustment)
		wantErr string
	}{
		{name: "every change on a chosen pod", config: all + "  pods: [victim]\n", pod: "victim",
			check: func(t *testing.T, adjust *api.ContainerAdjustment) {
				require.Len(t, adjust.GetHooks().GetCreateRuntime(), 1)
				assert.Equal(t, "/bin/true", adjust.GetHooks().GetCreateRuntime()[0].GetPath())
				assert.Equal(t, "SCMP_ACT_ALLOW", adjust.GetLinux().GetSeccompPolicy().GetDefaultAction())
				ns := adjust.GetLinux().GetNamespaces()
				require.Len(t, ns, 2)
				assert.Equal(t, "/proc/1/ns/net", ns[0].GetPath())
				typ, removed := ns[1].IsMarkedForRemoval()
				assert.True(t, removed)
				assert.Equal(t, "ipc", typ)
				assert.Equal(t, map[string]string{"kernel.msgmax": "65536"}, adjust.GetLinux().GetSysctl())
				require.Len(t, adjust.GetLinux().GetDevices(), 1)
				assert.Equal(t, "/dev/mem", adjust.GetLinux().GetDevices()[0].GetPath())
			}},
		{name: "other pods untouched", config: all + "  pods: [victim]\n", pod: "bystander",
			check: func(t *testing.T, adjust *api.ContainerAdjustment) {
				assert.Nil(t, adjust.GetHooks())
				assert.Nil(t, adjust.GetLinux())
			}},
		{name: "no pods: every pod", config: "weaken: {seccompUnconfined: true}\n", pod: "any",
			check: func(t *testing.T, adjust *api.ContainerAdjustment) {
				assert.NotNil(t, adjust.GetLinux().GetSeccompPolicy())
			}},
		{name: "relative hook", config: "weaken: {hooks: [true]}\n", wantErr: `weaken.hooks: "true": expected an absolute path`},
		{name: "bad namespace type", config: "weaken: {namespaces: [{type: net, path: /x}]}\n", wantErr: `type "net": expected one of`},
		{name: "namespace path and remove", config: "weaken: {namespaces: [{type: ipc, path: /x, remove: true}]}\n",
			wantErr: "ipc: expected either a path or remove: true"},
		{name: "bad device type", config: "weaken: {devices: [{path: /dev/x, type: z}]}\n", wantErr: `"/dev/x" type "z"`},
		{name: "unknown key", config: "weaken: {seccompPolicy: true}\n", wantErr: `unknown key "weaken.seccompPolicy"`},
		{name: "routes to the host", config: routes, pod: "victim",
			check: func(t *testing.T, adjust *api.ContainerAdjustment) {
				seccomp := adjust.GetLinux().GetSeccompPolicy()
				assert.Equal(t, "SCMP_ACT_ALLOW", seccomp.GetDefaultAction())
				require.Len(t, seccomp.GetSyscalls(), 2)
				assert.Equal(t, []string{"", "no_such_call"}, seccomp.GetSyscalls()[0].GetNames(), "fake denies as given")
				assert.Equal(t, "SCMP_CMP_EQ", seccomp.GetSyscalls()[1].GetArgs()[0].GetOp())
				devices := adjust.GetLinux().GetResources().GetDevices()
				require.Len(t, devices, 2)
				assert.True(t, devices[0].GetAllow())
				assert.Nil(t, devices[0].GetMajor(), "no major: any")
				assert.Equal(t, "rwm", devices[0].GetAccess())
				assert.Equal(t, int64(8), devices[1].GetMajor().GetValue())
				require.Len(t, adjust.GetMounts(), 1)
				assert.Equal(t, "/run/containerd/containerd.sock", adjust.GetMounts()[0].GetSource())
				assert.Equal(t, "/", adjust.GetLinux().GetCgroupsPath())
				assert.Equal(t, int64(-1000), adjust.GetLinux().GetOomScoreAdj().GetValue())
				assert.Equal(t, []string{"LD_PRELOAD=/tmp/x.so"}, envOf(adjust))
				require.Len(t, adjust.GetRlimits(), 1)
				assert.Equal(t, uint64(1<<30), adjust.GetRlimits()[0].GetHard())
			}},
		{name: "seccomp without default action", config: "weaken: {seccomp: {syscalls: [{names: [x]}]}}\n", wantErr: "weaken.seccomp: expected a defaultAction"},
		{name: "seccomp twice", config: "weaken: {seccompUnconfined: true, seccomp: {defaultAction: SCMP_ACT_LOG}}\n", wantErr: "not with seccompUnconfined"},
		{name: "bad device-cgroup rule", config: "weaken: {deviceCgroups: [{type: x, access: rwm}]}\n", wantErr: `weaken.deviceCgroups: type "x" access "rwm"`},
		{name: "relative mount destination", config: "weaken: {mounts: [{source: /, destination: host}]}\n", wantErr: `weaken.mounts: destination "host"`},
		{name: "oom score out of range", config: "weaken: {oomScoreAdj: -1001}\n", wantErr: "weaken.oomScoreAdj: -1001: expected -1000 to 1000"},
		{name: "bad env key", config: "weaken: {env: {\"A=B\": c}}\n", wantErr: `weaken.env: key "A=B"`},
		{name: "bad rlimit type", config: "weaken: {rlimits: [{type: NOFILE}]}\n", wantErr: `weaken.rlimits: type "NOFILE": expected RLIMIT_<name>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newForTest(t)
			err := p.Configure([]byte(tc.config), "cfg.yaml")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			adjust, _, err := p.CreateContainer(context.Background(), &api.PodSandbox{Name: tc.pod}, nil)
			require.NoError(t, err)
			if !strings.HasPrefix(tc.config, "env: {}") {
				assert.Equal(t, []string{"NRI_SUITE_E2E=e2e-test"}, envOf(adjust), "the env is still added")
			}
			tc.check(t, adjust)
		})
	}
}
