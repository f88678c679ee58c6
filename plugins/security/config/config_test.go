package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/quote"
)

const full = `
runtime-handlers: [kata, runc2]
rules:
  seccomp: {mode: enforce, namespaces: {kube-system: "off", staging: audit}}
  oci-hooks: {mode: audit}
  required-plugins: {namespaces: {kube-system: "off"}}
  annotated-plugins: {namespaces: {kube-system: "off", staging: audit}}
  user-namespace: {runtime-handlers: {kata: "off"}}
  host-namespaces: {mode: audit, namespaces: {tenants: enforce}, runtime-handlers: {runc2: "off"}}
seccomp:
  profile-dir: /etc/nri-suite/seccomp
  exempt: {namespaces: [kube-system], pods: [default/debug]}
  complain: {namespaces: [staging], pods: [default/try]}
  extra-rules:
  - {names: [userfaultfd], action: SCMP_ACT_ERRNO, errno: EPERM}
  privileged: {namespaces: {tenants: refuse}, runtime-handlers: {runc2: profile}}
  namespace-profiles: {team-a: ["team-a/*"], "*": [common.json]}
user-namespaces:
  namespaces: [tenants]
  runtime-handlers: [runc2]
  allow-host-namespaces: [network]
validator:
  hook-plugins: [10-device-injector]
  allowed-sysctls: [kernel.msgmax, net.core.*]
  devices:
    allowed: [/dev/fuse]
    plugins: {10-device-injector: ["/dev/dri/*", "example.com/gpu=*"]}
  mounts:
    plugins: {20-sidecar-order: [/opt/nri-suite/bin/*]}
  device-cgroups: {allowed: ["c 10:* rw"]}
  env: {denied: [SECRET_*], plugins: {30-topology-aware: [LD_BIND_NOW]}}
  rlimits: {max: {RLIMIT_MEMLOCK: 65536}}
  required-plugins: [30-topology-aware]
  annotation-plugins: {cdi-devices.nri-suite.io: 10-device-injector, cdi.k8s.io: 10-device-injector, sidecar-order.nri-suite.io: 20-sidecar-order}
`

func ns(namespace string) Scope { return Scope{Namespace: namespace, Pod: "p"} }

func TestParse(t *testing.T) {
	cfg, err := Parse([]byte(full), "cfg.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		rule  Rule
		scope Scope
		want  Mode
	}{
		{RuleSeccomp, ns("default"), Enforce},
		{RuleSeccomp, ns("kube-system"), Off},
		{RuleSeccomp, ns("staging"), Audit},
		{RuleOCIHooks, ns("default"), Audit},
		{RuleRequiredPlugins, ns("kube-system"), Off},
		{RuleRequiredPlugins, ns("default"), Enforce},
		{RuleSysctls, ns("anything"), Enforce},
		{RuleAnnotatedPlugins, ns("default"), Enforce},
		{RuleAnnotatedPlugins, ns("kube-system"), Off},
		{RuleAnnotatedPlugins, ns("staging"), Audit},
		{RuleUserNamespace, Scope{Namespace: "tenants", RuntimeHandler: "kata"}, Off},
		{RuleUserNamespace, Scope{Namespace: "tenants", RuntimeHandler: "runc2"}, Enforce},
		{RuleHostNamespaces, ns("tenants"), Enforce},
		{RuleHostNamespaces, Scope{Namespace: "tenants", RuntimeHandler: "runc2"}, Off /* the handler beats the namespace */},
		{RuleHostNamespaces, Scope{Namespace: "default", RuntimeHandler: "undeclared"}, Audit},
	} {
		assert.Equal(t, tc.want, cfg.Mode(tc.rule, tc.scope), "%s in %+v", tc.rule, tc.scope)
	}
	assert.True(t, cfg.DefaultMode(RuleSysctls, ns("x")), "not set: the built-in default")
	assert.False(t, cfg.DefaultMode(RuleOCIHooks, ns("x")), "rules.oci-hooks.mode is set")
	assert.False(t, cfg.DefaultMode(RuleSeccomp, ns("staging")), "set for the namespace")
	assert.True(t, cfg.DefaultMode(RuleRequiredPlugins, ns("default")), "set for another namespace only")
	_, explicit := cfg.ExplicitMode(RuleHostNamespaces, ns("default"))
	assert.False(t, explicit, "only the rule's default applies in default")
	mode, explicit := cfg.ExplicitMode(RuleHostNamespaces, ns("tenants"))
	assert.True(t, explicit)
	assert.Equal(t, Enforce, mode)

	sc := cfg.Seccomp
	assert.True(t, sc.Exempt.Matches(ns("kube-system")))
	assert.True(t, sc.Exempt.Matches(Scope{Namespace: "default", Pod: "debug"}))
	assert.False(t, sc.Exempt.Matches(Scope{Namespace: "other", Pod: "debug"}))
	assert.True(t, sc.Complain.Matches(Scope{Namespace: "default", Pod: "try"}))
	require.Len(t, sc.ExtraRules, 1)
	assert.Equal(t, []string{"userfaultfd"}, sc.ExtraRules[0].Names)
	assert.Equal(t, PrivilegedUnconfined, sc.Privileged.For(ns("default")), "privileged containers stay unconfined by default")
	assert.Equal(t, PrivilegedRefuse, sc.Privileged.For(ns("tenants")))
	assert.Equal(t, PrivilegedProfile, sc.Privileged.For(Scope{Namespace: "tenants", RuntimeHandler: "runc2"}))
	assert.True(t, sc.MayName("team-a", "team-a/strict.json"))
	assert.True(t, sc.MayName("team-b", "common.json"), `"*" holds for every namespace`)
	assert.False(t, sc.MayName("team-b", "team-a/strict.json"))

	why, ok := cfg.UserNamespaces.Required(ns("tenants"))
	assert.True(t, ok)
	assert.Contains(t, why, `namespace "tenants"`)
	why, ok = cfg.UserNamespaces.Required(Scope{Namespace: "default", RuntimeHandler: "runc2"})
	assert.True(t, ok)
	assert.Contains(t, why, `runtime handler "runc2"`)
	_, ok = cfg.UserNamespaces.Required(Scope{Namespace: "default", RuntimeHandler: "kata"})
	assert.False(t, ok)
	assert.True(t, cfg.UserNamespaces.HostAllowed("network"))
	assert.False(t, cfg.UserNamespaces.HostAllowed("pid"))

	v := cfg.Validator
	assert.True(t, v.SysctlAllowed("net.ipv4.tcp_rmem"), "Kubernetes safe sysctl")
	assert.True(t, v.SysctlAllowed("kernel.msgmax"))
	assert.True(t, v.SysctlAllowed("net.core.somaxconn"), "prefix pattern")
	assert.False(t, v.SysctlAllowed("net.corex"), "a prefix matches whole components")
	assert.False(t, v.SysctlAllowed("kernel.panic"))
	di := NewPluginID("10", "device-injector")
	assert.True(t, v.Devices.Allows("55-anyone", "/dev/fuse"))
	assert.True(t, v.Devices.Allows(di, "/dev/dri/card0"))
	assert.True(t, v.Devices.Allows(di, "example.com/gpu=0"))
	assert.False(t, v.Devices.Allows("55-device-injector", "/dev/dri/card0"), "a name at another index is somebody else")
	assert.False(t, v.Devices.Allows(di, "/dev/mem"))
	assert.True(t, v.Mounts.Allows("20-sidecar-order", "/opt/nri-suite/bin/helper"))
	assert.False(t, v.Mounts.Allows(di, "/opt/nri-suite/bin/helper"))
	assert.True(t, v.DeviceCgroups.Allows(DeviceRule{Type: "c", Major: 10, Minor: 229, Access: "rw"}))
	assert.False(t, v.DeviceCgroups.Allows(DeviceRule{Type: "c", Major: 10, Minor: 229, Access: "rwm"}), "mknod is not allowed")
	assert.False(t, v.DeviceCgroups.Allows(DeviceRule{Type: "a", Major: -1, Minor: -1, Access: "rwm"}))
	assert.False(t, v.Env.Allows(di, "LD_PRELOAD"), "denied by default")
	assert.False(t, v.Env.Allows(di, "SECRET_TOKEN"), "denied by the config")
	assert.True(t, v.Env.Allows("30-topology-aware", "LD_BIND_NOW"), "allowed to that plugin")
	assert.True(t, v.Env.Allows(di, "PATH"))
	limit, ok := v.Rlimits.Ceiling("RLIMIT_MEMLOCK")
	assert.True(t, ok)
	assert.Equal(t, uint64(65536), limit)
	limit, ok = v.Rlimits.Ceiling("RLIMIT_NOFILE")
	assert.True(t, ok, "a default ceiling")
	assert.Equal(t, uint64(1<<20), limit)
	_, ok = v.Rlimits.Ceiling("RLIMIT_RTPRIO")
	assert.False(t, ok)
	assert.Equal(t, map[string]string{"cdi-devices.nri-suite.io": "10-device-injector", "cdi.k8s.io": "10-device-injector",
		"sidecar-order.nri-suite.io": "20-sidecar-order"}, v.AnnotationPlugins)
}

func TestDefault(t *testing.T) {
	for _, data := range []string{"", "# only a comment\n"} {
		cfg, err := Parse([]byte(data), "cfg.yaml")
		require.NoError(t, err)
		for _, r := range Rules {
			assert.Equal(t, Enforce, cfg.Mode(r, ns("default")), "every rule is enforced by default: %s", r)
		}
		assert.Empty(t, cfg.Seccomp.ProfileDir)
		assert.Equal(t, PrivilegedUnconfined, cfg.Seccomp.Privileged.For(ns("default")))
		assert.True(t, cfg.Seccomp.MayName("default", "any.json"), "without namespace-profiles any profile may be named")
		_, ok := cfg.UserNamespaces.Required(Scope{Namespace: "default", RuntimeHandler: "runc"})
		assert.False(t, ok)
		assert.False(t, cfg.Validator.Devices.Allows("10-device-injector", "/dev/null"))
		assert.False(t, cfg.Validator.Mounts.Allows("20-sidecar-order", "/opt/x"))
		assert.Empty(t, cfg.Validator.AnnotationPlugins, "no annotation refuses a pod unless configured: a node without device-injector runs cdi.k8s.io pods")
	}
	assert.Equal(t, Enforce, Default().Mode(RuleDevices, ns("x")))
	cfg, err := Parse([]byte("rules: {oci-hooks: audit}\nseccomp: {privileged: refuse}\n"), "cfg.yaml")
	require.NoError(t, err, "a plain value is the default of a scoped setting")
	assert.Equal(t, Audit, cfg.Mode(RuleOCIHooks, ns("x")))
	assert.Equal(t, PrivilegedRefuse, cfg.Seccomp.Privileged.For(ns("x")))
}

// Only the rule off everywhere contradicts validator.annotation-plugins:
// sparing a namespace or auditing does not, nor off without a map.
func TestAnnotationPluginsModes(t *testing.T) {
	const owned = "validator: {annotation-plugins: {cdi.k8s.io: 10-device-injector}}\n"
	for _, data := range []string{
		owned + "rules: {annotated-plugins: audit}\n",
		owned + "rules: {annotated-plugins: {namespaces: {kube-system: \"off\"}}}\n",
		"rules: {annotated-plugins: \"off\"}\n",
	} {
		_, err := Parse([]byte(data), "cfg.yaml")
		assert.NoError(t, err, data)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown rule", "rules: {seccomp-default: {mode: audit}}\n",
			`config cfg.yaml: rules: unknown rule "seccomp-default": expected one of seccomp, user-namespace, tolerate-missing-plugins, oci-hooks`},
		{"unknown mode", "rules: {seccomp: {mode: warn}}\n",
			`rules.seccomp.mode: "warn": expected one of enforce, audit, off`},
		{"unknown namespace mode", "rules: {sysctls: {namespaces: {prod: strict}}}\n",
			`rules.sysctls.namespaces.prod: "strict": expected one of enforce, audit, off`},
		{"empty namespace mode", "rules: {sysctls: {namespaces: {prod: \"\"}}}\n",
			`rules.sysctls.namespaces.prod: empty value: expected one of enforce, audit, off`},
		{"bad override namespace", "rules: {sysctls: {namespaces: {Prod: audit}}}\n",
			`rules.sysctls.namespaces: "Prod": expected a Kubernetes namespace name`},
		{"unknown key", "seccomp: {profile-directory: /x}\n", `line 1: unknown key "seccomp.profile-directory"`},
		{"relative profile dir", "seccomp: {profile-dir: profiles}\n",
			`seccomp.profile-dir: "profiles": expected an absolute path`},
		{"system profile dir", "seccomp: {profile-dir: /etc}\n",
			`seccomp.profile-dir: "/etc" is a system directory`},
		{"unclean profile dir", "seccomp: {profile-dir: /etc/nri-suite/seccomp/}\n",
			`seccomp.profile-dir: "/etc/nri-suite/seccomp/": expected a clean absolute path, such as /etc/nri-suite/seccomp`},
		{"pod without namespace", "seccomp: {exempt: {pods: [debug]}}\n",
			`seccomp.exempt.pods: "debug": expected namespace/name`},
		{"pod with two slashes", "seccomp: {complain: {pods: [a/b/c]}}\n",
			`seccomp.complain.pods: "a/b/c": expected namespace/name`},
		{"bad userns namespace", "user-namespaces: {namespaces: [\"\"]}\n",
			`user-namespaces.namespaces: "": expected a Kubernetes namespace name`},
		{"undeclared userns handler", "user-namespaces: {runtime-handlers: [kata]}\n",
			`user-namespaces.runtime-handlers: unknown runtime handler "kata": expected one declared in runtime-handlers (none declared)`},
		{"undeclared rule handler", "runtime-handlers: [kata]\nrules: {seccomp: {runtime-handlers: {gvisor: \"off\"}}}\n",
			`rules.seccomp.runtime-handlers: unknown runtime handler "gvisor": expected one declared in runtime-handlers (kata)`},
		{"undeclared selector handler", "seccomp: {exempt: {runtime-handlers: [runsc]}}\n",
			`seccomp.exempt.runtime-handlers: unknown runtime handler "runsc"`},
		{"bad handler name", "runtime-handlers: [Kata]\n", `runtime-handlers: "Kata": expected a RuntimeClass handler name`},
		{"handler twice", "runtime-handlers: [kata, kata]\n", `runtime-handlers: "kata": declared twice`},
		{"unknown privileged", "seccomp: {privileged: {mode: allow}}\n",
			`seccomp.privileged.mode: "allow": expected one of unconfined, profile, refuse`},
		{"unknown privileged per namespace", "seccomp: {privileged: {namespaces: {prod: deny}}}\n",
			`seccomp.privileged.namespaces.prod: "deny": expected one of unconfined, profile, refuse`},
		{"privileged scalar", "seccomp: {privileged: deny}\n", `seccomp.privileged.mode: "deny": expected one of unconfined, profile, refuse`},
		{"unknown scoped key", "rules: {seccomp: {namespace: {a: audit}}}\n", `line 1: unknown key "namespace": expected one of mode, namespaces, runtime-handlers`},
		{"userns off where required", "user-namespaces: {namespaces: [tenants]}\nrules: {user-namespace: {namespaces: {tenants: \"off\"}}}\n",
			`rules.user-namespace.namespaces.tenants: off contradicts user-namespaces.namespaces, which asks rule user-namespace to act in tenants`},
		{"userns off everywhere while required", "user-namespaces: {namespaces: [tenants]}\nrules: {user-namespace: \"off\"}\n",
			`rules.user-namespace.mode: off contradicts user-namespaces.namespaces, which asks rule user-namespace to act in tenants`},
		{"userns off for a required handler", "runtime-handlers: [kata]\nuser-namespaces: {runtime-handlers: [kata]}\nrules: {user-namespace: {runtime-handlers: {kata: \"off\"}}}\n",
			`rules.user-namespace.runtime-handlers.kata: off contradicts user-namespaces.runtime-handlers`},
		{"privileged refused where seccomp is off", "runtime-handlers: [kata]\nseccomp: {privileged: {runtime-handlers: {kata: refuse}}}\nrules: {seccomp: {runtime-handlers: {kata: \"off\"}}}\n",
			`rules.seccomp.runtime-handlers.kata: off contradicts seccomp.privileged.runtime-handlers`},
		{"complain where seccomp is off", "seccomp: {complain: {namespaces: [staging]}}\nrules: {seccomp: {namespaces: {staging: \"off\"}}}\n",
			`rules.seccomp.namespaces.staging: off contradicts seccomp.complain.namespaces`},
		{"bad host namespace", "user-namespaces: {allow-host-namespaces: [net]}\n",
			`user-namespaces.allow-host-namespaces: "net": expected one of network, pid, ipc`},
		{"namespace profiles without a directory", "seccomp: {namespace-profiles: {a: [x.json]}}\n",
			"seccomp.namespace-profiles: set without seccomp.profile-dir"},
		{"bad namespace profile pattern", "seccomp: {profile-dir: /p, namespace-profiles: {a: [\"[\"]}}\n",
			`seccomp.namespace-profiles.a: "[": expected a path.Match pattern of profile names`},
		{"hook plugin without index", "validator: {hook-plugins: [device-injector]}\n",
			`validator.hook-plugins: "device-injector": expected a plugin as NRI registers it, a two-digit index, '-' and a name of letters, digits and '_.+-', such as 10-device-injector`},
		// What NRI refuses at registration (api.CheckPluginIndex, api.CheckPluginName) no hook can come from.
		{"hook plugin with a one-digit index", "validator: {hook-plugins: [1-x]}\n", `validator.hook-plugins: "1-x": expected a plugin as NRI registers it`},
		{"hook plugin with a letter index", "validator: {hook-plugins: [1a-x]}\n", `validator.hook-plugins: "1a-x": expected a plugin as NRI registers it`},
		{"hook plugin without a name", "validator: {hook-plugins: [10-]}\n", `validator.hook-plugins: "10-": expected a plugin as NRI registers it`},
		{"hook plugin with a colon", "validator: {hook-plugins: [\"10-my:hooks\"]}\n", `validator.hook-plugins: "10-my:hooks": expected a plugin as NRI registers it`},
		{"hook plugin with a non-ASCII letter", "validator: {hook-plugins: [10-hoøks]}\n", `validator.hook-plugins: "10-hoøks": expected a plugin as NRI registers it`},
		{"hook plugin with a star", "validator: {hook-plugins: [\"10-*\"]}\n", `validator.hook-plugins: "10-*": expected a plugin as NRI registers it`},
		{"hook plugin with a quote", "validator: {hook-plugins: [\"10-it's\"]}\n", `validator.hook-plugins: "10-it's": expected a plugin as NRI registers it`},
		{"env plugin with a space", "validator: {env: {plugins: {\"10-a\\tb\": [X]}}}\n", `validator.env.plugins: "10-a\tb": expected a plugin as NRI registers it`},
		{"mount plugin with a colon", "validator: {mounts: {plugins: {\"20-a:b\": [/x]}}}\n", `validator.mounts.plugins: "20-a:b": expected a plugin as NRI registers it`},
		{"required plugin without index", "validator: {required-plugins: [security]}\n",
			`validator.required-plugins: "security": expected a plugin as NRI registers it`},
		{"device plugin without index", "validator: {devices: {plugins: {device-injector: [/dev/x]}}}\n",
			`validator.devices.plugins: "device-injector": expected a plugin as NRI registers it`},
		{"bad mount pattern", "validator: {mounts: {allowed: [\"/opt/[\"]}}\n",
			`validator.mounts.allowed: "/opt/[": expected a path.Match pattern such as /opt/drivers/*`},
		{"relative mount pattern", "validator: {mounts: {plugins: {20-sidecar-order: [\"run/*\"]}}}\n",
			`validator.mounts.plugins.20-sidecar-order: "run/*": expected a path.Match pattern such as /opt/drivers/* (an absolute host path)`},
		{"bad device-cgroup rule", "validator: {device-cgroups: {allowed: [\"c 10 rwm\"]}}\n",
			`validator.device-cgroups.allowed: "c 10 rwm": expected a device-cgroup rule "type major:minor access"`},
		{"bad device-cgroup access", "validator: {device-cgroups: {allowed: [\"c 1:3 rwx\"]}}\n",
			`validator.device-cgroups.allowed: "c 1:3 rwx"`},
		{"unknown rlimit", "validator: {rlimits: {max: {RLIMIT_FILES: 10}}}\n",
			`validator.rlimits.max: unknown type "RLIMIT_FILES": expected one of RLIMIT_AS`},
		{"bad sysctl", "validator: {allowed-sysctls: [\"net.*.x\"]}\n",
			`validator.allowed-sysctls: "net.*.x": expected a sysctl name`},
		{"bad device pattern", "validator: {devices: {plugins: {10-x: [\"/dev/[\"]}}}\n",
			`validator.devices.plugins.10-x: "/dev/[": expected a path.Match pattern`},
		{"annotation plugin without index", "validator: {annotation-plugins: {cdi.k8s.io: device-injector}}\n",
			`validator.annotation-plugins.cdi.k8s.io: "device-injector": expected a plugin as NRI registers it, a two-digit index`},
		{"annotation plugin empty", "validator: {annotation-plugins: {cdi.k8s.io: \"\"}}\n",
			`validator.annotation-plugins.cdi.k8s.io: "": expected a plugin as NRI registers it`},
		{"empty annotation domain", "validator: {annotation-plugins: {\"\": 10-device-injector}}\n",
			`validator.annotation-plugins: "": expected the domain of annotation keys, such as cdi-devices.nri-suite.io or cdi.k8s.io (lowercase letters, digits, '-' and '.', without '/')`},
		{"annotation domain with a slash", "validator: {annotation-plugins: {cdi.k8s.io/: 10-device-injector}}\n",
			`validator.annotation-plugins: "cdi.k8s.io/": expected the domain of annotation keys`},
		{"annotation key for a domain", "validator: {annotation-plugins: {sidecar-order.nri-suite.io/sidecars: 20-sidecar-order}}\n",
			`validator.annotation-plugins: "sidecar-order.nri-suite.io/sidecars": expected the domain of annotation keys`},
		{"annotation domain in capitals", "validator: {annotation-plugins: {CDI.k8s.io: 10-device-injector}}\n",
			`validator.annotation-plugins: "CDI.k8s.io": expected the domain of annotation keys`},
		{"annotation plugins with the rule off", "validator: {annotation-plugins: {cdi.k8s.io: 10-device-injector}}\nrules: {annotated-plugins: \"off\"}\n",
			`rules.annotated-plugins.mode: off contradicts validator.annotation-plugins, which asks rule annotated-plugins to act: remove one of them`},
		{"two documents", "rules: {}\n---\nrules: {}\n", "expected a single YAML document"},
		{"bad namespace of a megabyte", "seccomp: {exempt: {namespaces: [" + strings.Repeat("X", 1<<20) + "]}}\n",
			`seccomp.exempt.namespaces: "XXXX`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "cfg.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes bounded prefixes")
		})
	}
}

func TestPluginPatternsNames(t *testing.T) {
	p := PluginPatterns{Allowed: []string{"/dev/fuse"}, Plugins: map[string][]string{"10-device-injector": {"/dev/*", "/run/containerd/containerd.sock"}}}
	di := PluginID("10-device-injector")
	assert.True(t, p.Names(di, "/dev/fuse"), "an allowed pattern for every plugin")
	assert.True(t, p.Names(di, "/run/containerd/containerd.sock"))
	assert.False(t, p.Names(di, "/dev/mem"), "matched by a wildcard only")
	assert.True(t, p.Allows(di, "/dev/mem"))
	assert.False(t, p.Names("50-other", "/run/containerd/containerd.sock"), "another plugin's pattern")
	assert.False(t, PluginPatterns{Allowed: []string{"/dev/[m]em"}}.Names(di, "/dev/[m]em"), "a pattern with wildcards names nothing exactly")
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", full, "rules: {seccomp: {mode: warn}}\n", "rules: {x: {}}\n",
		"seccomp: {exempt: {pods: [a/b]}}\n", "validator: {allowed-sysctls: [a.*]}\n", "rules: [1]\n",
		"runtime-handlers: [k]\nrules: {seccomp: {runtime-handlers: {k: \"off\"}}}\n", "validator: {device-cgroups: {allowed: [\"a *:* rwm\"]}}\n",
		"seccomp: {privileged: {mode: refuse}}\n", "seccomp: {profile-dir: /}\n", "seccomp: {profile-dir: /p/../q}\n",
		"validator: {mounts: {allowed: [/run/nri-suite/sidecar-order/*], plugins: {10-device-injector: [/dev/fuse]}}, env: {denied: [X_*]}, rlimits: {max: {RLIMIT_NOFILE: 1}}}\n",
		"validator: {hook-plugins: [10-" + strings.Repeat("x!", 1<<12) + "]}\n", "rules: {" + strings.Repeat("r", 1<<13) + ": audit}\n",
		"validator: {annotation-plugins: {cdi.k8s.io: 10-device-injector, a.b/c: 20-x}}\n",
		"validator: {annotation-plugins: {x: 10-y}}\nrules: {annotated-plugins: {mode: \"off\", namespaces: {a: audit}}}\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.yaml", "errors name their source")
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "errors quote bounded prefixes")
			return
		}
		for _, r := range Rules {
			assert.Contains(t, []Mode{Enforce, Audit, Off}, cfg.Mode(r, ns("default")), "every rule has a valid mode")
		}
		for domain, id := range cfg.Validator.AnnotationPlugins {
			assert.NotContains(t, domain, "/", "a domain matches keys by their prefix")
			assert.NotEmpty(t, PluginID(id).Name(), "a plugin as NRI registers it")
		}
	})
}
