package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

// annotatedConfig maps the annotations of device-injector and
// sidecar-order to them, as the shipped configurations do, and lets
// device-injector add the device nodes it injects in plugin mode.
const annotatedConfig = `rules: {annotated-plugins: {namespaces: {audited: audit}}}
validator:
  annotation-plugins: {cdi-devices.nri-suite.io: 10-device-injector, cdi.k8s.io: 10-device-injector, sidecar-order.nri-suite.io: 20-sidecar-order}
  devices: {plugins: {10-device-injector: ["/dev/*"]}}
`

// nullSpec is a CDI spec of /dev/null, as example.com/dev=null.
const nullSpec = `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    deviceNodes: [{path: /dev/example-null, hostPath: /dev/null, type: c, major: 1, minor: 3}]
`

// refusedFor is the validator's reason for a container whose annotation
// key asks for plugin, which is not connected.
func refusedFor(container, plugin, key string) string {
	return rejected + container + ": rule annotated-plugins: plugin " + plugin + " is not connected, and the pod's annotations " +
		"ask it to act on this container (validator.annotation-plugins): refused rather than created without it: " + key
}

// TestAnnotatedPlugins: while device-injector is not connected (not yet
// started, or gone as when its DaemonSet pod is replaced), a pod that asks it
// for a CDI device is refused with the reason, not created without the
// device; pods that ask nothing of it are created. Once it is connected the
// pod gets its device.
func TestAnnotatedPlugins(t *testing.T) {
	n := startNode(t, nodeOptions{config: annotatedConfig})
	const device = "example.com/dev=null"
	gpu := map[string]string{"cdi-devices.nri-suite.io/container.app": device}
	for _, tc := range []struct {
		name, namespace string
		annotations     map[string]string
		wantErr         string
		wantAudit       bool
	}{
		{name: "suite-key", namespace: "default", annotations: gpu,
			wantErr: refusedFor("default/suite-key/app", "10-device-injector", "cdi-devices.nri-suite.io/container.app")},
		{name: "standard-key", namespace: "default", annotations: map[string]string{"cdi.k8s.io/claim": device},
			wantErr: refusedFor("default/standard-key/app", "10-device-injector", "cdi.k8s.io/claim")},
		{name: "sidecars", namespace: "default", annotations: map[string]string{"sidecar-order.nri-suite.io/sidecars": "proxy"},
			wantErr: refusedFor("default/sidecars/app", "20-sidecar-order", "sidecar-order.nri-suite.io/sidecars")},
		{name: "plain", namespace: "default"},
		{name: "another-container", namespace: "default", annotations: map[string]string{"cdi-devices.nri-suite.io/container.web": device}},
		{name: "audited", namespace: "audited", annotations: gpu, wantAudit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.create(t, podYAML(tc.namespace, tc.name, tc.annotations))
			if tc.wantErr != "" {
				require.Error(t, err, "created without the plugin it asks for")
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			audits := n.logged(t, "audit: would refuse", map[string]any{"pod": tc.name, "rule": "annotated-plugins"})
			if tc.wantAudit {
				assert.Len(t, audits, 1)
			} else {
				assert.Empty(t, audits)
			}
		})
	}

	specs := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specs, "null.yaml"), []byte(nullSpec), 0o644))
	injector := n.rt.StartPlugin(t, harness.BuildPlugin(t, "./plugins/device-injector"), "10", "device-injector",
		harness.WithConfig(fmt.Sprintf("mode: plugin\nspec-dirs: [%s]\n", specs)),
		harness.WithArgs("--log-level", "debug", "--http-addr", "127.0.0.1:0", "--sysfs-root", t.TempDir()))
	spec, err := n.create(t, podYAML("default", "connected", gpu))
	require.NoError(t, err)
	assert.True(t, hasDevice(spec, "/dev/example-null"), "device-injector gave the container its device")

	injector.Stop(t)
	// NRI lists a plugin that went away until a request finds it gone
	// (README: the first creation after it can get through): find that out
	// with pods of the audited namespace, which are created either way. The
	// second at the latest calls no plugin that is gone.
	for probe := 0; ; probe++ {
		require.Less(t, probe, 2, "NRI still lists device-injector after a creation found it gone")
		name := fmt.Sprintf("probe-%d", probe)
		_, err := n.create(t, podYAML("audited", name, gpu))
		require.NoError(t, err)
		if len(n.logged(t, "audit: would refuse", map[string]any{"pod": name, "rule": "annotated-plugins"})) == 1 {
			break
		}
	}
	_, err = n.create(t, podYAML("default", "rolling", gpu))
	require.Error(t, err, "created without its device while device-injector is away")
	assert.Contains(t, err.Error(), refusedFor("default/rolling/app", "10-device-injector", "cdi-devices.nri-suite.io/container.app"))
	injector.Restart(t)
	spec, err = n.create(t, podYAML("default", "back", gpu))
	require.NoError(t, err)
	assert.True(t, hasDevice(spec, "/dev/example-null"))
}

func hasDevice(spec *rspec.Spec, path string) bool {
	for _, d := range spec.Linux.Devices {
		if d.Path == path {
			return true
		}
	}
	return false
}
