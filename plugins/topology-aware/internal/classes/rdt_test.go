package classes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/internal/testenv"
)

// The child of TestRDTOnAResctrlTree finds its tree and mount table here.
const (
	resctrlTreeEnv   = "CLASSES_TEST_RESCTRL_TREE"
	resctrlMountsEnv = "CLASSES_TEST_RESCTRL_MOUNTS"
)

// TestRDTOnAResctrlTree applies RDT classes to goresctrl's own test layout
// of the kernel's resctrl filesystem (test/data/resctrl.full of its module:
// L3 CAT with a 20-bit mask and MBA on 4 cache ids, L3 monitoring), which
// goresctrl finds as the node's resctrl: the test runs again in a mount
// namespace of its own whose /proc/mounts lists the tree as a resctrl mount
// (goresctrl reads /proc/mounts and nothing can point it elsewhere). Root
// only; with CI=true it must run.
func TestRDTOnAResctrlTree(t *testing.T) {
	if tree := os.Getenv(resctrlTreeEnv); tree != "" {
		testRDTOnAResctrlTree(t, tree)
		return
	}
	testenv.RequireRoot(t, "for a mount namespace whose /proc/mounts lists the tree")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/intel/goresctrl").Output()
	require.NoError(t, err, "locating goresctrl's module")
	dir := t.TempDir()
	tree := filepath.Join(dir, "resctrl")
	require.NoError(t, exec.Command("cp", "-r", filepath.Join(strings.TrimSpace(string(out)), "test", "data", "resctrl.full"), tree).Run())
	require.NoError(t, exec.Command("chmod", "-R", "u+w", tree).Run())
	mounts := filepath.Join(dir, "mounts")
	require.NoError(t, os.WriteFile(mounts, fmt.Appendf(nil, "resctrl %s resctrl rw,relatime 0 0\n", tree), 0o644))

	cmd := exec.Command(os.Args[0], "-test.run=^TestRDTOnAResctrlTree$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), resctrlTreeEnv+"="+tree, resctrlMountsEnv+"="+mounts)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	output, err := cmd.CombinedOutput()
	t.Logf("in a mount namespace:\n%s", output)
	require.NoError(t, err)
	require.Contains(t, string(output), "--- PASS: TestRDTOnAResctrlTree")
}

func testRDTOnAResctrlTree(t *testing.T, tree string) {
	require.NoError(t, unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""), "making the namespace's mounts private")
	require.NoError(t, unix.Mount(os.Getenv(resctrlMountsEnv), fmt.Sprintf("/proc/%d/mounts", os.Getpid()), "", unix.MS_BIND, ""),
		"listing the tree as the resctrl mount")
	node := NewNode(testLog(), NodeOptions{RDT: true})
	require.True(t, node.RDTAvailable(), "goresctrl finds the tree as resctrl: %v", node.rdtErr)
	// exampleConfig: gold 60% of the partition's whole L3 (12 of the
	// tree's 20 bits) and all of the memory bandwidth, bronze 20% and 40%.
	cfg, err := parse(t, exampleConfig)
	require.NoError(t, err)
	require.NoError(t, node.Apply(cfg))

	schemata := func(group string) string {
		data, err := os.ReadFile(filepath.Join(tree, group, "schemata"))
		require.NoError(t, err, "the schemata of group %s", group)
		return string(data)
	}
	// Each class is a group of the prefix, its schemata its share of the
	// partition's: bits from the lowest, for every cache id.
	assert.Equal(t, "L3:0=fff;1=fff;2=fff;3=fff\nMB:0=100;1=100;2=100;3=100\n", schemata(ResctrlGroupPrefix+"gold"))
	assert.Equal(t, "L3:0=f;1=f;2=f;3=f\nMB:0=40;1=40;2=40;3=40\n", schemata(ResctrlGroupPrefix+"bronze"))
	for _, other := range []string{"goresctrl.Guaranteed", "non_goresctrl.Group"} {
		assert.DirExists(t, filepath.Join(tree, other), "a group of another prefix is left alone")
	}

	// Containers get the class's group as their RDT class, and a
	// monitoring group of their own, as the tree has L3 monitoring.
	tracker := NewTracker(node, "test")
	require.NoError(t, tracker.Configure(cfg))
	for _, tc := range []struct {
		qos   k8s.QOSClass
		group string
	}{{k8s.QOSGuaranteed, ResctrlGroupPrefix + "gold"}, {k8s.QOSBestEffort, ResctrlGroupPrefix + "bronze"}} {
		a, err := tracker.Assign(Container{Name: "app", Namespace: "default", QOS: tc.qos})
		require.NoError(t, err)
		adjust := &api.ContainerAdjustment{}
		tracker.Set("ctr-"+string(tc.qos), adjust, a)
		assert.Equal(t, tc.group, adjust.GetLinux().GetResources().GetRdtClass().GetValue(), "RDT class of a %s container", tc.qos)
		assert.True(t, adjust.GetLinux().GetRdt().GetEnableMonitoring().GetValue(), "monitoring group of a %s container", tc.qos)
		assert.DirExists(t, filepath.Join(tree, tc.group), "the group runc puts the container in exists")
	}

	// A group of the prefix that still has tasks is not removed: the
	// configuration that drops its class is refused, naming it.
	require.NoError(t, os.WriteFile(filepath.Join(tree, ResctrlGroupPrefix+"bronze", "tasks"), []byte("4242\n"), 0o644))
	bronze := "          bronze:\n            l3Allocation: \"20%\"\n            mbAllocation: [\"40%\"]\n            kubernetes: {denyPodAnnotation: true}\n"
	require.Contains(t, exampleConfig, bronze)
	goldOnly, err := parse(t, strings.NewReplacer(bronze, "", "    BestEffort: bronze\n", "").Replace(exampleConfig))
	require.NoError(t, err)
	require.Equal(t, []string{"gold", RootRDTClass}, goldOnly.RDT.Names)
	err = node.Apply(goldOnly)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `refusing to remove non-empty resctrl group "nri-suite.bronze"`)
}
