package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// nvmeSpec describes, as example.com/disk=nvme0, the block device of
// snc-2s-4n-80c on NUMA node 2 (dev/block/259:0 -> 0000:86:00.0). The node
// is fully specified, so CDI injects it without a host node; the host has
// none (the disk exists only in the recorded sysfs), so device-injector's
// health check calls it missing and the tests run it with
// unhealthy-action: warn.
const nvmeSpec = `cdiVersion: "0.6.0"
kind: example.com/disk
devices:
- name: nvme0
  containerEdits:
    deviceNodes:
    - path: /dev/fixture-nvme0n1
      type: b
      major: 259
      minor: 0
`

// TestCDIDeviceAlignment runs device-injector (index 10) and topology-aware
// (index 30) on the same fixture and shared state: a Guaranteed container
// asking for the NVMe disk of NUMA node 2 by CDI name gets its CPUs and
// memory there. In runtime mode NRI never shows topology-aware the device
// and only device-injector's record locates it; in plugin mode the node is
// also a Linux device of the container, and must still count once.
func TestCDIDeviceAlignment(t *testing.T) {
	for _, mode := range []string{"runtime", "plugin"} {
		t.Run(mode, func(t *testing.T) {
			specDir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(specDir, "disk.yaml"), []byte(nvmeSpec), 0o644))
			// The runtime resolves the CDI names it is handed with the CDI
			// library on the same directory, as containerd does.
			runtimeCDI, err := cdi.NewCache(cdi.WithSpecDirs(specDir), cdi.WithAutoRefresh(false))
			require.NoError(t, err)
			n := startNode(t, "snc-2s-4n-80c", nodeOptions{
				config: "topology-policy: single-numa-node\n",
				runtime: []harness.Option{harness.WithCDIInjector(func(spec *rspec.Spec, devices []string) error {
					_, err := runtimeCDI.InjectDevices(spec, devices...)
					return err
				})},
			})
			root, err := filepath.Abs(filepath.Join("..", "..", "common", "topology", "testdata", "snc-2s-4n-80c", "sysfs"))
			require.NoError(t, err)
			n.rt.StartPlugin(t, harness.BuildPlugin(t, "./plugins/device-injector"), "10", "device-injector",
				harness.WithConfig(fmt.Sprintf("spec-dirs: [%s]\nmode: %s\nunhealthy-action: warn\n", specDir, mode)),
				harness.WithArgs("--log-level", "debug", "--http-addr", "127.0.0.1:0", "--sysfs-root", root))

			manifest := pod(t, "guaranteed-2cpu.yaml")
			manifest.Annotations = map[string]string{"cdi-devices.nri-suite.io/container.app": "example.com/disk=nvme0"}
			app := n.rt.RunPod(t, manifest).Container("app")

			app.RequireDevice(t, "/dev/fixture-nvme0n1")
			if mode == "runtime" {
				assert.Equal(t, []string{"example.com/disk=nvme0"}, app.CDIDevices(), "the runtime injected it, unseen by NRI")
			} else {
				assert.Empty(t, app.CDIDevices(), "device-injector injected the node itself")
			}
			records, err := state.ContainerDeviceRecords(n.rt.SharedDir())
			require.NoError(t, err)
			rec, found, err := records.Read(app.ID())
			require.NoError(t, err)
			require.True(t, found, "device-injector published the container's devices")
			require.Len(t, rec.Devices, 1)
			assert.Equal(t, 2, rec.Devices[0].NUMANode, "device-injector located the disk in the fixture")

			grant := cpus(t, app)
			assert.Equal(t, 2, grant.Size())
			assert.Equal(t, "2", n.nodesOf(grant).String(), "the grant %s is on the disk's node", grant)
			assert.Equal(t, "2", mems(t, app).String())

			waitCheckpoint(t, n.stateDir, []*harness.Container{app})
			assert.Equal(t, []policy.Device{{ID: "block 259:0", NUMANode: 2, CPUs: n.topo.CPUsOfNode(2)}},
				savedRequest(t, n.stateDir, app.ID()).Devices, "the disk counts once")
		})
	}
}

// savedRequest is the request the checkpoint in stateDir holds for the
// container id.
func savedRequest(t *testing.T, stateDir, id string) policy.Request {
	t.Helper()
	saved, found := loadCheckpoint(t, stateDir)
	require.True(t, found)
	for _, c := range saved.Containers {
		if c.Request.ContainerID == id {
			return c.Request
		}
	}
	require.Failf(t, "container not in the checkpoint", "container %s", id)
	return policy.Request{}
}
