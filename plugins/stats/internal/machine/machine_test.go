package machine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// twoSockets has 2 sockets of 2 cores of 2 threads; the core ids repeat
// in each socket, as the kernel numbers them.
const twoSockets = `
cpus:
  - {id: 0, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 1, core: 1, socket: 0, node: 0, l2: 1, l3: 0}
  - {id: 2, core: 0, socket: 1, node: 1, l2: 2, l3: 2}
  - {id: 3, core: 1, socket: 1, node: 1, l2: 3, l3: 2}
  - {id: 4, core: 0, socket: 0, node: 0, l2: 0, l3: 0}
  - {id: 5, core: 1, socket: 0, node: 0, l2: 1, l3: 0}
  - {id: 6, core: 0, socket: 1, node: 1, l2: 2, l3: 2}
  - {id: 7, core: 1, socket: 1, node: 1, l2: 3, l3: 2}
nodes:
  - {id: 0, mem-total-kb: 1048576, mem-free-kb: 524288, distances: {0: 10, 1: 20}}
  - {id: 1, mem-total-kb: 1048576, mem-free-kb: 524288, distances: {0: 20, 1: 10}}
`

const meminfo = "MemTotal:       24683584 kB\nMemFree:        1000000 kB\nSwapTotal:       2097148 kB\nSwapFree:        2097148 kB\n"

func put(t *testing.T, root, rel, content string) {
	t.Helper()
	path := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// host renders a host's sysfs, /proc and /etc with twoSockets' topology,
// meminfo and a boot id.
func host(t *testing.T) Paths {
	t.Helper()
	d, err := description.Parse([]byte(twoSockets))
	require.NoError(t, err)
	topo, err := d.Topology()
	require.NoError(t, err)
	p := Paths{Sys: t.TempDir(), Proc: t.TempDir(), Etc: t.TempDir()}
	require.NoError(t, sysfs.Write(p.Sys, topo))
	put(t, p.Proc, "meminfo", meminfo)
	put(t, p.Proc, "sys/kernel/random/boot_id", "0b1e5c3a-1111-2222-3333-444455556666\n")
	return p
}

func TestRead(t *testing.T) {
	p := host(t)
	put(t, p.Etc, "machine-id", "8f1d3c0e9a5b4c7d8e9f0a1b2c3d4e5f\n")
	put(t, p.Sys, "class/dmi/id/product_uuid", "ec2a1b2c-0000-1111-2222-333344445555\n")
	put(t, p.Sys, "devices/system/edac/mc/mc0/dimm0/dimm_mem_type", "Registered-DDR4\n")
	put(t, p.Sys, "devices/system/edac/mc/mc0/dimm0/size", "16384\n")
	put(t, p.Sys, "devices/system/edac/mc/mc0/dimm1/dimm_mem_type", "Registered-DDR4\n")
	put(t, p.Sys, "devices/system/edac/mc/mc0/dimm1/size", "16384\n")
	put(t, p.Sys, "devices/system/edac/mc/mc1/dimm0/dimm_mem_type", "Unbuffered-DDR4\n")
	put(t, p.Sys, "devices/system/edac/mc/mc1/dimm0/size", "8192\n")
	put(t, p.Sys, "devices/system/edac/mc/mc1/rank0/size", "1\n") // not a DIMM
	put(t, p.Sys, "devices/system/edac/mc/power/control", "auto\n")

	info, err := Read(p)
	require.NoError(t, err)
	assert.Equal(t, &Info{
		Cores: 8, PhysicalCores: 2, Sockets: 2, // distinct core ids, as cAdvisor counts them
		MemoryBytes: 24683584 << 10, SwapBytes: 2097148 << 10,
		DIMMs:     map[string]DIMMs{"Registered-DDR4": {Count: 2, CapacityBytes: 32 << 30}, "Unbuffered-DDR4": {Count: 1, CapacityBytes: 8 << 30}},
		MachineID: "8f1d3c0e9a5b4c7d8e9f0a1b2c3d4e5f", SystemUUID: "ec2a1b2c-0000-1111-2222-333344445555",
		BootID: "0b1e5c3a-1111-2222-3333-444455556666",
	}, info)
}

func TestReadWithoutIDs(t *testing.T) {
	p := host(t)
	info, err := Read(p)
	require.NoError(t, err)
	assert.Empty(t, info.MachineID)
	assert.Empty(t, info.SystemUUID)
	assert.Empty(t, info.DIMMs, "no EDAC: no DIMMs")

	// Without DMI, the device tree's id (NUL-terminated), else the
	// machine-id, as cAdvisor falls back.
	put(t, p.Etc, "machine-id", "abc\n")
	info, err = Read(p)
	require.NoError(t, err)
	assert.Equal(t, "abc", info.SystemUUID)
	put(t, p.Proc, "device-tree/vm,uuid", "vm-uuid\x00")
	info, err = Read(p)
	require.NoError(t, err)
	assert.Equal(t, "vm-uuid", info.SystemUUID)
}

func TestReadFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(t *testing.T, p Paths)
		want    string
	}{
		"no topology": {func(t *testing.T, p Paths) {
			require.NoError(t, os.Remove(filepath.Join(p.Sys, "devices/system/cpu/online")))
		},
			"devices/system/cpu/online"},
		"no meminfo": {func(t *testing.T, p Paths) { require.NoError(t, os.Remove(filepath.Join(p.Proc, "meminfo"))) }, "meminfo"},
		"bad meminfo": {func(t *testing.T, p Paths) { put(t, p.Proc, "meminfo", "MemTotal: lots\n") },
			`meminfo MemTotal: value "lots", expected "<kilobytes> kB"`},
		"bad DIMM size": {func(t *testing.T, p Paths) {
			put(t, p.Sys, "devices/system/edac/mc/mc0/dimm0/dimm_mem_type", "DDR5\n")
			put(t, p.Sys, "devices/system/edac/mc/mc0/dimm0/size", "big\n")
		}, `mc0/dimm0/size: "big", expected a size in MiB`},
		"DIMM without type": {func(t *testing.T, p Paths) { put(t, p.Sys, "devices/system/edac/mc/mc0/dimm0/size", "1024\n") },
			"dimm_mem_type"},
	} {
		t.Run(name, func(t *testing.T) {
			p := host(t)
			tc.breakIt(t, p)
			_, err := Read(p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadVersion(t *testing.T) {
	etc := t.TempDir()
	assert.Equal(t, "Unknown", ReadVersion(etc).OS, "no os-release")
	put(t, etc, "os-release", "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nID=ubuntu\n")
	v := ReadVersion(etc)
	assert.Equal(t, "Ubuntu 24.04.3 LTS", v.OS)
	assert.NotEmpty(t, v.Kernel)
	assert.NotEqual(t, "Unknown", v.Kernel, "uname's release")
	assert.Equal(t, "Linux", PrettyName([]byte("NAME=Linux\n")), "no PRETTY_NAME")
	assert.Equal(t, "Debian GNU/Linux 13 (trixie)", PrettyName([]byte("PRETTY_NAME=Debian GNU/Linux 13 (trixie)\n")), "unquoted")
}

// TestReadThisHost reads the machine the tests run on, against its own
// files: a smoke test that the defaults name the right ones.
func TestReadThisHost(t *testing.T) {
	info, err := Read(Paths{Sys: DefaultSys, Proc: DefaultProc, Etc: DefaultEtc})
	require.NoError(t, err)
	assert.Positive(t, info.Cores)
	assert.LessOrEqual(t, info.PhysicalCores, info.Cores)
	assert.Positive(t, info.MemoryBytes)
	assert.Len(t, info.BootID, 36, "a UUID")
}

// FuzzPrettyName: any os-release gives a label value: valid UTF-8, without
// the quotes around it.
func FuzzPrettyName(f *testing.F) {
	f.Add([]byte("PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\n"))
	f.Add([]byte("NAME=x\nPRETTY_NAME=\xff\"\n"))
	f.Add([]byte("PRETTY_NAME=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := PrettyName(data)
		if !utf8.ValidString(name) || strings.HasPrefix(name, `"`) || strings.HasSuffix(name, `"`) {
			t.Fatalf("PrettyName(%q) = %q", data, name)
		}
	})
}
