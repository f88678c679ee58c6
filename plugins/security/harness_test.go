package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/security/internal/seccomp"
)

const (
	pluginPkg     = "./plugins/security"
	testPluginPkg = "./e2e/testplugin"
	// the validator's rejection as NRI's adaptation reports it
	rejected = `validator "40-security" rejected container adjustment, reason: security validator refused container `
)

func TestMain(m *testing.M) { harness.Main(m) }

// denyMkdir is an OCI/Docker profile, as the Security Profiles Operator
// writes them, that denies only mkdir.
const denyMkdir = `{"defaultAction": "SCMP_ACT_ALLOW",
 "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}`

// node is a harness runtime with the security plugin, and optionally the
// e2e test plugin (index 50) as "the other plugin".
type node struct {
	rt       *harness.Runtime
	security *harness.Plugin
	profiles string // the profile directory
}

type nodeOptions struct {
	config     string // the security plugin's; {{profiles}} is the profile directory
	profiles   map[string]string
	fifos      []string // FIFOs made in the profile directory, by name
	testPlugin string   // the e2e test plugin's config; empty: not started
	runtime    []harness.Option
	logLevel   string   // the security plugin's; default debug
	args       []string // more flags of the security plugin
}

func startNode(t testing.TB, o nodeOptions) *node {
	t.Helper()
	dir := t.TempDir()
	for name, content := range o.profiles {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	for _, name := range o.fifos {
		require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o644))
	}
	n := &node{rt: harness.New(t, o.runtime...), profiles: dir}
	if o.logLevel == "" {
		o.logLevel = "debug"
	}
	n.security = n.rt.StartPlugin(t, harness.BuildPlugin(t, pluginPkg), "40", "security",
		harness.WithConfig(strings.ReplaceAll(o.config, "{{profiles}}", dir)),
		harness.WithArgs(append([]string{"--log-level", o.logLevel, "--log-format", "json", "--http-addr", "127.0.0.1:0"}, o.args...)...))
	if o.testPlugin != "" {
		n.rt.StartPlugin(t, harness.BuildPlugin(t, testPluginPkg), "50", "e2e-test", harness.WithConfig(o.testPlugin))
	}
	return n
}

// podYAML is a one-container pod ("app") with the given annotations and
// extra spec lines.
func podYAML(namespace, name string, annotations map[string]string, spec ...string) string {
	return podWithContainer(namespace, name, annotations, spec, nil)
}

// podWithContainer is podYAML with extra lines of the container's spec too.
func podWithContainer(namespace, name string, annotations map[string]string, spec, container []string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  uid: uid-%s-%s\n", name, namespace, namespace, name)
	if len(annotations) > 0 {
		s += "  annotations:\n"
		for k, v := range annotations {
			s += fmt.Sprintf("    %s: %q\n", k, v)
		}
	}
	s += "spec:\n"
	for _, line := range spec {
		s += "  " + line + "\n"
	}
	s += "  containers:\n  - name: app\n    image: busybox\n"
	for _, line := range container {
		s += "    " + line + "\n"
	}
	return s
}

// create runs the pod's sandbox and creates its container, returning the
// creation's error and the container's spec when it was created.
func (n *node) create(t testing.TB, manifest string) (*rspec.Spec, error) {
	t.Helper()
	p := n.rt.NewPod(t, harness.ParsePod(t, manifest))
	require.NoError(t, n.rt.RunPodSandbox(p))
	c := p.Container("app")
	if err := n.rt.CreateContainer(c); err != nil {
		return nil, err
	}
	return c.Spec().Spec, nil
}

// logEntry is one JSON log line of the plugin.
type logEntry map[string]any

// logged returns the plugin's log lines whose message contains msg and
// whose fields include every one of fields.
func (n *node) logged(t *testing.T, msg string, fields map[string]any) []logEntry {
	t.Helper()
	var out []logEntry
	sc := bufio.NewScanner(strings.NewReader(n.security.Log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // the harness's own lines
		}
		m, _ := e["msg"].(string)
		ok := strings.Contains(m, msg)
		for k, v := range fields {
			ok = ok && fmt.Sprint(e[k]) == fmt.Sprint(v)
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// syscallAction is the action of the first rule naming name, "" if none.
func syscallAction(s *rspec.LinuxSeccomp, name string) rspec.LinuxSeccompAction {
	for _, sc := range s.Syscalls {
		if slices.Contains(sc.Names, name) {
			return sc.Action
		}
	}
	return ""
}

const seccompConfig = `
rules:
  seccomp: {mode: enforce, namespaces: {audited: audit, ignored: "off"}}
seccomp:
  profile-dir: "{{profiles}}"
  exempt: {namespaces: [exempt]}
  complain: {pods: [default/complain]}
  extra-rules: [{names: [userfaultfd], action: SCMP_ACT_ERRNO, errno: EPERM}]
`

func TestSeccomp(t *testing.T) {
	n := startNode(t, nodeOptions{config: seccompConfig, profiles: map[string]string{
		"deny-mkdir.json": denyMkdir, "broken.json": `{"defaultAction": "SCMP_ACT_NOPE"}`}})
	const named = "seccomp.nri-suite.io/container.app"
	for _, tc := range []struct {
		name, namespace string
		annotations     map[string]string
		spec            []string
		// wantDefault is the default action of the applied policy, "" for none.
		wantDefault rspec.LinuxSeccompAction
		wantMkdir   rspec.LinuxSeccompAction
		wantErr     string
		wantCause   string // what the store said, after wantErr
		wantLog     string
	}{
		{name: "unconfined", namespace: "default", wantDefault: "SCMP_ACT_ERRNO", wantMkdir: "SCMP_ACT_ALLOW",
			wantLog: "applied the seccomp profile"},
		{name: "named", namespace: "default", annotations: map[string]string{named: "deny-mkdir.json"},
			wantDefault: "SCMP_ACT_ALLOW", wantMkdir: "SCMP_ACT_ERRNO", wantLog: "applied the seccomp profile"},
		{name: "complain", namespace: "default", annotations: map[string]string{named: "deny-mkdir.json"},
			wantDefault: "SCMP_ACT_ALLOW", wantMkdir: "SCMP_ACT_LOG"},
		{name: "runtime-default", namespace: "default", spec: []string{"securityContext: {seccompProfile: {type: RuntimeDefault}}"}},
		{name: "exempt", namespace: "exempt", wantLog: "left unconfined"},
		{name: "missing", namespace: "default", annotations: map[string]string{named: "nope.json"},
			wantErr:   `security rule seccomp refused container default/missing/app: building seccomp profile nope.json: annotation seccomp.nri-suite.io/container.app="nope.json": want a valid profile in `,
			wantCause: "seccomp profile not found"},
		{name: "invalid", namespace: "default", annotations: map[string]string{named: "broken.json"},
			wantErr:   `building seccomp profile broken.json: annotation seccomp.nri-suite.io/container.app="broken.json"`,
			wantCause: "invalid seccomp profile"},
		{name: "escape", namespace: "default", annotations: map[string]string{"seccomp.nri-suite.io/pod": "../etc/x.json"},
			wantErr:   `annotation seccomp.nri-suite.io/pod="../etc/x.json"`,
			wantCause: `invalid seccomp profile name "../etc/x.json": contains ".."`},
		// Was ignored: the container ran with the default profile, not the one it named.
		{name: "unknown-suffix", namespace: "default", annotations: map[string]string{"seccomp.nri-suite.io/containers.app": "deny-mkdir.json"},
			wantErr:   `security rule seccomp refused container default/unknown-suffix/app: annotation seccomp.nri-suite.io/containers.app="deny-mkdir.json": `,
			wantCause: "want a key of the form seccomp.nri-suite.io, seccomp.nri-suite.io/pod or seccomp.nri-suite.io/container.<name>"},
		{name: "missing-audited", namespace: "audited", annotations: map[string]string{named: "nope.json"},
			wantLog: "audit: would refuse the container"},
		{name: "unconfined-audited", namespace: "audited", wantLog: "audit: would apply the seccomp profile"},
		{name: "missing-off", namespace: "ignored", annotations: map[string]string{named: "nope.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := n.create(t, podYAML(tc.namespace, tc.name, tc.annotations, tc.spec...))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), tc.wantCause)
				assert.Len(t, n.logged(t, "refused the container", map[string]any{"pod": tc.name, "rule": "seccomp"}), 1)
				return
			}
			require.NoError(t, err)
			if tc.wantDefault == "" {
				assert.Nil(t, spec.Linux.Seccomp, "no policy applied")
			} else {
				require.NotNil(t, spec.Linux.Seccomp)
				assert.Equal(t, tc.wantDefault, spec.Linux.Seccomp.DefaultAction)
				assert.Equal(t, tc.wantMkdir, syscallAction(spec.Linux.Seccomp, "mkdir"))
				wantExtra := rspec.LinuxSeccompAction("SCMP_ACT_ERRNO")
				if tc.name == "complain" {
					wantExtra = "SCMP_ACT_LOG"
				}
				assert.Equal(t, wantExtra, syscallAction(spec.Linux.Seccomp, "userfaultfd"), "extra rules are merged")
				if tc.name == "unconfined" {
					// NRI passes no capabilities: the profile is the runtime
					// default's for the runtime's default capability set.
					assert.Equal(t, rspec.LinuxSeccompAction("SCMP_ACT_ALLOW"), syscallAction(spec.Linux.Seccomp, "chroot"), "CAP_SYS_CHROOT is a default capability")
					assert.Empty(t, syscallAction(spec.Linux.Seccomp, "mount"), "CAP_SYS_ADMIN is not")
				}
			}
			if tc.wantLog != "" {
				assert.Len(t, n.logged(t, tc.wantLog, map[string]any{"pod": tc.name, "namespace": tc.namespace,
					"container": "app", "rule": "seccomp"}), 1, "one line per decision")
			}
		})
	}
}

// TestProfileDirectoryWatched: a profile written while the plugin runs is
// loaded without a restart.
func TestProfileDirectoryWatched(t *testing.T) {
	n := startNode(t, nodeOptions{config: "seccomp: {profile-dir: \"{{profiles}}\"}\n"})
	late := map[string]string{"seccomp.nri-suite.io/pod": "late.json"}
	_, err := n.create(t, podYAML("default", "before", late))
	require.ErrorContains(t, err, "seccomp profile not found")

	require.NoError(t, os.WriteFile(filepath.Join(n.profiles, "late.json"), []byte(denyMkdir), 0o644))
	attempt := 0
	var spec *rspec.Spec
	require.Eventually(t, func() bool {
		attempt++
		spec, err = n.create(t, podYAML("default", fmt.Sprintf("after-%d", attempt), late))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the profile written at run time was never loaded")
	assert.Equal(t, rspec.LinuxSeccompAction("SCMP_ACT_ERRNO"), syscallAction(spec.Linux.Seccomp, "mkdir"))
}

// TestProfileDirectoryWithFIFOs: FIFOs named like profiles, there at start
// or made while the plugin runs, are invalid profiles naming what they are:
// the plugin registers, and the directory's watch goes on loading the
// profiles written after them. (Opened without O_NONBLOCK, a FIFO blocks
// until a writer appears: at start, the plugin never registered; later,
// every reload stopped.)
func TestProfileDirectoryWithFIFOs(t *testing.T) {
	n := startNode(t, nodeOptions{config: "seccomp: {profile-dir: \"{{profiles}}\"}\n",
		profiles: map[string]string{"deny-mkdir.json": denyMkdir}, fifos: []string{"a-stuck.json"}})
	spec, err := n.create(t, podYAML("default", "early", map[string]string{"seccomp.nri-suite.io/pod": "deny-mkdir.json"}))
	require.NoError(t, err)
	assert.Equal(t, rspec.LinuxSeccompAction("SCMP_ACT_ERRNO"), syscallAction(spec.Linux.Seccomp, "mkdir"))
	_, err = n.create(t, podYAML("default", "stuck", map[string]string{"seccomp.nri-suite.io/pod": "a-stuck.json"}))
	assert.ErrorContains(t, err, "reading "+filepath.Join(n.profiles, "a-stuck.json")+": it is a named pipe (FIFO): not a regular file")

	require.NoError(t, syscall.Mkfifo(filepath.Join(n.profiles, "b-stuck.json"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(n.profiles, "late.json"), []byte(denyMkdir), 0o644))
	late := map[string]string{"seccomp.nri-suite.io/pod": "late.json"}
	attempt := 0
	require.Eventually(t, func() bool {
		attempt++
		_, err := n.create(t, podYAML("default", fmt.Sprintf("late-%d", attempt), late))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "a profile written after a FIFO was never loaded")
	_, err = n.create(t, podYAML("default", "stuck-later", map[string]string{"seccomp.nri-suite.io/pod": "b-stuck.json"}))
	assert.ErrorContains(t, err, "not a regular file")
}

const usernsConfig = `
runtime-handlers: [kata]
rules:
  user-namespace: {namespaces: {audited: audit, ignored: "off"}}
user-namespaces:
  namespaces: [tenants, audited]
  runtime-handlers: [kata]
`

func TestUserNamespace(t *testing.T) {
	n := startNode(t, nodeOptions{config: usernsConfig})
	for _, tc := range []struct {
		namespace string
		hostUsers bool
		wantErr   string
		wantLog   string
	}{
		{namespace: "tenants", hostUsers: true, wantErr: `security rule user-namespace refused container tenants/pod-true/app: ` +
			`namespace "tenants" requires a user namespace (hostUsers: false), and the pod runs in the host's user namespace: set spec.hostUsers: false`},
		{namespace: "tenants", hostUsers: false},
		{namespace: "default", hostUsers: true},
		{namespace: "audited", hostUsers: true, wantLog: "audit: would refuse the container"},
		{namespace: "ignored", hostUsers: true},
	} {
		name := fmt.Sprintf("pod-%v", tc.hostUsers)
		t.Run(tc.namespace+"/"+name, func(t *testing.T) {
			spec, err := n.create(t, podYAML(tc.namespace, name, nil, fmt.Sprintf("hostUsers: %v", tc.hostUsers)))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, spec)
			if tc.wantLog != "" {
				assert.Len(t, n.logged(t, tc.wantLog, map[string]any{"pod": name, "namespace": tc.namespace,
					"container": "app", "rule": "user-namespace"}), 1)
			}
		})
	}

	t.Run("runtime handler", func(t *testing.T) {
		kata := startNode(t, nodeOptions{config: usernsConfig, runtime: []harness.Option{
			harness.WithNode(kubepod.Config{RuntimeHandler: "kata"})}})
		_, err := kata.create(t, podYAML("default", "vm", nil, "hostUsers: true"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `runtime handler "kata" requires a user namespace`)
		_, err = kata.create(t, podYAML("default", "vm-userns", nil, "hostUsers: false"))
		assert.NoError(t, err)
	})
}

// weakenAll makes the test plugin weaken every victim pod in every way the
// validator judges. Victims ask for RuntimeDefault so that the security
// plugin leaves their seccomp to the test plugin.
var weakenAll = `env: {}
weaken:
  hooks: [/bin/true]
  seccomp: {defaultAction: SCMP_ACT_ERRNO, syscalls: [{names: [mount], action: SCMP_ACT_ALLOW}]}
  namespaces: [{type: network, path: ` + hostNet + `}]
  sysctls: {kernel.msgmax: "65536"}
  devices: [{path: /dev/mem, type: c, major: 1, minor: 1}]
  deviceCgroups: [{type: b, major: 8, minor: 0, access: rwm}]
  mounts: [{source: /, destination: /host, type: bind, options: [rbind]}]
  cgroupsPath: /
  oomScoreAdj: -1000
  env: {LD_PRELOAD: /tmp/evil.so}
  rlimits: [{type: RLIMIT_NOFILE, soft: 1073741824, hard: 1073741824}]
`

// hostNet is the host's network namespace: the test's own, which the
// plugins it starts share.
var hostNet = fmt.Sprintf("/proc/%d/ns/net", os.Getpid())

// validatorRules and, per rule, what its refusal says.
var validatorRules = []struct{ rule, reason string }{
	{"oci-hooks", "rule oci-hooks: plugin 50-e2e-test added OCI hooks and is not in validator.hook-plugins: /bin/true"},
	{"seccomp-adjustment", "rule seccomp-adjustment: plugin 50-e2e-test set a seccomp policy (default action SCMP_ACT_ERRNO) that lets through system calls the runtime default denies: mount"},
	{"host-namespaces", "rule host-namespaces: plugin 50-e2e-test took the container into the host's namespaces: network at " + hostNet + " (the host's)"},
	{"sysctls", "rule sysctls: plugin 50-e2e-test set sysctls outside the safe set and validator.allowed-sysctls: kernel.msgmax=65536"},
	{"devices", "rule devices: plugin 50-e2e-test added devices outside validator.devices (allowed and plugins.50-e2e-test): /dev/mem"},
	{"device-cgroups", "rule device-cgroups: a plugin added device-cgroup rules outside validator.device-cgroups.allowed"},
	{"mounts", "rule mounts: plugin 50-e2e-test added mounts that reach the host"},
	{"cgroups-path", "rule cgroups-path: plugin 50-e2e-test moved the container out of its pod's cgroup"},
	{"oom-score-adj", "rule oom-score-adj: plugin 50-e2e-test lowered the container's OOM score adjustment"},
	{"env", "rule env: plugin 50-e2e-test set environment variables that make the loader or the C library load code"},
	{"rlimits", "rule rlimits: plugin 50-e2e-test raised rlimits above validator.rlimits.max"},
	{"required-plugins", "rule required-plugins: node is missing plugins that validator.required-plugins requires: 30-topology-aware"},
}

// TestValidator runs every validator rule in each mode in one runtime: each
// rule is off except in its own namespaces <rule>-enforce and <rule>-audit.
func TestValidator(t *testing.T) {
	config := "rules:\n  seccomp: {mode: \"off\"}\n"
	for _, r := range validatorRules {
		config += fmt.Sprintf("  %s: {mode: \"off\", namespaces: {%[1]s-enforce: enforce, %[1]s-audit: audit}}\n", r.rule)
	}
	config += "validator: {required-plugins: [30-topology-aware, 50-e2e-test]}\n"
	n := startNode(t, nodeOptions{config: config, testPlugin: weakenAll})
	runtimeDefault := "securityContext: {seccompProfile: {type: RuntimeDefault}}"

	for _, r := range validatorRules {
		for _, mode := range []string{"enforce", "audit", "off"} {
			ns := r.rule + "-" + mode
			t.Run(ns, func(t *testing.T) {
				spec, err := n.create(t, podYAML(ns, "victim", nil, runtimeDefault))
				audits := n.logged(t, "audit: would refuse", map[string]any{"namespace": ns, "rule": r.rule})
				if mode == "enforce" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), rejected+ns+"/victim/app: "+r.reason)
					assert.Len(t, n.logged(t, "refused", map[string]any{"namespace": ns, "pod": "victim", "rule": r.rule}), 1)
					return
				}
				require.NoError(t, err, "mode %s lets the container through", mode)
				require.NotNil(t, spec.Hooks, "the test plugin's changes are in the spec")
				if mode == "off" {
					assert.Empty(t, audits)
					return
				}
				require.Len(t, audits, 1, "one audit line")
				a := audits[0]
				assert.Equal(t, "victim", a["pod"])
				assert.Equal(t, "app", a["container"])
				assert.EqualValues(t, 1, a["count"])
				if r.rule != "required-plugins" && r.rule != "device-cgroups" { // NRI names nobody for either
					assert.Equal(t, "50-e2e-test", a["plugin"])
				}
			})
		}
	}
}

// TestValidatorAllowsWhatPolicyAllows: the same changes pass when the
// configuration allows them, and the security plugin's own seccomp policy
// is not judged as another plugin's.
func TestValidatorAllowsWhatPolicyAllows(t *testing.T) {
	n := startNode(t, nodeOptions{testPlugin: "env: {}\nweaken:\n  hooks: [/bin/true]\n  sysctls: {net.core.somaxconn: \"1024\"}\n" +
		"  devices: [{path: /dev/fuse, type: c, major: 10, minor: 229}]\n",
		config: `validator:
  hook-plugins: [50-e2e-test]
  allowed-sysctls: [net.core.*]
  devices: {plugins: {50-e2e-test: [/dev/fuse]}}
  required-plugins: [50-e2e-test, 40-security]
seccomp: {complain: {namespaces: [default]}}
`})
	spec, err := n.create(t, podYAML("default", "allowed", nil))
	require.NoError(t, err)
	require.NotNil(t, spec.Linux.Seccomp)
	assert.Equal(t, rspec.LinuxSeccompAction("SCMP_ACT_LOG"), spec.Linux.Seccomp.DefaultAction,
		"the plugin's complain-mode policy is not refused by its own validator")
	assert.Equal(t, "1024", spec.Linux.Sysctl["net.core.somaxconn"])
	assert.Empty(t, n.logged(t, "refuse", nil))
}

// routesConfig enforces every validator rule and lets the test plugin mount
// any host path up to three levels deep, so that the routes to the host are
// refused as routes, not as paths outside the policy. The seccomp rule is
// off: the security plugin would otherwise set the victims' policy itself.
const routesConfig = `rules: {seccomp: {mode: "off"}}
validator:
  mounts: {plugins: {50-e2e-test: ["/*", "/*/*", "/*/*/*"]}}
`

// weakenVictim creates a pod while the test plugin weakens it as weaken (a
// YAML mapping) says, and returns the creation's error.
func (n *node) weakenVictim(t *testing.T, pod, weaken string) error {
	t.Helper()
	n.rt.StartPlugin(t, harness.BuildPlugin(t, testPluginPkg), "50", "e2e-test", harness.WithConfig("env: {}\nweaken: "+weaken+"\n"))
	_, err := n.create(t, podYAML("default", pod, nil))
	return err
}

// runtimeDefaultDenied is what the validator reports of a policy that lets
// through every syscall the runtime default denies: the first ten and a count.
func runtimeDefaultDenied(t *testing.T) string {
	b, err := seccomp.NewBaseline("", seccomp.DefaultCapabilities)
	require.NoError(t, err)
	all := b.LetsThrough(nil)
	require.Greater(t, len(all), 10)
	return fmt.Sprintf("%s and %d more", strings.Join(all[:10], ", "), len(all)-10)
}

// foreignSyscalls are syscalls of another architecture than the node's.
func foreignSyscalls() string {
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "386" {
		return "[arm_fadvise64_64, arm_sync_file_range, breakpoint, cacheflush, set_tls]"
	}
	return "[arch_prctl, iopl, ioperm, modify_ldt, vm86]"
}

// TestValidatorRefusesRoutesToTheHost: each way another plugin can hand a
// container the host, or weaken its seccomp policy with denies that deny
// nothing, is refused with the reason, in the default all-enforce rules.
func TestValidatorRefusesRoutesToTheHost(t *testing.T) {
	n := startNode(t, nodeOptions{config: routesConfig})
	const (
		other   = "plugin 50-e2e-test "
		cgroups = "rule device-cgroups: a plugin added device-cgroup rules outside validator.device-cgroups.allowed " +
			"(NRI records no owner of device-cgroup rules: which plugin added them cannot be named): "
		mounts = "rule mounts: " + other + "added mounts that reach the host (kernel file systems, host paths outside " +
			"validator.mounts allowed and plugins.50-e2e-test, or on the host's routes): "
		lets = "rule seccomp-adjustment: " + other + "set a seccomp policy (default action %s) that lets through system calls the runtime default denies: "
	)
	allDenied := runtimeDefaultDenied(t)
	for _, tc := range []struct{ name, weaken, reason string }{
		{"allow-all-devices", "{deviceCgroups: [{type: a, access: rwm}]}", cgroups + "a *:* rwm"},
		{"block-device", "{deviceCgroups: [{type: b, major: 8, minor: 0, access: rwm}]}", cgroups + "b 8:0 rwm"},
		{"bind-dev", "{mounts: [{source: /dev, destination: /host-dev, type: bind, options: [rbind]}]}",
			mounts + "/dev at /host-dev (the host's /dev: only a pattern naming it exactly allows it)"},
		{"bind-dev-mem", "{mounts: [{source: /dev/mem, destination: /dev/mem, type: bind, options: [bind]}]}",
			mounts + "/dev/mem at /dev/mem (under the host's /dev: only a pattern naming it exactly allows it)"},
		{"bind-root", "{mounts: [{source: /, destination: /host, type: bind, options: [rbind]}]}",
			mounts + "/ at /host (the host's root: only a pattern naming it exactly allows it)"},
		{"bind-containerd-socket", "{mounts: [{source: /run/containerd/containerd.sock, destination: /run/c.sock, options: [bind]}]}",
			mounts + "/run/containerd/containerd.sock at /run/c.sock (under the host's /run/containerd: only a pattern naming it exactly allows it)"},
		{"bind-outside-policy", "{mounts: [{source: /opt/a/b/c, destination: /c, type: bind}]}",
			mounts + "/opt/a/b/c at /c (not in validator.mounts)"},
		{"devtmpfs", "{mounts: [{source: devtmpfs, destination: /host-dev, type: devtmpfs}]}",
			mounts + "devtmpfs at /host-dev (a kernel file system: it reaches the host whatever the policy)"},
		{"cgroups-path-root", "{cgroupsPath: /}",
			"rule cgroups-path: " + other + "moved the container out of its pod's cgroup, and so out of the pod's limits: / (the pod's cgroup: /kubepods/besteffort/poduid-default-cgroups-path-root)"},
		{"oom-score-adj", "{oomScoreAdj: -1000}",
			"rule oom-score-adj: " + other + "lowered the container's OOM score adjustment, so that the OOM killer takes other processes first: -1000 (the container had 1000)"},
		{"ld-preload", "{env: {LD_PRELOAD: /tmp/evil.so}}",
			"rule env: " + other + "set environment variables that make the loader or the C library load code, denied by validator.env (and not allowed by plugins.50-e2e-test): LD_PRELOAD"},
		{"rlimit-nofile", "{rlimits: [{type: RLIMIT_NOFILE, soft: 1073741824, hard: 1073741824}]}",
			"rule rlimits: " + other + "raised rlimits above validator.rlimits.max, or above what the container had for types without a maximum: " +
				"RLIMIT_NOFILE soft 1073741824 hard 1073741824 (maximum 1048576)"},
		{"seccomp-unknown-names", "{seccomp: {defaultAction: SCMP_ACT_ALLOW, syscalls: [{names: [no_such_syscall, kexec-load], action: SCMP_ACT_ERRNO}]}}",
			fmt.Sprintf(lets, "SCMP_ACT_ALLOW") + allDenied},
		{"seccomp-empty-names", `{seccomp: {defaultAction: SCMP_ACT_ALLOW, syscalls: [{names: [""], action: SCMP_ACT_KILL_PROCESS}]}}`,
			fmt.Sprintf(lets, "SCMP_ACT_ALLOW") + allDenied},
		{"seccomp-other-architecture", "{seccomp: {defaultAction: SCMP_ACT_ALLOW, syscalls: [{names: " + foreignSyscalls() + ", action: SCMP_ACT_ERRNO}]}}",
			fmt.Sprintf(lets, "SCMP_ACT_ALLOW") + allDenied},
		{"seccomp-explicit-allows", "{seccomp: {defaultAction: SCMP_ACT_ERRNO, syscalls: [{names: [ptrace, mount, bpf], action: SCMP_ACT_ALLOW}]}}",
			fmt.Sprintf(lets, "SCMP_ACT_ERRNO") + "bpf, mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := n.weakenVictim(t, tc.name, tc.weaken)
			require.Error(t, err, "the validator let the container through")
			assert.Contains(t, err.Error(), rejected+"default/"+tc.name+"/app: "+tc.reason)
		})
	}
}

// TestValidatorAllowsRoutesPolicyAllows: what the policy allows passes, and
// what only takes away (deny rules, removals, a higher OOM score, lower
// rlimits, a cgroup inside the pod's, the runtime default) is not judged.
func TestValidatorAllowsRoutesPolicyAllows(t *testing.T) {
	n := startNode(t, nodeOptions{config: `rules: {seccomp: {mode: "off"}}
validator:
  mounts: {plugins: {50-e2e-test: [/opt/drivers/*, /dev/fuse, /var/lib/kubelet/pod-resources]}}
  device-cgroups: {allowed: ["c 10:229 rwm"]}
  env: {plugins: {50-e2e-test: [LD_LIBRARY_PATH]}}
  rlimits: {max: {RLIMIT_MEMLOCK: 65536}}
`})
	err := n.weakenVictim(t, "allowed", `
  deviceCgroups: [{type: c, major: 10, minor: 229, access: rw}, {deny: true, type: a, access: rwm}]
  mounts:
  - {source: /opt/drivers/lib, destination: /usr/lib/drivers, type: bind, options: [rbind, ro]}
  - {source: /dev/fuse, destination: /dev/fuse, type: bind}
  - {source: /var/lib/kubelet/pod-resources, destination: /pr, type: bind}
  - {source: tmpfs, destination: /scratch, type: tmpfs}
  cgroupsPath: /kubepods/besteffort/poduid-default-allowed/app
  oomScoreAdj: 1000
  env: {LD_LIBRARY_PATH: /usr/lib/drivers, PATH: /bin}
  rlimits: [{type: RLIMIT_MEMLOCK, soft: 65536, hard: 65536}, {type: RLIMIT_NOFILE, soft: 1024, hard: 1048576}]
  seccomp:
    defaultAction: SCMP_ACT_ERRNO
    syscalls: [{names: [read, write, exit_group], action: SCMP_ACT_ALLOW}]`)
	require.NoError(t, err)
	assert.Empty(t, n.logged(t, "refuse", nil))
}

// TestUnansweredRequestFailsClosed: while the plugin does not answer (its
// process stopped), the runtime fails the container's creation instead of
// creating it unchecked after the request's timeout (NRI's failure policy,
// which the plugin asks for at registration). Without its validator, which
// would refuse the container after the timeout anyway, nothing else does.
func TestUnansweredRequestFailsClosed(t *testing.T) {
	n := startNode(t, nodeOptions{args: []string{"--validator=false"}})
	_, err := n.create(t, podYAML("default", "checked", nil, ""))
	require.NoError(t, err)

	pid := n.security.PID()
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	_, err = n.create(t, podYAML("default", "unchecked", nil, ""))
	require.Error(t, err, "no container the plugin did not check")
	assert.Contains(t, err.Error(), "plugin 40-security failed to handle CreateContainer request")
}
