package classes

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func testLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// blockDevice returns a block device node of this machine and its number:
// the first entry of /sys/block with a node in /dev.
func blockDevice(t *testing.T) (string, uint32, uint32) {
	t.Helper()
	entries, err := os.ReadDir("/sys/block")
	require.NoError(t, err)
	for _, e := range entries {
		path := filepath.Join("/dev", e.Name())
		var st unix.Stat_t
		if unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
			return path, unix.Major(st.Rdev), unix.Minor(st.Rdev)
		}
	}
	t.Skip("no block device node under /dev")
	return "", 0, 0
}

func TestApplyResolvesBlockIOClassesOnTheNodesDevices(t *testing.T) {
	dev, major, minor := blockDevice(t)
	cfg, err := parse(t, fmt.Sprintf(`
blockio:
  config:
    Classes:
      throttled:
      - Weight: 80
      - Devices: [%s]
        ThrottleReadBps: 1Mi
        ThrottleWriteIOPS: 2k
`, dev))
	require.NoError(t, err)
	node := NewNode(testLog(), NodeOptions{BlockDevices: true})
	require.NoError(t, node.Apply(cfg))
	got, err := node.ResolvedBlockIO("throttled")
	require.NoError(t, err)
	require.NotNil(t, got.Weight)
	assert.Equal(t, uint16(80), *got.Weight)
	require.Len(t, got.ThrottleReadBpsDevice, 1)
	assert.Equal(t, [3]uint64{uint64(major), uint64(minor), 1 << 20},
		[3]uint64{uint64(got.ThrottleReadBpsDevice[0].Major), uint64(got.ThrottleReadBpsDevice[0].Minor), got.ThrottleReadBpsDevice[0].Rate},
		"%s's read throttle, by its device number", dev)
	require.Len(t, got.ThrottleWriteIOPSDevice, 1)
	assert.Equal(t, uint64(2000), got.ThrottleWriteIOPSDevice[0].Rate)
	assert.Empty(t, got.ThrottleWriteBpsDevice)
}

func TestApplyRefusesBadBlockIOClasses(t *testing.T) {
	dev, _, _ := blockDevice(t)
	tests := []struct {
		name, classes, want string
	}{
		{"a device pattern that matches nothing", `
      slow:
      - Devices: [` + dev + `, /dev/nri-suite-no-such-disk*]
        ThrottleReadBps: 1Mi`, `blockio: class "slow": device wildcard "/dev/nri-suite-no-such-disk*" does not match any device nodes: expected patterns that match block devices of this node`},
		{"a device that is not a block device", `
      slow:
      - Devices: [/dev/null]
        ThrottleReadBps: 1Mi`, `blockio: class "slow": file "/dev/null" is a character device`},
		{"a rate that is no quantity", `
      slow:
      - Devices: [` + dev + `]
        ThrottleReadBps: fast`, `blockio: class "slow": syntax error in "ThrottleReadBps" ("fast")`},
		{"a weight out of range", `
      slow:
      - Weight: 5000`, `blockio: class "slow": value of "Weight" (5000) bigger than maximum (1000)`},
		{"a throttle without devices", `
      slow:
      - ThrottleReadBps: 1Mi`, `blockio: class "slow": ignoring throttling`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good, err := parse(t, "blockio: {config: {Classes: {good: [{Weight: 200}]}}}")
			require.NoError(t, err)
			node := NewNode(testLog(), NodeOptions{BlockDevices: true})
			require.NoError(t, node.Apply(good))
			cfg, err := parse(t, "blockio:\n  config:\n    Classes:"+tc.classes)
			require.NoError(t, err, "goresctrl's format; only the node can tell")
			err = node.Apply(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = node.ResolvedBlockIO("good")
			assert.NoError(t, err, "the classes applied before stay")
		})
	}
}

func TestAdjust(t *testing.T) {
	noRDT := NewNode(testLog(), NodeOptions{})
	withRDT := &Node{log: testLog()}
	monitored := &Node{log: testLog(), monitoring: true}
	tests := []struct {
		name       string
		node       *Node
		a          Assignment
		set        Assignment
		refused    bool
		blockio    string
		rdtClass   string
		monitoring bool
	}{
		{"nothing", withRDT, Assignment{}, Assignment{}, false, "", "", false},
		{"both where RDT is available", withRDT, Assignment{BlockIO: "slow", RDT: "gold"}, Assignment{BlockIO: "slow", RDT: "gold"}, false, "slow", "nri-suite.gold", false},
		{"a monitoring group where resctrl monitors", monitored, Assignment{RDT: "gold"}, Assignment{RDT: "gold"}, false, "", "nri-suite.gold", true},
		{"the root class is no adjustment", monitored, Assignment{RDT: RootRDTClass}, Assignment{RDT: RootRDTClass}, false, "", "", false},
		{"no RDT adjustment without RDT", noRDT, Assignment{BlockIO: "slow", RDT: "gold"}, Assignment{BlockIO: "slow"}, true, "slow", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			adjust := &api.ContainerAdjustment{}
			set, refused := tc.node.Adjust(adjust, tc.a)
			assert.Equal(t, tc.set, set)
			assert.Equal(t, tc.refused, refused)
			res := adjust.GetLinux().GetResources()
			assert.Equal(t, tc.blockio, res.GetBlockioClass().GetValue())
			assert.Equal(t, tc.rdtClass, res.GetRdtClass().GetValue())
			assert.Equal(t, tc.monitoring, adjust.GetLinux().GetRdt().GetEnableMonitoring().GetValue())
			if tc.rdtClass == "" {
				assert.Nil(t, res.GetRdtClass(), "no RDT class at all, not an empty one")
				assert.Nil(t, adjust.GetLinux().GetRdt())
			}
		})
	}
}

func TestRDTUnavailableIsOneLogLine(t *testing.T) {
	if _, err := os.Stat("/sys/fs/resctrl/info"); err == nil {
		t.Skip("this machine has RDT")
	}
	logger, hook := test.NewNullLogger()
	node := NewNode(logrus.NewEntry(logger), NodeOptions{RDT: true})
	assert.False(t, node.RDTAvailable())
	require.Len(t, hook.AllEntries(), 1)
	assert.Equal(t, "RDT is unavailable on this node: RDT classes are chosen but not sent to the runtime", hook.LastEntry().Message)
	cfg, err := parse(t, exampleConfig)
	require.NoError(t, err)
	require.NoError(t, node.Apply(cfg), "RDT classes are accepted where RDT is missing")
}
