package locality

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// Device is a PCI function and the device nodes it provides, as a fixture
// declares it.
type Device struct {
	// PCIAddress in the full form, "0000:3b:00.0".
	PCIAddress string
	// NUMANode the kernel reports for the function, or UnknownNode.
	NUMANode int
	// LocalCPUs the kernel reports: the node's CPUs, or every CPU when the
	// node is unknown.
	LocalCPUs cpuset.CPUSet
	Nodes     []DeviceNode
}

// DeviceNode is a char or block device node.
type DeviceNode struct {
	Kind         Kind
	Major, Minor int64
}

// String renders the node as sysfs names it, "major:minor".
func (n DeviceNode) String() string { return fmt.Sprintf("%d:%d", n.Major, n.Minor) }

// WriteDevice renders d under root the way the kernel lays it out:
//
//	devices/pci<domain:bus>/<address>/{numa_node,local_cpulist}
//	devices/pci<domain:bus>/<address>/<kind>/<major:minor>/dev
//	bus/pci/devices/<address> -> ../../../devices/pci<domain:bus>/<address>
//	dev/<kind>/<major:minor>  -> ../../devices/pci<domain:bus>/<address>/<kind>/<major:minor>
//
// The device node sits two levels below the function without a numa_node of
// its own, so that lookups walk up as they do on real machines.
func WriteDevice(root string, d Device) error {
	if !pciAddress.MatchString(d.PCIAddress) {
		return fmt.Errorf("write device %q: expected a pci address like 0000:3b:00.0", d.PCIAddress)
	}
	function := filepath.Join("devices", "pci"+d.PCIAddress[:7], d.PCIAddress)
	files := map[string]string{
		filepath.Join(function, "numa_node"):     strconv.Itoa(d.NUMANode),
		filepath.Join(function, "local_cpulist"): d.LocalCPUs.String(),
	}
	links := map[string]string{
		filepath.Join("bus", "pci", "devices", d.PCIAddress): filepath.Join("..", "..", "..", function),
	}
	for _, n := range d.Nodes {
		if n.Kind != Char && n.Kind != Block {
			return fmt.Errorf("write device %s: node %s has kind %q, expected %q or %q", d.PCIAddress, n, n.Kind, Char, Block)
		}
		dir := filepath.Join(function, string(n.Kind), n.String())
		files[filepath.Join(dir, "dev")] = n.String()
		links[filepath.Join("dev", string(n.Kind), n.String())] = filepath.Join("..", "..", dir)
	}
	for rel, content := range files {
		if err := writeFile(filepath.Join(root, rel), content+"\n"); err != nil {
			return fmt.Errorf("write device %s: %w", d.PCIAddress, err)
		}
	}
	for rel, target := range links {
		if err := symlink(target, filepath.Join(root, rel)); err != nil {
			return fmt.Errorf("write device %s: %w", d.PCIAddress, err)
		}
	}
	return nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// symlink creates or replaces the link at path.
func symlink(target, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink(target, path)
}
