package main

import (
	"context"
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
		{name: "unknown key", config: "weaken: {seccomp: true}\n", wantErr: `unknown key "seccomp"`},
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
			assert.Equal(t, []string{"NRI_SUITE_E2E=e2e-test"}, envOf(adjust), "the env is still added")
			tc.check(t, adjust)
		})
	}
}
