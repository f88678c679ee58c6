package locality_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/locality"
)

// bridge is a PCIe root port on node 1 with an NVMe drive behind it that
// reports -1, laid out as the kernel does.
const (
	bridge = "devices/pci0000:40/0000:40:01.0"
	nvme   = bridge + "/0000:41:00.0"
)

// buildTree writes files and relative symlinks under a new root.
func buildTree(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	for rel, target := range links {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.Symlink(target, path))
	}
	return root
}

func machine(t *testing.T) string {
	return buildTree(t, map[string]string{
		bridge + "/numa_node":                                    "1\n",
		bridge + "/local_cpulist":                                "2-3\n",
		nvme + "/numa_node":                                      "-1\n",
		nvme + "/local_cpulist":                                  "0-3\n",
		nvme + "/nvme/nvme0/nvme0n1/dev":                         "259:0\n",
		"devices/pci0000:00/0000:00:03.0/numa_node":              "0\n", // no local_cpulist at its level
		"devices/pci0000:00/0000:00:03.0/net/eth0/local_cpulist": "0-1\n",
		"devices/pci0000:00/0000:00:03.0/net/eth0/dev":           "240:0\n",
		"devices/pci0000:00/0000:00:04.0/numa_node":              "-1\n",
		"devices/pci0000:00/0000:00:04.0/local_cpulist":          "0-3\n",
		"devices/pci0000:00/0000:00:04.0/drm/card0/dev":          "226:0\n",
		"devices/virtual/misc/tun/dev":                           "10:200\n",
	}, map[string]string{
		"dev/block/259:0":              "../../" + nvme + "/nvme/nvme0/nvme0n1",
		"dev/char/240:0":               "../../devices/pci0000:00/0000:00:03.0/net/eth0",
		"dev/char/226:0":               "../../devices/pci0000:00/0000:00:04.0/drm/card0",
		"dev/char/10:200":              "../../devices/virtual/misc/tun",
		"bus/pci/devices/0000:41:00.0": "../../../" + nvme,
		"bus/pci/devices/0000:40:01.0": "../../../" + bridge,
		"bus/pci/devices/0000:00:04.0": "../../../devices/pci0000:00/0000:00:04.0",
	})
}

func TestOfDevice(t *testing.T) {
	root := machine(t)
	tests := []struct {
		name         string
		kind         locality.Kind
		major, minor int64
		node         int
		cpus         string
	}{
		{name: "walks up past a -1 to the bridge", kind: locality.Block, major: 259, minor: 0, node: 1, cpus: "2-3"},
		{name: "cpus from below when the node level has none", kind: locality.Char, major: 240, minor: 0, node: 0, cpus: "0-1"},
		{name: "-1 everywhere is unknown", kind: locality.Char, major: 226, minor: 0, node: -1, cpus: "0-3"},
		{name: "virtual device is unknown", kind: locality.Char, major: 10, minor: 200, node: -1, cpus: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := locality.OfDevice(root, tt.kind, tt.major, tt.minor)
			require.NoError(t, err)
			assert.Equal(t, tt.node, l.NUMANode)
			assert.Equal(t, tt.cpus, l.CPUs.String())
			assert.Equal(t, tt.node != -1, l.Known())
		})
	}
}

func TestOfPCI(t *testing.T) {
	root := machine(t)
	l, err := locality.OfPCI(root, "0000:41:00.0")
	require.NoError(t, err)
	assert.Equal(t, locality.Locality{NUMANode: 1, CPUs: cpuset.New(2, 3)}, l)

	l, err = locality.OfPCI(root, "0000:00:04.0")
	require.NoError(t, err)
	assert.False(t, l.Known())
}

func TestLocalityErrors(t *testing.T) {
	root := machine(t)
	tests := []struct {
		name     string
		files    map[string]string
		links    map[string]string
		locate   func(root string) error
		wantErr  []string
		notFound bool
	}{{
		name:     "no such device",
		locate:   func(root string) error { _, err := locality.OfDevice(root, locality.Char, 1, 99); return err },
		wantErr:  []string{"locate char device 1:99", "device not found in sysfs", "dev/char/1:99"},
		notFound: true,
	}, {
		name:     "no such pci device",
		locate:   func(root string) error { _, err := locality.OfPCI(root, "0000:99:00.0"); return err },
		wantErr:  []string{"locate pci device 0000:99:00.0", "device not found"},
		notFound: true,
	}, {
		name:    "bad kind",
		locate:  func(root string) error { _, err := locality.OfDevice(root, "pipe", 1, 2); return err },
		wantErr: []string{`kind "pipe"`, `expected "char" or "block"`},
	}, {
		name:    "bad pci address",
		locate:  func(root string) error { _, err := locality.OfPCI(root, "../../etc"); return err },
		wantErr: []string{`locate pci device "../../etc"`, "expected an address like 0000:3b:00.0"},
	}, {
		name:    "short pci address",
		locate:  func(root string) error { _, err := locality.OfPCI(root, "3b:00.0"); return err },
		wantErr: []string{`"3b:00.0"`, "expected an address"},
	}, {
		name:    "malformed numa_node",
		files:   map[string]string{"devices/pci0000:00/0000:00:05.0/numa_node": "zero\n"},
		links:   map[string]string{"bus/pci/devices/0000:00:05.0": "../../../devices/pci0000:00/0000:00:05.0"},
		locate:  func(root string) error { _, err := locality.OfPCI(root, "0000:00:05.0"); return err },
		wantErr: []string{"0000:00:05.0/numa_node", `got "zero"`, "expected a NUMA node id or -1"},
	}, {
		name:    "malformed local_cpulist",
		files:   map[string]string{"devices/pci0000:00/0000:00:05.0/local_cpulist": "0-\n"},
		links:   map[string]string{"bus/pci/devices/0000:00:05.0": "../../../devices/pci0000:00/0000:00:05.0"},
		locate:  func(root string) error { _, err := locality.OfPCI(root, "0000:00:05.0"); return err },
		wantErr: []string{"0000:00:05.0/local_cpulist", "expected a cpu list", `bad token "0-"`},
	}, {
		name:    "unreadable numa_node",
		files:   map[string]string{"devices/pci0000:00/0000:00:05.0/numa_node/x": ""},
		links:   map[string]string{"bus/pci/devices/0000:00:05.0": "../../../devices/pci0000:00/0000:00:05.0"},
		locate:  func(root string) error { _, err := locality.OfPCI(root, "0000:00:05.0"); return err },
		wantErr: []string{"read numa node", "0000:00:05.0/numa_node", "is a directory"},
	}, {
		name:    "link out of the root",
		links:   map[string]string{"dev/char/1:3": "/"},
		locate:  func(root string) error { _, err := locality.OfDevice(root, locality.Char, 1, 3); return err },
		wantErr: []string{"dev/char/1:3 resolves to /, outside the sysfs root"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := root
			if tt.files != nil || tt.links != nil {
				root = buildTree(t, tt.files, tt.links)
			}
			err := tt.locate(root)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.Equal(t, tt.notFound, errors.Is(err, locality.ErrNotFound))
		})
	}
}

// TestWriteDevice renders devices and locates them again.
func TestWriteDevice(t *testing.T) {
	root := t.TempDir()
	devices := []locality.Device{
		{PCIAddress: "0000:3b:00.0", NUMANode: 1, LocalCPUs: cpuset.New(4, 5),
			Nodes: []locality.DeviceNode{{Kind: locality.Char, Major: 195, Minor: 0}, {Kind: locality.Block, Major: 259, Minor: 3}}},
		{PCIAddress: "0000:00:1f.6", NUMANode: -1, LocalCPUs: cpuset.Range(0, 7)},
	}
	for _, d := range devices {
		require.NoError(t, locality.WriteDevice(root, d))
	}
	target, err := os.Readlink(filepath.Join(root, "dev/char/195:0"))
	require.NoError(t, err)
	assert.Equal(t, "../../devices/pci0000:3b/0000:3b:00.0/char/195:0", target)

	for _, locate := range []func() (locality.Locality, error){
		func() (locality.Locality, error) { return locality.OfDevice(root, locality.Char, 195, 0) },
		func() (locality.Locality, error) { return locality.OfDevice(root, locality.Block, 259, 3) },
		func() (locality.Locality, error) { return locality.OfPCI(root, "0000:3b:00.0") },
	} {
		l, err := locate()
		require.NoError(t, err)
		assert.Equal(t, locality.Locality{NUMANode: 1, CPUs: cpuset.New(4, 5)}, l)
	}
	l, err := locality.OfPCI(root, "0000:00:1f.6")
	require.NoError(t, err)
	assert.Equal(t, locality.Locality{NUMANode: -1, CPUs: cpuset.Range(0, 7)}, l)

	err = locality.WriteDevice(root, locality.Device{PCIAddress: "bad"})
	assert.ErrorContains(t, err, `write device "bad": expected a pci address`)
	err = locality.WriteDevice(root, locality.Device{PCIAddress: "0000:3b:00.1", Nodes: []locality.DeviceNode{{Kind: "fifo"}}})
	assert.ErrorContains(t, err, `node 0:0 has kind "fifo"`)
}
