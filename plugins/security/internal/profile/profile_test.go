package profile

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/security/config"
)

var cfg = mustSeccomp(`seccomp:
  profile-dir: /etc/profiles
  exempt: {namespaces: [kube-system], pods: [default/debug]}
  complain: {namespaces: [staging]}
  privileged: {namespaces: {tenants: refuse, strict: profile}}
  namespace-profiles: {team-a: ["team-a/*"], "*": ["*.json"]}
`)

func mustSeccomp(yaml string) config.Seccomp {
	c, err := config.Parse([]byte(yaml), "cfg.yaml")
	if err != nil {
		panic(err)
	}
	return c.Seccomp
}

func scopeOf(id k8s.Identity) config.Scope { return config.Scope{Namespace: id.Namespace, Pod: id.Pod} }

func container(profile *api.SecurityProfile, policy *api.LinuxSeccomp) *api.Container {
	return &api.Container{Name: "app", Linux: &api.LinuxContainer{SeccompProfile: profile, SeccompPolicy: policy}}
}

var (
	unconfined     = &api.SecurityProfile{ProfileType: api.SecurityProfile_UNCONFINED}
	runtimeDefault = &api.SecurityProfile{ProfileType: api.SecurityProfile_RUNTIME_DEFAULT}
	localhost      = &api.SecurityProfile{ProfileType: api.SecurityProfile_LOCALHOST, LocalhostRef: "/var/lib/kubelet/seccomp/x.json"}
	errnoPolicy    = &api.LinuxSeccomp{DefaultAction: "SCMP_ACT_ERRNO"}
)

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name        string
		namespace   string
		pod         string
		annotations map[string]string
		ctr         *api.Container
		privileged  bool
		want        Choice
	}{
		{name: "unconfined gets the default", ctr: container(unconfined, nil),
			want: Choice{Apply: true, Reason: "would run unconfined"}},
		{name: "no profile at all gets the default", ctr: &api.Container{Name: "app"},
			want: Choice{Apply: true, Reason: "would run unconfined"}},
		{name: "runtime default is kept", ctr: container(runtimeDefault, errnoPolicy),
			want: Choice{Reason: "already confined: OCI seccomp policy with default action SCMP_ACT_ERRNO"}},
		{name: "runtime default profile without a policy is kept", ctr: container(runtimeDefault, nil),
			want: Choice{Reason: "already confined: profile RuntimeDefault"}},
		{name: "localhost is kept", ctr: container(localhost, nil),
			want: Choice{Reason: "already confined: profile Localhost /var/lib/kubelet/seccomp/x.json"}},
		{name: "exempt namespace", namespace: "kube-system", ctr: container(unconfined, nil),
			want: Choice{Exempt: true, Reason: "exempt by seccomp.exempt"}},
		{name: "exempt pod", pod: "debug", ctr: container(unconfined, nil),
			want: Choice{Exempt: true, Reason: "exempt by seccomp.exempt"}},
		{name: "complain namespace", namespace: "staging", ctr: container(unconfined, nil),
			want: Choice{Apply: true, Complain: true, Reason: "would run unconfined"}},
		{name: "container annotation beats pod annotation", ctr: container(runtimeDefault, errnoPolicy),
			annotations: map[string]string{"seccomp.nri-suite.io/pod": "a.json", "seccomp.nri-suite.io/container.app": " b.json\n"},
			want: Choice{Apply: true, Profile: "b.json", Annotation: "seccomp.nri-suite.io/container.app",
				Reason: "named by annotation seccomp.nri-suite.io/container.app"}},
		{name: "annotation of another container", ctr: container(unconfined, nil),
			annotations: map[string]string{"seccomp.nri-suite.io/container.other": "a.json"},
			want:        Choice{Apply: true, Reason: "would run unconfined"}},
		{name: "privileged stays unconfined", ctr: container(unconfined, nil), privileged: true,
			want: Choice{Exempt: true, Reason: ReasonPrivileged}},
		{name: "privileged is never already confined", ctr: container(runtimeDefault, nil), privileged: true,
			want: Choice{Exempt: true, Reason: ReasonPrivileged}},
		{name: "privileged gets a profile where policy says so", namespace: "strict", ctr: container(runtimeDefault, nil), privileged: true,
			want: Choice{Apply: true, Reason: "privileged, and seccomp.privileged is profile"}},
		{name: "privileged with a named profile", ctr: container(unconfined, nil), privileged: true,
			annotations: map[string]string{"seccomp.nri-suite.io": "a.json"},
			want:        Choice{Apply: true, Profile: "a.json", Annotation: "seccomp.nri-suite.io", Reason: "named by annotation seccomp.nri-suite.io"}},
		{name: "a team's profile in its namespace", namespace: "team-a", ctr: container(unconfined, nil),
			annotations: map[string]string{"seccomp.nri-suite.io": "team-a/strict.json"},
			want: Choice{Apply: true, Profile: "team-a/strict.json", Annotation: "seccomp.nri-suite.io",
				Reason: "named by annotation seccomp.nri-suite.io"}},
		{name: "node-wide key in an exempt complain pod", namespace: "kube-system", ctr: container(unconfined, nil),
			annotations: map[string]string{"seccomp.nri-suite.io": "a.json"},
			want: Choice{Apply: true, Profile: "a.json", Annotation: "seccomp.nri-suite.io",
				Reason: "named by annotation seccomp.nri-suite.io"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := k8s.Identity{Namespace: tc.namespace, Pod: tc.pod, Container: "app"}
			if id.Namespace == "" {
				id.Namespace = "default"
			}
			got, err := Choose(cfg, scopeOf(id), id, &api.PodSandbox{Annotations: tc.annotations}, tc.ctr, tc.privileged)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestChooseErrors(t *testing.T) {
	id := k8s.Identity{Namespace: "default", Pod: "web", Container: "app"}
	pod := &api.PodSandbox{Annotations: map[string]string{"seccomp.nri-suite.io/pod": " "}}
	_, err := Choose(cfg, scopeOf(id), id, pod, container(unconfined, nil), false)
	var annErr *k8s.AnnotationError
	require.ErrorAs(t, err, &annErr)
	assert.Equal(t, `annotation seccomp.nri-suite.io/pod=" ": want the name of a profile in the profile directory`, err.Error())

	pod = &api.PodSandbox{Annotations: map[string]string{"seccomp.nri-suite.io": "a.json"}}
	_, err = Choose(config.Default().Seccomp, scopeOf(id), id, pod, container(unconfined, nil), false)
	require.ErrorAs(t, err, &annErr)
	assert.Contains(t, err.Error(), "want no profile name: the plugin has no seccomp.profile-dir to find it in")

	pod = &api.PodSandbox{Annotations: map[string]string{"seccomp.nri-suite.io": "team-a/strict.json"}}
	_, err = Choose(cfg, scopeOf(id), id, pod, container(unconfined, nil), false)
	require.ErrorAs(t, err, &annErr)
	assert.Equal(t, `annotation seccomp.nri-suite.io="team-a/strict.json": want a profile that seccomp.namespace-profiles lets namespace "default" name`, err.Error())

	// A key that can never apply and a value above the limit are refused
	// rather than leaving the container on the default profile.
	pod = &api.PodSandbox{Annotations: map[string]string{"seccomp.nri-suite.io/privileged": "true"}}
	_, err = Choose(cfg, scopeOf(id), id, pod, container(unconfined, nil), false)
	require.ErrorAs(t, err, &annErr)
	assert.Equal(t, `annotation seccomp.nri-suite.io/privileged="true": want a key of the form seccomp.nri-suite.io, `+
		`seccomp.nri-suite.io/pod or seccomp.nri-suite.io/container.<name>, where <name> is a container's name (lowercase letters, digits and '-')`, err.Error())
	pod = &api.PodSandbox{Annotations: map[string]string{"seccomp.nri-suite.io/container.app": strings.Repeat("a/", 1<<19)}}
	_, err = Choose(cfg, scopeOf(id), id, pod, container(unconfined, nil), false)
	require.ErrorAs(t, err, &annErr)
	assert.Contains(t, err.Error(), `annotation seccomp.nri-suite.io/container.app="a/a/a/`)
	assert.Contains(t, err.Error(), "…(1048576 bytes): want a value of at most 4096 bytes")

	tenant := k8s.Identity{Namespace: "tenants", Pod: "web", Container: "app"}
	_, err = Choose(cfg, scopeOf(tenant), tenant, &api.PodSandbox{}, container(unconfined, nil), true)
	assert.EqualError(t, err, `the container is privileged, and seccomp.privileged is refuse for namespace "tenants"`)
}

func FuzzChoose(f *testing.F) {
	for _, seed := range []struct{ key, value string }{
		{"seccomp.nri-suite.io/container.app", "deny-mkdir.json"}, {"seccomp.nri-suite.io/pod", ""},
		{"seccomp.nri-suite.io", "../etc/passwd"}, {"seccomp.nri-suite.io/container.", "/abs.json"}, {"other", "x"},
		{"seccomp.nri-suite.io/pod", strings.Repeat("x.json", 1<<11)}, {"seccomp.nri-suite.io/" + strings.Repeat("k", 1<<13), "a.json"},
	} {
		f.Add(seed.key, seed.value, int32(1))
	}
	f.Fuzz(func(t *testing.T, key, value string, profileType int32) {
		id := k8s.Identity{Namespace: "default", Pod: "web", Container: "app"}
		pod := &api.PodSandbox{Annotations: map[string]string{key: value}}
		ctr := container(&api.SecurityProfile{ProfileType: api.SecurityProfile_ProfileType(profileType)}, nil)
		got, err := Choose(cfg, scopeOf(id), id, pod, ctr, false)
		if err != nil {
			assert.Contains(t, err.Error(), quote.Bare(key), "the error names the annotation")
			assert.Less(t, len(err.Error()), 2048, "the error quotes bounded prefixes")
			return
		}
		if got.Annotation != "" {
			assert.Equal(t, key, got.Annotation)
			assert.NotEmpty(t, got.Profile)
		}
		assert.False(t, got.Apply && got.Exempt, "an exempt container is never confined by default")
	})
}
