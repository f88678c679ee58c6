package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const full = `
rules:
  seccomp: {mode: enforce, namespaces: {kube-system: "off", staging: audit}}
  oci-hooks: {mode: audit}
  required-plugins: {namespaces: {kube-system: "off"}}
seccomp:
  profile-dir: /etc/nri-suite/seccomp
  exempt: {namespaces: [kube-system], pods: [default/debug]}
  complain: {namespaces: [staging], pods: [default/try]}
  extra-rules:
  - {names: [userfaultfd], action: SCMP_ACT_ERRNO, errno: EPERM}
user-namespaces:
  namespaces: [tenants]
  runtime-handlers: [kata]
validator:
  hook-plugins: [device-injector]
  allowed-sysctls: [kernel.msgmax, net.core.*]
  devices:
    allowed: [/dev/fuse]
    plugins: {device-injector: ["/dev/dri/*", "example.com/gpu=*"]}
  required-plugins: [topology-aware]
`

func TestParse(t *testing.T) {
	cfg, err := Parse([]byte(full), "cfg.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		rule      Rule
		namespace string
		want      Mode
	}{
		{RuleSeccomp, "default", Enforce},
		{RuleSeccomp, "kube-system", Off},
		{RuleSeccomp, "staging", Audit},
		{RuleOCIHooks, "default", Audit},
		{RuleRequiredPlugins, "kube-system", Off},
		{RuleRequiredPlugins, "default", Enforce},
		{RuleSysctls, "anything", Enforce},
	} {
		assert.Equal(t, tc.want, cfg.Mode(tc.rule, tc.namespace), "%s in %s", tc.rule, tc.namespace)
	}
	assert.True(t, cfg.Seccomp.Exempt.Matches("kube-system", "x"))
	assert.True(t, cfg.Seccomp.Exempt.Matches("default", "debug"))
	assert.False(t, cfg.Seccomp.Exempt.Matches("other", "debug"))
	assert.True(t, cfg.Seccomp.Complain.Matches("default", "try"))
	require.Len(t, cfg.Seccomp.ExtraRules, 1)
	assert.Equal(t, []string{"userfaultfd"}, cfg.Seccomp.ExtraRules[0].Names)

	why, ok := cfg.UserNamespaces.Required("tenants", "")
	assert.True(t, ok)
	assert.Contains(t, why, `namespace "tenants"`)
	why, ok = cfg.UserNamespaces.Required("default", "kata")
	assert.True(t, ok)
	assert.Contains(t, why, `runtime handler "kata"`)
	_, ok = cfg.UserNamespaces.Required("default", "runc")
	assert.False(t, ok)

	v := cfg.Validator
	assert.True(t, v.SysctlAllowed("net.ipv4.tcp_rmem"), "Kubernetes safe sysctl")
	assert.True(t, v.SysctlAllowed("kernel.msgmax"))
	assert.True(t, v.SysctlAllowed("net.core.somaxconn"), "prefix pattern")
	assert.False(t, v.SysctlAllowed("net.corex"), "a prefix matches whole components")
	assert.False(t, v.SysctlAllowed("kernel.panic"))
	assert.True(t, v.DeviceAllowed("anyone", "/dev/fuse"))
	assert.True(t, v.DeviceAllowed("device-injector", "/dev/dri/card0"))
	assert.True(t, v.DeviceAllowed("device-injector", "example.com/gpu=0"))
	assert.False(t, v.DeviceAllowed("other", "/dev/dri/card0"), "patterns of one plugin are its own")
	assert.False(t, v.DeviceAllowed("device-injector", "/dev/mem"))
}

func TestDefault(t *testing.T) {
	for _, data := range []string{"", "# only a comment\n"} {
		cfg, err := Parse([]byte(data), "cfg.yaml")
		require.NoError(t, err)
		for _, r := range Rules {
			assert.Equal(t, Enforce, cfg.Mode(r, "default"), "every rule is enforced by default: %s", r)
		}
		assert.Empty(t, cfg.Seccomp.ProfileDir)
		_, ok := cfg.UserNamespaces.Required("default", "runc")
		assert.False(t, ok)
		assert.False(t, cfg.Validator.DeviceAllowed("device-injector", "/dev/null"))
	}
	assert.Equal(t, Enforce, Default().Mode(RuleDevices, "x"))
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown rule", "rules: {seccomp-default: {mode: audit}}\n",
			`config cfg.yaml: rules: unknown rule "seccomp-default": expected one of seccomp, user-namespace, oci-hooks`},
		{"unknown mode", "rules: {seccomp: {mode: warn}}\n",
			`rules.seccomp.mode: "warn": expected one of enforce, audit, off`},
		{"unknown namespace mode", "rules: {sysctls: {namespaces: {prod: strict}}}\n",
			`rules.sysctls.namespaces.prod: "strict": expected one of enforce, audit, off`},
		{"empty namespace mode", "rules: {sysctls: {namespaces: {prod: \"\"}}}\n",
			`rules.sysctls.namespaces.prod: empty mode`},
		{"bad override namespace", "rules: {sysctls: {namespaces: {Prod: audit}}}\n",
			`rules.sysctls.namespaces: "Prod": expected a Kubernetes namespace name`},
		{"unknown key", "seccomp: {profile-directory: /x}\n", `line 1: unknown key "profile-directory"`},
		{"relative profile dir", "seccomp: {profile-dir: profiles}\n",
			`seccomp.profile-dir: "profiles": expected an absolute path`},
		{"pod without namespace", "seccomp: {exempt: {pods: [debug]}}\n",
			`seccomp.exempt.pods: "debug": expected namespace/name`},
		{"pod with two slashes", "seccomp: {complain: {pods: [a/b/c]}}\n",
			`seccomp.complain.pods: "a/b/c": expected namespace/name`},
		{"bad userns namespace", "user-namespaces: {namespaces: [\"\"]}\n",
			`user-namespaces.namespaces: "": expected a Kubernetes namespace name`},
		{"empty handler", "user-namespaces: {runtime-handlers: [\"\"]}\n", "user-namespaces.runtime-handlers: empty handler"},
		{"hook plugin with index", "validator: {hook-plugins: [\"10 device-injector\"]}\n",
			`validator.hook-plugins: "10 device-injector": expected a plugin name`},
		{"bad sysctl", "validator: {allowed-sysctls: [\"net.*.x\"]}\n",
			`validator.allowed-sysctls: "net.*.x": expected a sysctl name`},
		{"bad device pattern", "validator: {devices: {plugins: {x: [\"/dev/[\"]}}}\n",
			`validator.devices.plugins.x: "/dev/[": expected a path.Match pattern`},
		{"two documents", "rules: {}\n---\nrules: {}\n", "expected a single YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "cfg.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", full, "rules: {seccomp: {mode: warn}}\n", "rules: {x: {}}\n",
		"seccomp: {exempt: {pods: [a/b]}}\n", "validator: {allowed-sysctls: [a.*]}\n", "rules: [1]\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.yaml", "errors name their source")
			return
		}
		for _, r := range Rules {
			assert.Contains(t, []Mode{Enforce, Audit, Off}, cfg.Mode(r, "default"), "every rule has a valid mode")
		}
	})
}
