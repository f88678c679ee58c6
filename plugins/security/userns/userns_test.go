package userns

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

func namespaces(types ...string) []*api.LinuxNamespace {
	var out []*api.LinuxNamespace
	for _, t := range types {
		out = append(out, &api.LinuxNamespace{Type: t})
	}
	return out
}

func TestCheck(t *testing.T) {
	policy := config.UserNamespaces{Namespaces: []string{"tenants"}, RuntimeHandlers: []string{"kata"}}
	withUser := &api.Container{Linux: &api.LinuxContainer{Namespaces: namespaces("pid", "user", "mount")}}
	without := &api.Container{Linux: &api.LinuxContainer{Namespaces: namespaces("pid", "mount")}}
	bare := &api.Container{}
	podWithUser := &api.PodSandbox{Linux: &api.LinuxPodSandbox{Namespaces: namespaces("user")}}
	for _, tc := range []struct {
		name      string
		namespace string
		pod       *api.PodSandbox
		ctr       *api.Container
		wantErr   string
	}{
		{name: "required and present", namespace: "tenants", pod: &api.PodSandbox{}, ctr: withUser},
		{name: "required by namespace, absent", namespace: "tenants", pod: &api.PodSandbox{}, ctr: without,
			wantErr: `namespace "tenants" requires a user namespace (hostUsers: false), and the pod runs in the host's user namespace: set spec.hostUsers: false`},
		{name: "required by handler, absent", namespace: "default", pod: &api.PodSandbox{RuntimeHandler: "kata"}, ctr: without,
			wantErr: `runtime handler "kata" requires a user namespace`},
		{name: "not required", namespace: "default", pod: &api.PodSandbox{RuntimeHandler: "runc"}, ctr: without},
		{name: "container namespaces unknown: the pod's count", namespace: "tenants", pod: podWithUser, ctr: bare},
		{name: "container namespaces known: they count, not the pod's", namespace: "tenants", pod: podWithUser, ctr: without,
			wantErr: "requires a user namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(policy, tc.namespace, tc.pod, tc.ctr)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
