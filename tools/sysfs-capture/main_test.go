package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

// withoutMemoryState drops what changes while a machine runs (free memory,
// and on this VM the total too, as memory is hot-plugged): the topology is
// what must match.
func withoutMemoryState(t *testing.T, topo *topology.Topology) *topology.Topology {
	t.Helper()
	nodes := topo.NodeList()
	for i := range nodes {
		nodes[i].MemTotal, nodes[i].MemFree = 0, 0
		for j := range nodes[i].HugePages {
			nodes[i].HugePages[j].Free = 0
		}
	}
	stripped, err := topology.New(topo.CPUList(), nodes, topo.Isolated())
	require.NoError(t, err)
	return stripped
}

// deviceLinksOf lists the device links of a sysfs tree as kind -> names.
func deviceLinksOf(t *testing.T, root string) map[string][]string {
	t.Helper()
	links := map[string][]string{}
	for _, dir := range deviceLinks {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, e := range entries {
			links[dir] = append(links[dir], e.Name())
		}
	}
	return links
}

// assertSameLocality locates every device of src in both trees.
func assertSameLocality(t *testing.T, src, dst string) {
	t.Helper()
	links := deviceLinksOf(t, src)
	assert.Equal(t, links, deviceLinksOf(t, dst), "device links")
	for dir, names := range links {
		for _, name := range names {
			locate := func(root string) (locality.Locality, error) {
				if dir == "bus/pci/devices" {
					return locality.OfPCI(root, name)
				}
				var major, minor int64
				_, err := fmt.Sscanf(name, "%d:%d", &major, &minor)
				require.NoError(t, err)
				return locality.OfDevice(root, locality.Kind(strings.TrimPrefix(dir, "dev/")), major, minor)
			}
			want, err := locate(src)
			require.NoError(t, err, "%s/%s on %s", dir, name, src)
			got, err := locate(dst)
			require.NoError(t, err, "%s/%s on the capture", dir, name)
			assert.Equal(t, want, got, "%s/%s", dir, name)
		}
	}
}

// TestCaptureFixture captures a generated tree: the capture holds exactly the
// files discovery and locality need, so both give the same answers on it.
func TestCaptureFixture(t *testing.T) {
	d, err := description.Load("../../common/topology/testdata/snc-2s-4n-80c/description.yaml")
	require.NoError(t, err)
	src := t.TempDir()
	require.NoError(t, d.WriteTree(src))
	// Files discovery does not read stay behind.
	require.NoError(t, os.WriteFile(filepath.Join(src, "devices/system/cpu/possible"), []byte("0-127\n"), 0o644))

	dst := filepath.Join(t.TempDir(), "capture")
	require.NoError(t, capture(src, dst))
	_, err = os.Stat(filepath.Join(dst, "devices/system/cpu/possible"))
	assert.True(t, os.IsNotExist(err), "capture copied a file discovery does not read")

	want, err := sysfs.Discover(src)
	require.NoError(t, err)
	got, err := sysfs.Discover(dst)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assertSameLocality(t, src, dst)
	target, err := os.Readlink(filepath.Join(dst, "dev/char/195:0"))
	require.NoError(t, err)
	assert.False(t, filepath.IsAbs(target), "links stay relative")
}

// TestCaptureThisMachine captures the real /sys of the machine running the
// test.
func TestCaptureThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skip("no sysfs on this machine:", err)
	}
	dst := t.TempDir()
	require.NoError(t, capture(sysfs.DefaultRoot, dst))
	want, err := sysfs.Discover(sysfs.DefaultRoot)
	require.NoError(t, err)
	got, err := sysfs.Discover(dst)
	require.NoError(t, err)
	assert.Equal(t, withoutMemoryState(t, want), withoutMemoryState(t, got))
	assert.Equal(t, want.CPUs().Size(), got.CPUs().Size())
	assertSameLocality(t, sysfs.DefaultRoot, dst)
}

func TestCaptureErrors(t *testing.T) {
	nonEmpty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644))
	err := capture("../../common/topology/testdata/smt-1s-8c/sysfs", nonEmpty)
	assert.ErrorContains(t, err, "directory is not empty")

	err = capture(t.TempDir(), filepath.Join(t.TempDir(), "out"))
	assert.ErrorContains(t, err, "devices/system/cpu/online")

	err = run("/sys", "", false)
	assert.ErrorContains(t, err, "-out is required")

	abs := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(abs, "dev/char"), 0o755))
	require.NoError(t, os.Symlink("/sys/devices/virtual/misc/tun", filepath.Join(abs, "dev/char/10:200")))
	err = captureLinks(abs, t.TempDir(), "dev/char")
	assert.ErrorContains(t, err, "expected a relative target")
}
