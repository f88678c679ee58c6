package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

// privilegedPod is a one-container pod whose container ("app") has the
// security context sc (YAML flow), with extra lines of the container's
// spec, and the host's /dev as a volume it may mount.
func privilegedPod(namespace, name, sc string, annotations map[string]string, ctrLines ...string) string {
	return podWithContainer(namespace, name, annotations, []string{"volumes: [{name: dev, hostPath: {path: /dev}}]"},
		append([]string{"securityContext: " + sc}, ctrLines...))
}

const privilegedConfig = `
seccomp:
  privileged: {namespaces: {strict: profile, tenants: refuse}}
`

// TestPrivileged: a privileged container is left unconfined, as containerd
// and CRI-O leave it, unless seccomp.privileged says otherwise; a pod that
// only looks privileged is confined.
func TestPrivileged(t *testing.T) {
	n := startNode(t, nodeOptions{config: privilegedConfig})
	lookAlike := map[string]string{"io.kubernetes.cri-o.Privileged": "true", "privileged.nri-suite.io": "true"}
	for _, tc := range []struct {
		name, namespace string
		privileged      bool
		annotations     map[string]string
		ctrLines        []string
		sc              string // the container's security context, when not just privileged
		wantConfined    bool
		wantErr         string
		wantLog         string
	}{
		{name: "csi-node", namespace: "kube-system", privileged: true, wantLog: "left unconfined"},
		{name: "plain", namespace: "kube-system", wantConfined: true},
		{name: "look-alike", namespace: "kube-system", annotations: lookAlike, wantConfined: true,
			ctrLines: []string{"volumeMounts: [{name: dev, mountPath: /dev}]"}},
		{name: "with-sys-admin", namespace: "kube-system", wantConfined: true, sc: "{capabilities: {add: [SYS_ADMIN]}}"},
		{name: "strict", namespace: "strict", privileged: true, wantConfined: true},
		{name: "refused", namespace: "tenants", privileged: true,
			wantErr: `security rule seccomp refused container tenants/refused/app: the container is privileged, and seccomp.privileged is refuse for namespace "tenants"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.sc
			if sc == "" {
				sc = fmt.Sprintf("{privileged: %v}", tc.privileged)
			}
			spec, err := n.create(t, privilegedPod(tc.namespace, tc.name, sc, tc.annotations, tc.ctrLines...))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.wantConfined {
				require.NotNil(t, spec.Linux.Seccomp, "pod %s is confined", tc.name)
				assert.Equal(t, "SCMP_ACT_ERRNO", string(spec.Linux.Seccomp.DefaultAction))
			} else {
				assert.Nil(t, spec.Linux.Seccomp, "pod %s is left unconfined", tc.name)
			}
			if tc.wantLog != "" {
				assert.Len(t, n.logged(t, tc.wantLog, map[string]any{"pod": tc.name, "rule": "seccomp", "reason": "privileged"}), 1)
			}
		})
	}
}

const hostNamespacesConfig = `
rules:
  user-namespace: {namespaces: {tenants-audit: audit}}
  host-namespaces: {namespaces: {locked: enforce, quiet: "off"}}
user-namespaces:
  namespaces: [tenants, tenants-audit, agents]
`

// TestHostNamespaces: pods that must have a user namespace may not share the
// host's network, PID or IPC namespace; and host-namespaces judges what a
// pod asks for itself only where a namespace enforces it.
func TestHostNamespaces(t *testing.T) {
	n := startNode(t, nodeOptions{config: hostNamespacesConfig})
	for _, tc := range []struct {
		namespace, field string
		hostUsers        bool
		wantErr          string
		wantAudit        string // the rule of the one audit line expected
	}{
		{namespace: "tenants", field: "hostNetwork", wantErr: `security rule user-namespace refused container tenants/hostnetwork/app: ` +
			`namespace "tenants" requires a user namespace (hostUsers: false), and a pod with one may not share the host's namespaces: ` +
			`hostNetwork: true (network namespace: no namespace of its own)`},
		{namespace: "tenants", field: "hostPID", wantErr: `hostPID: true (pid namespace: no namespace of its own)`},
		{namespace: "tenants", field: "hostIPC", wantErr: `hostIPC: true (ipc namespace: no namespace of its own)`},
		{namespace: "tenants-audit", field: "hostNetwork", wantAudit: "user-namespace"},
		{namespace: "locked", field: "hostNetwork", hostUsers: true, wantErr: `security rule host-namespaces refused container locked/hostnetwork/app: ` +
			`the pod shares the host's namespaces: hostNetwork: true (network namespace: no namespace of its own)`},
		{namespace: "default", field: "hostPID", hostUsers: true, wantAudit: "host-namespaces"},
		{namespace: "quiet", field: "hostIPC", hostUsers: true},
	} {
		name := map[string]string{"hostNetwork": "hostnetwork", "hostPID": "hostpid", "hostIPC": "hostipc"}[tc.field]
		t.Run(tc.namespace+"/"+name, func(t *testing.T) {
			_, err := n.create(t, podYAML(tc.namespace, name, nil, fmt.Sprintf("hostUsers: %v", tc.hostUsers), tc.field+": true"))
			audits := n.logged(t, "audit: would refuse the container", map[string]any{"pod": name, "namespace": tc.namespace, "rule": tc.wantAudit})
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.wantAudit == "" {
				assert.Empty(t, n.logged(t, "would refuse", map[string]any{"pod": name, "namespace": tc.namespace}))
				return
			}
			assert.Len(t, audits, 1, "one audit line of rule %s", tc.wantAudit)
		})
	}
}

const handlerConfig = `
runtime-handlers: [runc-alt]
rules:
  seccomp: {runtime-handlers: {runc-alt: "off"}}
  user-namespace: {runtime-handlers: {runc-alt: "off"}}
user-namespaces: {namespaces: [tenants]}
`

// TestRuntimeHandler: a rule scoped to a runtime handler applies to that
// handler's pods only, and beats the pod's namespace.
func TestRuntimeHandler(t *testing.T) {
	def := startNode(t, nodeOptions{config: handlerConfig})
	alt := startNode(t, nodeOptions{config: handlerConfig, runtime: []harness.Option{
		harness.WithNode(kubepod.Config{RuntimeHandler: "runc-alt"})}})

	spec, err := def.create(t, podYAML("default", "web", nil))
	require.NoError(t, err)
	assert.NotNil(t, spec.Linux.Seccomp, "the default handler's pods get the default profile")
	spec, err = alt.create(t, podYAML("default", "web", nil))
	require.NoError(t, err)
	assert.Nil(t, spec.Linux.Seccomp, "seccomp is off for runc-alt")

	_, err = def.create(t, podYAML("tenants", "shared-kernel", nil))
	assert.ErrorContains(t, err, `namespace "tenants" requires a user namespace`)
	_, err = alt.create(t, podYAML("tenants", "sandboxed", nil))
	assert.NoError(t, err, "no user-namespace requirement for runc-alt, even in tenants")
}

// TestPluginIdentity: a plugin registered under the name of one that policy
// trusts gets none of its trust. Each case failed before the validator
// judged identities: the name was all it checked.
func TestPluginIdentity(t *testing.T) {
	testPlugin := harness.BuildPlugin(t, testPluginPkg)
	for _, tc := range []struct {
		index, name, weaken string
		wantErr             []string
	}{
		{index: "55", name: "security", weaken: weakenAll, wantErr: []string{
			"rule plugin-identity: plugin 55-security registered under the name of a plugin the policy trusts: 55-security besides the trusted 40-security",
			"rule oci-hooks: plugin 55-security added OCI hooks",
			"rule seccomp-adjustment: plugin 55-security set a seccomp policy (default action SCMP_ACT_ERRNO) that lets through system calls the runtime default denies",
			"rule host-namespaces: plugin 55-security took the container into the host's namespaces",
			"rule sysctls: plugin 55-security set sysctls outside the safe set",
			"rule devices: plugin 55-security added devices outside validator.devices"}},
		{index: "55", name: "device-injector", weaken: "env: {}\nweaken: {devices: [{path: /dev/mem, type: c, major: 1, minor: 1}]}\n",
			wantErr: []string{
				"rule devices: plugin 55-device-injector added devices outside validator.devices (allowed and plugins.55-device-injector): /dev/mem",
				"rule plugin-identity: plugin 55-device-injector registered under the name of a plugin the policy trusts: " +
					"55-device-injector besides the trusted 10-device-injector"}},
		{index: "55", name: "topology-aware", weaken: "env: {}\n", wantErr: []string{
			"rule required-plugins: node is missing plugins that validator.required-plugins requires: 30-topology-aware",
			"rule plugin-identity: plugin 55-topology-aware registered under the name of a plugin the policy trusts"}},
	} {
		t.Run(tc.index+"-"+tc.name, func(t *testing.T) {
			// The chart's shipped validator config, and a required plugin.
			n := startNode(t, nodeOptions{config: `validator:
  devices: {plugins: {10-device-injector: ["*/*", "/dev/*", "/dev/*/*"]}}
  required-plugins: [30-topology-aware]
`})
			n.rt.StartPlugin(t, testPlugin, tc.index, tc.name, harness.WithConfig(tc.weaken))
			_, err := n.create(t, podYAML("default", "victim", nil, "securityContext: {seccompProfile: {type: RuntimeDefault}}"))
			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// TestProfileSymlinkOutOfDirectory: a profile that is a symlink to a file
// outside the profile directory is not a profile of the directory: a pod
// naming it is refused. Before, the link was followed and the file applied.
func TestProfileSymlinkOutOfDirectory(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "allow-all.json")
	require.NoError(t, os.WriteFile(outside, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644))
	n := startNode(t, nodeOptions{config: "seccomp: {profile-dir: \"{{profiles}}\"}\n",
		profiles: map[string]string{"inside.json": denyMkdir}})
	require.NoError(t, os.Symlink(outside, filepath.Join(n.profiles, "escape.json")))
	require.NoError(t, os.Symlink("inside.json", filepath.Join(n.profiles, "alias.json")))
	const key = "seccomp.nri-suite.io/pod"
	require.Eventually(t, func() bool {
		_, err := n.create(t, podYAML("default", fmt.Sprintf("alias-%d", time.Now().UnixNano()), map[string]string{key: "alias.json"}))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "a link inside the directory is a profile")

	_, err := n.create(t, podYAML("default", "escape", map[string]string{key: "escape.json"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `annotation seccomp.nri-suite.io/pod="escape.json": want a valid profile in `)
}

// TestTolerateMissingPlugins: the annotation that lets a pod start while
// security is absent (containerd's required-plugins validator) is the
// suite's and the node administrator's only.
func TestTolerateMissingPlugins(t *testing.T) {
	n := startNode(t, nodeOptions{config: "rules: {tolerate-missing-plugins: {namespaces: {nri-suite: \"off\"}}}\n"})
	const key = "tolerate-missing-plugins.nri-suite.io"
	for _, tc := range []struct {
		namespace   string
		annotations map[string]string
		wantErr     string
	}{
		{namespace: "default", annotations: map[string]string{key: "true"},
			wantErr: `security rule tolerate-missing-plugins refused container default/pod-0/app: annotation ` + key + `="true" would let the pod start ` +
				`without the security plugin (containerd's required-plugins validator): it is allowed in static pods and where rules.tolerate-missing-plugins is off only`},
		{namespace: "default", annotations: map[string]string{key + "/container.app": "false"}, wantErr: `annotation ` + key + `/container.app="false"`},
		{namespace: "nri-suite", annotations: map[string]string{key: "true"}},
		{namespace: "kube-system", annotations: map[string]string{key + "/pod": "true", "kubernetes.io/config.source": "file"}},
		{namespace: "default", annotations: map[string]string{key: "true", "kubernetes.io/config.source": "api"}, wantErr: "rules.tolerate-missing-plugins"},
		{namespace: "default"},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			_, err := n.create(t, podYAML(tc.namespace, "pod-0", tc.annotations))
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestMadeToLookPrivileged: a plugin that runs before security and gives
// an unprivileged container the signs of privilege (every device allowed,
// /sys writable) does not get it left unconfined: the validator sees the
// container as the runtime made it. Only the seccomp rule is on, so that
// the refusal is this check's and not the device-cgroups or mounts rule's.
func TestMadeToLookPrivileged(t *testing.T) {
	config := "rules:\n"
	for _, r := range []string{"device-cgroups", "mounts", "host-namespaces", "plugin-identity"} {
		config += "  " + r + ": \"off\"\n"
	}
	n := startNode(t, nodeOptions{config: config})
	n.rt.StartPlugin(t, harness.BuildPlugin(t, testPluginPkg), "35", "e2e-test", harness.WithConfig(`env: {}
weaken:
  deviceCgroups: [{type: a, access: rwm}]
  mounts: [{source: sysfs, destination: /sys, type: sysfs, options: [nosuid, rw]}]
`))
	_, err := n.create(t, podYAML("default", "dressed-up", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), rejected+"default/dressed-up/app: rule seccomp: a plugin made the container look privileged")
	assert.Len(t, n.logged(t, "left unconfined", map[string]any{"pod": "dressed-up", "reason": "privileged"}), 1,
		"security's CreateContainer saw the plugin's changes")
}
