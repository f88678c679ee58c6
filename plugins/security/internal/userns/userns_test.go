package userns

import (
	"errors"
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

// fakeHost says /host/<type> is the host's namespace and cannot read /gone.
type fakeHost struct{}

func (fakeHost) IsHost(nsType, path string) (bool, error) {
	if path == "/gone" {
		return false, errors.New("no such file")
	}
	return path == "/host/"+nsType, nil
}

func withPath(list []*api.LinuxNamespace, typ, path string) []*api.LinuxNamespace {
	return append(list, &api.LinuxNamespace{Type: typ, Path: path})
}

func TestCheck(t *testing.T) {
	policy := config.UserNamespaces{Namespaces: []string{"tenants"}, RuntimeHandlers: []string{"kata"}}
	own := namespaces("pid", "user", "mount", "network", "ipc")
	withUser := &api.Container{Linux: &api.LinuxContainer{Namespaces: own}}
	without := &api.Container{Linux: &api.LinuxContainer{Namespaces: namespaces("pid", "mount", "network", "ipc")}}
	bare := &api.Container{}
	podWithUser := &api.PodSandbox{Linux: &api.LinuxPodSandbox{Namespaces: own}}
	// containerd lists a hostNetwork pod's network namespace by the host's
	// path; CRI-O leaves it out.
	hostNetContainerd := &api.Container{Linux: &api.LinuxContainer{Namespaces: withPath(namespaces("pid", "user", "mount", "ipc"), "network", "/host/network")}}
	hostNetCRIO := &api.Container{Linux: &api.LinuxContainer{Namespaces: namespaces("pid", "user", "mount", "ipc")}}
	hostPIDAndIPC := &api.Container{Linux: &api.LinuxContainer{Namespaces: withPath(namespaces("user", "mount", "network"), "ipc", "/host/ipc")}}
	podIPC := &api.Container{Linux: &api.LinuxContainer{Namespaces: withPath(namespaces("pid", "user", "mount", "network"), "ipc", "/proc/42/ns/ipc")}}
	unreadable := &api.Container{Linux: &api.LinuxContainer{Namespaces: withPath(namespaces("pid", "user", "mount", "ipc"), "network", "/gone")}}
	for _, tc := range []struct {
		name      string
		namespace string
		pod       *api.PodSandbox
		ctr       *api.Container
		allowHost []string
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
		{name: "hostNetwork on containerd", namespace: "tenants", pod: &api.PodSandbox{}, ctr: hostNetContainerd,
			wantErr: `namespace "tenants" requires a user namespace (hostUsers: false), and a pod with one may not share the host's namespaces: ` +
				`hostNetwork: true (network namespace: joins the host's at /host/network)`},
		{name: "hostNetwork on CRI-O", namespace: "tenants", pod: &api.PodSandbox{}, ctr: hostNetCRIO,
			wantErr: `hostNetwork: true (network namespace: no namespace of its own)`},
		{name: "hostNetwork allowed", namespace: "tenants", pod: &api.PodSandbox{}, ctr: hostNetCRIO, allowHost: []string{"network"}},
		{name: "hostPID and hostIPC", namespace: "tenants", pod: &api.PodSandbox{}, ctr: hostPIDAndIPC, allowHost: []string{"network"},
			wantErr: `hostPID: true (pid namespace: no namespace of its own), hostIPC: true (ipc namespace: joins the host's at /host/ipc)`},
		{name: "the pod's own IPC namespace", namespace: "tenants", pod: &api.PodSandbox{}, ctr: podIPC},
		{name: "a path that cannot be checked counts as the host's", namespace: "tenants", pod: &api.PodSandbox{}, ctr: unreadable,
			wantErr: `hostNetwork: true (network namespace: cannot tell whether /gone is the host's: no such file)`},
		{name: "host namespaces of pods without the requirement", namespace: "default", pod: &api.PodSandbox{}, ctr: hostNetCRIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := policy
			policy.AllowHost = tc.allowHost
			scope := config.Scope{Namespace: tc.namespace, RuntimeHandler: tc.pod.GetRuntimeHandler()}
			err := Check(policy, scope, tc.pod, tc.ctr, fakeHost{})
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
