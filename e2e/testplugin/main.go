// Command nri-e2e-test is a test-only NRI plugin that exercises the runner: it adds
// environment variables to every container it sees created and, on every Synchronize,
// writes a JSON report of the containers the runtime delivered. Configured to, it
// also weakens containers (OCI hooks, seccomp policies, host namespaces, sysctls,
// devices, device-cgroup rules, mounts, cgroups path, OOM score, env, rlimits), so that
// validators can be tested against a real plugin.
package main

import "github.com/nri-suite/nri-suite/common/plugin"

func main() {
	plugin.Main("e2e-test", newTestPlugin, plugin.WithIdx("50"), plugin.WithHTTPAddr("127.0.0.1:0"))
}
