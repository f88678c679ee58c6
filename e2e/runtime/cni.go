package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// cniPlugins are the CNI plugins of a cluster sandbox (install.sh's cni part):
// the runtime runs loopback for every pod itself.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// cniConfig is the pods' network: a bridge in the cluster's network
// namespace, which is the pods' gateway (IP forwarding is the namespace's
// own setting, so the host's is untouched), addresses from host-local with
// its store in the run dir, and portmap for hostPort.
func cniConfig(dir, podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "nri-sandbox",
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(dir, "ipam"),
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the CNI configuration: %w", err)
	}
	return data, nil
}

// writeCNI lays out dir as RuntimeEnv.CNIDir: the cache's plugins linked
// into bin/, the network in net.d/.
func writeCNI(dir string, cache Cache, podCIDR string) error {
	for _, sub := range []string{"bin", "net.d", "ipam"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("creating CNI directory: %w", err)
		}
	}
	for _, plugin := range cniPlugins {
		if err := os.Symlink(cache.Bin(plugin), filepath.Join(dir, "bin", plugin)); err != nil {
			return fmt.Errorf("linking CNI plugin %s: %w", plugin, err)
		}
	}
	conf, err := cniConfig(dir, podCIDR)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "net.d", "10-nri-sandbox.conflist")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return fmt.Errorf("writing the CNI configuration %s: %w", path, err)
	}
	return nil
}
