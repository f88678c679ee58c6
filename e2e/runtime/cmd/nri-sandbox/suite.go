package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// knownIdx is the NRI index of each suite plugin (see DESIGN.md: a plugin sees
// the adjustments of lower indexes). Others get 50, 51, ...
var knownIdx = map[string]string{
	"device-injector": "10",
	"sidecar-order":   "20",
	"topology-aware":  "30",
	"security":        "40",
	"stats":           "90",
}

// knownArgs are the plugins' own flags. Whatever a plugin keeps on the node
// goes to its directory in the run dir, never to the host's default
// (/run/nri-suite/<plugin>), so that the sandbox leaves nothing behind.
func knownArgs(name string) []string {
	switch name {
	case "topology-aware", "sidecar-order":
		return []string{"--state-dir", sandbox.PluginDir + "/state"}
	case "stats":
		return []string{"--stats-addr", "127.0.0.1:0"} // a free port: the report finds it in the log
	}
	return nil
}

// The demo device: a CDI spec in the sandbox's spec directory that gives
// /dev/null to containers as /dev/demo-null, with an env variable, so that
// device-injector has something to inject on any machine.
const (
	demoDevice     = "nri-suite.io/demo=null"
	demoDeviceSpec = `cdiVersion: 0.6.0
kind: nri-suite.io/demo
devices:
  - name: "null"
    containerEdits:
      deviceNodes:
        - path: /dev/demo-null
          hostPath: /dev/null
      env:
        - NRI_SUITE_DEMO_DEVICE=null
`
)

// writeDemoDevice installs the demo device's CDI spec in the sandbox.
func writeDemoDevice(sb *sandbox.Sandbox) error {
	path := filepath.Join(sb.CDISpecDir(), "nri-suite-demo.yaml")
	if err := os.WriteFile(path, []byte(demoDeviceSpec), 0o644); err != nil {
		return fmt.Errorf("writing the demo device's CDI spec: %w", err)
	}
	return nil
}

// sandboxConfig is the configuration a suite plugin gets in the sandbox
// when --plugin-config names none: what it needs to find the sandbox's
// paths and to live beside the other plugins (all, the plugins started);
// nil leaves the plugin's defaults.
func sandboxConfig(spec sandbox.PluginSpec, all []sandbox.PluginSpec, sb *sandbox.Sandbox) []byte {
	switch spec.Name {
	case "device-injector":
		return fmt.Appendf(nil, "spec-dirs: [%s]\n", sb.CDISpecDir())
	case "security":
		// The validator refuses devices other plugins add unless allowed:
		// allow device-injector the demo device, by CDI name (runtime mode)
		// and by its path in the container (plugin mode).
		config := fmt.Sprintf("validator:\n  devices:\n    plugins: {10-device-injector: [%q, /dev/demo-null]}\n", demoDevice)
		// It refuses mounts unless allowed: allow sidecar-order its own.
		for _, other := range all {
			if other.Name == "sidecar-order" {
				config += fmt.Sprintf("  mounts:\n    plugins: {%s-sidecar-order: [%s]}\n", other.Idx, strings.Join(sidecarMounts(other, sb), ", "))
			}
		}
		return []byte(config)
	}
	return nil
}

// sidecarMounts are the host paths sidecar-order mounts, as quoted
// validator.mounts patterns: its helper, found next to its executable (as
// the kernel names it: symlinks resolved), also as the helper resolves, and
// each pod's directory under its --state-dir.
func sidecarMounts(spec sandbox.PluginSpec, sb *sandbox.Sandbox) []string {
	var out []string
	if binary, err := filepath.EvalSymlinks(spec.Binary); err == nil {
		helper := filepath.Join(filepath.Dir(binary), "nri-sidecar-helper")
		out = append(out, strconv.Quote(helper))
		if resolved, err := filepath.EvalSymlinks(helper); err == nil && resolved != helper {
			out = append(out, strconv.Quote(resolved))
		}
	}
	if i := slices.Index(spec.Args, "--state-dir"); i >= 0 && i+1 < len(spec.Args) {
		dir := strings.ReplaceAll(spec.Args[i+1], sandbox.PluginDir, sb.PluginDir(spec))
		out = append(out, strconv.Quote(dir+"/*"))
	}
	return out
}
