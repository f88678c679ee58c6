package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/deployments"
	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestRealNode is issue 5's acceptance on a real runtime: the security
// plugin and the e2e test plugin (as "another plugin") external to the
// runtime or launched by containerd itself (sandbox.Variants), pods made
// through raw CRI so that a refusal comes back as the CRI error the kubelet
// would get (a kubelet only logs it and retries), and user namespaces can be
// set per pod. One sandbox per variant carries the steps:
//
//  1. Seccomp: a profile named by annotation that denies mkdir gives
//     "Operation not permitted" where an Unconfined container next to it
//     can mkdir, and that Unconfined container ends up with "Seccomp: 2".
//  2. Complain: the same profile in complain mode lets mkdir through.
//  3. User namespaces: a pod of a namespace that requires one is refused
//     without one and runs with one (on containerd: CRI-O cannot mount sysfs
//     in a user namespace of a host-network pod, the only kind these hosts
//     run without CNI).
//  4. Privileged: a privileged kube-system pod is left unconfined and
//     mounts; a plain and a look-alike pod beside it are confined.
//  5. Host namespaces with user namespaces: hostPID, hostIPC and
//     hostNetwork pods of a namespace that requires a user namespace are
//     refused naming the field, and audited in audit mode.
//  6. RuntimeHandler: a rule off for the second runtime handler leaves its
//     pods alone, and only them.
//  7. Validator: the test plugin adding an OCI hook, then setting seccomp
//     unconfined, then an allow-all device-cgroup rule, a bind mount of
//     the containerd socket and LD_PRELOAD, is refused with the validator's
//     reasons.
//  8. FailClosed: with security stopped, containerd refuses containers but
//     those of pods that tolerate its absence.
//
// CRI-O v1.34.0 vendors an NRI without seccomp adjustments and without
// validation (NRI v0.9.1-0.20250219): there the plugin must leave validation
// out by itself to be accepted at all (it starts with the same flags as on
// containerd); step 1 checks that it fails closed instead, 2 and 4 skip.
func TestRealNode(t *testing.T) {
	sandbox.RunVariants(t, sandbox.Variants(), testRealNode)
}

const (
	nodeNamespace = "sec-test"
	// denyMkdirName is denyMkdir's file in the profile directory.
	denyMkdirName = "deny-mkdir.json"
	// The seccomp rule is only audited in namespace tenants: on CRI-O
	// v1.34.0 it refuses every container (it cannot confine them), which
	// would hide the user-namespace rule.
	nodeConfig = `runtime-handlers: [` + sandbox.AltRuntimeHandler + `]
rules:
  # enforce, not the default, so that CRI-O v1.34 fails closed (it audits
  # there by default).
  seccomp: {mode: enforce, namespaces: {tenants: audit, tenants-audit: audit}, runtime-handlers: {` + sandbox.AltRuntimeHandler + `: "off"}}
  user-namespace: {namespaces: {tenants-audit: audit}}
seccomp:
  profile-dir: %s
  complain: {pods: [%s/complain]}
user-namespaces:
  namespaces: [tenants, tenants-audit]
  # Without CNI these hosts run host-network pods only; step
  # HostNetworkWithUserNamespace restarts the plugin without this.
  allow-host-namespaces: [network]
`
)

type realNode struct {
	t          *testing.T
	ctx        context.Context
	sb         *sandbox.Sandbox
	security   *sandbox.Plugin
	spec       sandbox.PluginSpec // the security plugin's
	testPlugin *sandbox.Plugin
	testBinary string
}

func testRealNode(t *testing.T, v sandbox.Variant) {
	rt := v.Runtime
	sandbox.RequirePrereqs(t, rt)
	opts := v.Options()
	opts.NoKubelet = true
	n := &realNode{t: t, sb: sandbox.NewForTest(t, opts), ctx: sandbox.TestContext(t),
		testBinary: harness.BuildPlugin(t, testPluginPkg)}
	profiles := filepath.Join(n.sb.Dir(), "seccomp-profiles")
	require.NoError(t, os.MkdirAll(profiles, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(profiles, denyMkdirName), []byte(denyMkdir), 0o644))
	// CRI-O v1.34's NRI has neither seccomp adjustments nor validation.
	legacy := rt == "crio"
	n.spec = sandbox.PluginSpec{Binary: harness.BuildPlugin(t, pluginPkg), Name: "security", Idx: "40",
		Config: fmt.Appendf(nil, nodeConfig, profiles, nodeNamespace)}
	n.startSecurity(n.spec.Config)
	n.startTestPlugin("env: {}\n")

	named := map[string]string{"seccomp.nri-suite.io/container.main": denyMkdirName}
	t.Run("Seccomp", func(t *testing.T) {
		if legacy {
			_, err := n.create(t, pod{name: "unconfined", unconfined: true})
			require.Error(t, err)
			assert.Contains(t, criError(err), "security rule seccomp refused container "+nodeNamespace+"/unconfined/main: "+
				"would run unconfined: cannot apply seccomp profile runtime/default: runtime cri-o 1.34.0 drops NRI seccomp policies")
			return
		}
		denied := n.run(t, pod{name: "named", annotations: named})
		out, err := n.sb.CRI().Exec(n.ctx, denied, "mkdir", "/tmp/denied")
		require.Error(t, err, "mkdir under the deny-mkdir profile: %s", out)
		assert.Contains(t, out+err.Error(), "Operation not permitted")

		other := n.run(t, pod{name: "unconfined", unconfined: true})
		_, err = n.sb.CRI().Exec(n.ctx, other, "mkdir", "/tmp/allowed")
		require.NoError(t, err, "mkdir in a container without the profile")
		status, err := n.sb.ProcStatus(n.ctx, other)
		require.NoError(t, err)
		assert.Equal(t, "2", status["Seccomp"], "the Unconfined container runs with the runtime default filter")
	})
	t.Run("Complain", func(t *testing.T) {
		if legacy {
			t.Skip("CRI-O v1.34.0 drops NRI seccomp policies: nothing to complain with (step Seccomp checked the refusal)")
		}
		id := n.run(t, pod{name: "complain", annotations: named})
		_, err := n.sb.CRI().Exec(n.ctx, id, "mkdir", "/tmp/logged")
		require.NoError(t, err, "complain mode logs mkdir instead of denying it")
		status, err := n.sb.ProcStatus(n.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "2", status["Seccomp"], "a filter is installed, with the log action")
	})
	t.Run("UserNamespace", func(t *testing.T) {
		_, err := n.create(t, pod{name: "host-users", namespace: "tenants", runtimeDefault: true})
		require.Error(t, err)
		assert.Contains(t, criError(err), `security rule user-namespace refused container tenants/host-users/main: namespace "tenants" requires a user namespace`)
		withUserns := pod{name: "userns", namespace: "tenants", userns: true, runtimeDefault: true}
		if legacy {
			// The plugin lets it through, but runc cannot mount sysfs in a
			// user namespace that shares the host's network namespace, and
			// without CNI these hosts run host-network pods only.
			_, err := n.create(t, withUserns)
			require.Error(t, err, "CRI-O started a host-network pod in a user namespace: make this step check it")
			assert.NotContains(t, criError(err), "security", "the security plugin let the pod with a user namespace through")
			t.Skipf("CRI-O cannot run a host-network pod in a user namespace here: %s", lastLine(criError(err)))
		}
		id := n.run(t, withUserns)
		uidMap, err := n.sb.ReadFile(n.ctx, id, "/proc/self/uid_map")
		require.NoError(t, err)
		assert.Equal(t, []string{"0", fmt.Sprint(usernsHostID), "65536"}, strings.Fields(uidMap), "the container's uid map")
	})
	t.Run("Privileged", func(t *testing.T) { n.privileged(t, legacy) })
	t.Run("HostNamespacesWithUserNamespace", func(t *testing.T) {
		var impossible []string
		for _, tc := range []struct {
			name, field string
			p           pod
		}{
			{"host-pid", "hostPID", pod{hostPID: true}},
			{"host-ipc", "hostIPC", pod{hostIPC: true}},
		} {
			p := tc.p
			p.name, p.namespace, p.userns, p.runtimeDefault = tc.name, "tenants", true, true
			podConfig, ctrConfig := p.configs(n.sb)
			podID, err := n.sb.CRI().RunPodSandbox(n.ctx, podConfig)
			if err != nil && !legacy {
				// containerd's sandbox container cannot mount /proc or
				// /dev/mqueue in a user namespace that shares the host's PID
				// or IPC namespace: such a pod never gets to its containers.
				impossible = append(impossible, tc.field+": "+lastLine(criError(err)))
				continue
			}
			require.NoError(t, err, "running the sandbox of pod %s", p.name)
			_, err = n.sb.CRI().CreateContainer(n.ctx, podID, ctrConfig, podConfig)
			require.Error(t, err)
			assert.Contains(t, criError(err), `security rule user-namespace refused container tenants/`+tc.name+`/main: `+
				`namespace "tenants" requires a user namespace (hostUsers: false), and a pod with one may not share the host's namespaces: `+
				tc.field+`: true`)
		}
		if len(impossible) == 2 {
			t.Skipf("the runtime cannot run these pods' sandboxes at all (the harness checks the refusal): %s", strings.Join(impossible, "; "))
		}
	})
	t.Run("HostNetworkWithUserNamespace", func(t *testing.T) {
		n.startSecurity([]byte(strings.Replace(string(n.spec.Config), "allow-host-namespaces: [network]", "", 1)))
		defer n.startSecurity(n.spec.Config)
		_, err := n.create(t, pod{name: "host-net", namespace: "tenants", userns: true, runtimeDefault: true})
		require.Error(t, err)
		assert.Contains(t, criError(err), `security rule user-namespace refused container tenants/host-net/main: `+
			`namespace "tenants" requires a user namespace (hostUsers: false), and a pod with one may not share the host's namespaces: `+
			`hostNetwork: true (network namespace: `)

		audited := map[string]string{"rule": "user-namespace", "outcome": "audited"}
		before := n.decisions(t, audited)
		_, err = n.create(t, pod{name: "host-net", namespace: "tenants-audit", userns: true, runtimeDefault: true})
		if err != nil {
			// The plugin let it through; CRI-O cannot run it (step UserNamespace).
			assert.NotContains(t, criError(err), "security rule", "audit mode let the pod through")
		}
		assert.Equal(t, before+1, n.decisions(t, audited), "audit mode counts the pod it would refuse")
	})
	t.Run("RuntimeHandler", func(t *testing.T) {
		// rules.seccomp is off for the second handler only.
		alt := n.run(t, pod{name: "alt-handler", unconfined: true, handler: sandbox.AltRuntimeHandler})
		status, err := n.sb.ProcStatus(n.ctx, alt)
		require.NoError(t, err)
		assert.Equal(t, "0", status["Seccomp"], "the rule is off for pods of the second runtime handler")
		if legacy {
			_, err := n.create(t, pod{name: "default-handler", unconfined: true})
			require.Error(t, err, "on the default handler the rule applies: it fails closed on CRI-O v1.34")
			assert.Contains(t, criError(err), "security rule seccomp refused container")
			return
		}
		def := n.run(t, pod{name: "default-handler", unconfined: true})
		status, err = n.sb.ProcStatus(n.ctx, def)
		require.NoError(t, err)
		assert.Equal(t, "2", status["Seccomp"], "on the default handler the rule applies")
	})
	t.Run("Validator", func(t *testing.T) {
		if legacy {
			t.Skip("CRI-O v1.34.0's NRI has no validation: the plugin leaves it out there")
		}
		n.startTestPlugin("env: {}\nweaken: {pods: [hooked], hooks: [/bin/true]}\n")
		_, err := n.create(t, pod{name: "hooked", runtimeDefault: true})
		require.Error(t, err)
		assert.Contains(t, criError(err), rejected+nodeNamespace+"/hooked/main: rule oci-hooks: plugin 50-e2e-test added OCI hooks "+
			"and is not in validator.hook-plugins: /bin/true")

		n.startTestPlugin("env: {}\nweaken: {pods: [loosened], seccompUnconfined: true}\n")
		_, err = n.create(t, pod{name: "loosened", runtimeDefault: true})
		require.Error(t, err)
		assert.Contains(t, criError(err), rejected+nodeNamespace+"/loosened/main: rule seccomp-adjustment: plugin 50-e2e-test "+
			"set a seccomp policy (default action SCMP_ACT_ALLOW) that lets through system calls the runtime default denies: ")

		n.startTestPlugin("env: {}\nweaken: {pods: [routed], deviceCgroups: [{type: a, access: rwm}], env: {LD_PRELOAD: /tmp/evil.so}, " +
			"mounts: [{source: /run/containerd/containerd.sock, destination: /run/c.sock, type: bind, options: [rbind]}]}\n")
		_, err = n.create(t, pod{name: "routed", runtimeDefault: true})
		require.Error(t, err)
		for _, reason := range []string{
			rejected + nodeNamespace + "/routed/main: rule device-cgroups: a plugin added device-cgroup rules outside validator.device-cgroups.allowed",
			"rule mounts: plugin 50-e2e-test added mounts that reach the host", "/run/containerd/containerd.sock at /run/c.sock (not in validator.mounts)",
			"rule env: plugin 50-e2e-test set environment variables that make the loader or the C library load code",
		} {
			assert.Contains(t, criError(err), reason)
		}
	})
	// Fail closed: with security stopped, as after a crash, containerd
	// (its shipped drop-in's NRI default validator) refuses the next
	// container, naming security; a pod with the tolerate annotation, as the
	// suite's own pods have, starts unconfined; once security runs again,
	// the next container is confined. CRI-O v1.34.0 has no NRI validation: it runs the container
	// unconfined (deployments/crio/README.md says so).
	t.Run("FailClosed", func(t *testing.T) {
		n.security.Stop(5 * time.Second)
		if legacy {
			id := n.run(t, pod{name: "unguarded", unconfined: true})
			assert.Equal(t, "0", n.seccompMode(t, id), "CRI-O v1.34.0 runs the container without security, unconfined")
		} else {
			_, err := n.create(t, pod{name: "unguarded", unconfined: true})
			require.Error(t, err, "containerd created a container while security was stopped")
			assert.Contains(t, criError(err), `validator "00-default-validator" rejected container adjustment, reason: `+
				`validation error: required plugin "security" not present`)
		}
		suite := n.run(t, pod{name: "suite", unconfined: true, annotations: map[string]string{deployments.TolerateMissingPlugins: "true"}})
		assert.Equal(t, "0", n.seccompMode(t, suite), "the tolerating pod ran without security")

		n.security = nil
		n.startSecurity(n.spec.Config)
		if legacy {
			_, err := n.create(t, pod{name: "guarded", unconfined: true})
			assert.Contains(t, criError(err), "security rule seccomp refused container "+nodeNamespace+"/guarded/main", "security is back")
			return
		}
		assert.Equal(t, "2", n.seccompMode(t, n.run(t, pod{name: "guarded", unconfined: true})), "security confines the next container")
	})
}

// seccompMode is the Seccomp field of /proc/self/status in container id:
// "0" unconfined, "2" under a filter.
func (n *realNode) seccompMode(t *testing.T, id string) string {
	t.Helper()
	status, err := n.sb.ProcStatus(n.ctx, id)
	require.NoError(t, err)
	return status["Seccomp"]
}

// startSecurity (re)starts the security plugin with config.
func (n *realNode) startSecurity(config []byte) {
	n.t.Helper()
	if n.security != nil {
		n.security.Stop(5 * time.Second)
	}
	spec := n.spec
	spec.Config = config
	p, err := n.sb.StartPlugin(spec)
	require.NoError(n.t, err)
	require.NoError(n.t, p.WaitReady(n.ctx))
	n.security = p
}

// decisions is the security plugin's nri_suite_security_decisions_total
// with labels.
func (n *realNode) decisions(t *testing.T, labels map[string]string) float64 {
	t.Helper()
	// Launched by the runtime, the plugin is relaunched (on a new port)
	// whenever another plugin's start restarts the runtime.
	require.NoError(t, n.security.WaitReady(n.ctx))
	v, err := sandbox.MetricValue(n.ctx, "http://"+n.security.HTTPAddr()+"/metrics", "nri_suite_security_decisions_total", labels)
	require.NoError(t, err)
	return v
}

// privileged is step Privileged: a privileged kube-system pod is left as
// the runtimes leave it (unconfined, mounts work) and counted; an
// unprivileged pod beside it gets the default profile, and so does one that
// tries to look privileged (annotations, the host's /dev, a device, an added
// capability).
func (n *realNode) privileged(t *testing.T, legacy bool) {
	counted := map[string]string{"rule": "seccomp", "outcome": "exempt", "reason": "privileged"}
	before := n.decisions(t, counted)
	id, err := n.create(t, pod{name: "csi-node", namespace: "kube-system", privileged: true})
	assert.Equal(t, before+1, n.decisions(t, counted), "the privileged container is counted as left unconfined")
	if legacy {
		// CRI-O gives a privileged container every capability it knows;
		// these hosts lack CAP_SYS_RESOURCE, so runc cannot apply them.
		require.Error(t, err, "CRI-O ran a privileged container here: make this step check it")
		assert.NotContains(t, criError(err), "security", "the security plugin refused the privileged container")
		t.Logf("CRI-O cannot run a privileged container on this host: %s", lastLine(criError(err)))
	} else {
		require.NoError(t, err)
		require.NoError(t, n.sb.CRI().StartContainer(n.ctx, id))
		status, err := n.sb.ProcStatus(n.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "0", status["Seccomp"], "no filter is loaded into the privileged container")
		out, err := n.sb.CRI().Exec(n.ctx, id, "sh", "-c", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && grep -c ' /tmp/m tmpfs' /proc/mounts")
		require.NoError(t, err, "mounting a tmpfs in the privileged container: %s", out)
		assert.Equal(t, "1", strings.TrimSpace(out))
	}

	for _, p := range []pod{
		{name: "plain", namespace: "kube-system", unconfined: true},
		{name: "look-alike", namespace: "kube-system", unconfined: true, lookAlike: true},
	} {
		if legacy {
			_, err := n.create(t, p)
			require.Error(t, err, "pod %s: CRI-O v1.34 cannot confine it, so it is refused", p.name)
			assert.Contains(t, criError(err), "security rule seccomp refused container kube-system/"+p.name+"/main: would run unconfined")
			continue
		}
		id := n.run(t, p)
		status, err := n.sb.ProcStatus(n.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "2", status["Seccomp"], "pod %s gets the runtime default profile", p.name)
		out, err := n.sb.CRI().Exec(n.ctx, id, "sh", "-c", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m")
		assert.Error(t, err, "pod %s mounted a tmpfs: %s", p.name, out)
	}
}

// startTestPlugin (re)starts the e2e test plugin with config. Launched by
// the runtime, that restarts the runtime, which launches both plugins again.
func (n *realNode) startTestPlugin(config string) {
	n.t.Helper()
	if n.testPlugin != nil {
		n.testPlugin.Stop(5 * time.Second)
	}
	p, err := n.sb.StartPlugin(sandbox.PluginSpec{Binary: n.testBinary, Name: "e2e-test", Idx: "50", Config: []byte(config)})
	require.NoError(n.t, err)
	require.NoError(n.t, p.WaitReady(n.ctx))
	n.testPlugin = p
}

// usernsHostID is where a user-namespace pod's uid and gid 0 sit on the host.
const usernsHostID = 1 << 20

// pod is a one-container ("main") host-network pod made through raw CRI.
type pod struct {
	name, namespace  string
	annotations      map[string]string
	unconfined       bool   // seccomp Unconfined, as the kubelet asks without a profile
	runtimeDefault   bool   // seccomp RuntimeDefault
	userns           bool   // a user namespace with 65536 ids from usernsHostID
	privileged       bool   // privileged, as the kubelet asks for securityContext.privileged
	hostPID, hostIPC bool   // the host's PID or IPC namespace
	handler          string // the runtime handler; "" for the default
	// lookAlike dresses an unprivileged pod up as privileged: annotations
	// that say so, the host's /dev bound in, a device and CAP_SYS_ADMIN.
	lookAlike bool
}

// lookAlikeAnnotations are what a pod might set to pass for privileged.
var lookAlikeAnnotations = map[string]string{"io.kubernetes.cri-o.Privileged": "true", "privileged": "true",
	"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}

// configs are the CRI PodSandboxConfig and ContainerConfig of p, in their
// JSON form.
func (p pod) configs(sb *sandbox.Sandbox) (podConfig, ctrConfig map[string]any) {
	ns := p.namespace
	if ns == "" {
		ns = nodeNamespace
	}
	// Host network (2, NODE) and a PID namespace per container (1,
	// CONTAINER), as runRawCRIPod in e2e/runtime explains.
	options := map[string]any{"network": 2, "pid": 1}
	if p.hostPID {
		options["pid"] = 2
	}
	if p.hostIPC {
		options["ipc"] = 2
	}
	if p.userns {
		ids := []map[string]any{{"host_id": usernsHostID, "container_id": 0, "length": 65536}}
		options["userns_options"] = map[string]any{"mode": 0, "uids": ids, "gids": ids}
	}
	annotations := p.annotations
	if p.lookAlike {
		annotations = lookAlikeAnnotations
	}
	podConfig = map[string]any{
		"metadata":    map[string]any{"name": p.name, "namespace": ns, "uid": fmt.Sprintf("sec-%d", rand.Uint32()), "attempt": 0},
		"annotations": annotations,
		"linux": map[string]any{
			"cgroup_parent":    sb.CgroupRoot() + "/" + p.name,
			"security_context": map[string]any{"namespace_options": options, "privileged": p.privileged},
		},
	}
	security := map[string]any{"namespace_options": options, "privileged": p.privileged}
	if p.lookAlike {
		security["capabilities"] = map[string]any{"add_capabilities": []string{"SYS_ADMIN"}}
	}
	switch {
	case p.unconfined:
		security["seccomp"] = map[string]any{"profile_type": 1}
	case p.runtimeDefault:
		security["seccomp"] = map[string]any{"profile_type": 0}
	}
	ctrConfig = map[string]any{
		"metadata": map[string]any{"name": "main"},
		"image":    map[string]any{"image": sandbox.BusyboxImage},
		"command":  []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"},
		"labels":   map[string]string{sandbox.LabelContainerName: "main"},
		"linux":    map[string]any{"security_context": security},
	}
	if p.lookAlike {
		ctrConfig["annotations"] = lookAlikeAnnotations
		ctrConfig["mounts"] = []map[string]any{{"container_path": "/host/dev", "host_path": "/dev"}}
		ctrConfig["devices"] = []map[string]any{{"container_path": "/dev/xnull", "host_path": "/dev/null", "permissions": "rwm"}}
	}
	return podConfig, ctrConfig
}

// criError is the runtime's error as crictl reports it, unquoted.
func criError(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), `\"`, `"`)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// create runs p's sandbox and creates its container: the error is the CRI
// error of the container's creation.
func (n *realNode) create(t *testing.T, p pod) (string, error) {
	t.Helper()
	podConfig, ctrConfig := p.configs(n.sb)
	podID, err := n.sb.CRI().RunPodSandboxOn(n.ctx, podConfig, p.handler)
	require.NoError(t, err, "running the sandbox of pod %s", p.name)
	return n.sb.CRI().CreateContainer(n.ctx, podID, ctrConfig, podConfig)
}

// run creates and starts p's container and returns its id.
func (n *realNode) run(t *testing.T, p pod) string {
	t.Helper()
	id, err := n.create(t, p)
	require.NoError(t, err, "creating the container of pod %s", p.name)
	require.NoError(t, n.sb.CRI().StartContainer(n.ctx, id))
	return id
}
