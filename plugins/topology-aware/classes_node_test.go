package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/testenv"
)

// TestRealNodeBlockIOClasses is issue 17's acceptance for block I/O on a
// real node, on containerd and on CRI-O with external plugins (who launches
// the plugin changes nothing of classes): a loop device that the test makes
// (and removes), the runtime given the block I/O classes in goresctrl's
// format as its blockio_config_file, the plugin the same classes in its
// configuration. The pods get the device from device-injector, by
// annotation (a privileged pod would, but CRI-O cannot start one here: it
// asks runc for capabilities these hosts lack).
//
//   - A BestEffort pod, whose class throttles reads of the device to 1 MiB/s,
//     reads it at that rate (dd with O_DIRECT inside the container, within
//     20%); its spec's linux.resources.blockIO and its blkio cgroup show the
//     limit.
//   - A pod of another QoS class (Guaranteed; Burstable on CRI-O, which
//     cannot run Guaranteed pods here) reads it unthrottled.
//   - A pod annotated with a class of a BFQ weight for the device (its
//     scheduler set to bfq by the test) has the weight in its blkio cgroup.
func TestRealNodeBlockIOClasses(t *testing.T) {
	sandbox.RunVariants(t, []sandbox.Variant{{Runtime: "containerd", Launch: sandbox.LaunchExternal}, {Runtime: "crio", Launch: sandbox.LaunchExternal}},
		testRealNodeBlockIOClasses)
}

// throttledBps is the read limit of the class of BestEffort pods.
const throttledBps = 1 << 20

// blkioFiles are the cgroup files of the throttle and the BFQ weight.
var (
	throttleReadBps = sandbox.CgroupFile{V1Controller: "blkio", V1: "blkio.throttle.read_bps_device", V2: "io.max"}
	bfqWeights      = sandbox.CgroupFile{V1Controller: "blkio", V1: "blkio.bfq.weight_device", V2: "io.bfq.weight"}
)

func testRealNodeBlockIOClasses(t *testing.T, v sandbox.Variant) {
	sandbox.RequirePrereqs(t, v.Runtime)
	dev := newLoopDevice(t)
	classes := fmt.Sprintf(`Classes:
  throttled:
  - Devices: [%[1]s]
    ThrottleReadBps: %[2]d
  weighted:
  - Devices: [%[1]s]
    Weight: 200
`, dev.path, throttledBps)
	opts := v.Options()
	opts.TolerateMissingPlugins = true
	opts.BlockIOConfig = []byte(classes)
	sb := sandbox.NewForTest(t, opts)
	ctx := sandbox.TestContext(t)
	injector, err := sb.StartPlugin(sandbox.PluginSpec{
		Binary: harness.BuildPlugin(t, "./plugins/device-injector"), Name: "device-injector", Idx: "10",
		Config: fmt.Appendf(nil, "policy:\n  default:\n    device-paths: [%q]\n", dev.path),
	})
	require.NoError(t, err)
	require.NoError(t, injector.WaitReady(ctx))
	plugin, err := sb.StartPlugin(sandbox.PluginSpec{
		Binary: harness.BuildPlugin(t, pluginPkg), Name: "topology-aware", Idx: "30",
		Config: []byte("blockio:\n  config:\n    " + strings.ReplaceAll(strings.TrimSpace(classes), "\n", "\n    ") +
			"\n  qos:\n    BestEffort: throttled\n"),
		Args: []string{"--state-dir", sandbox.PluginDir + "/state"},
	})
	require.NoError(t, err)
	require.NoError(t, plugin.WaitReady(ctx))

	run := func(pod *corev1.Pod) string {
		t.Helper()
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["devices.nri-suite.io"] = "- path: " + dev.path + "\n"
		require.NoError(t, sb.WritePod(pod))
		c, err := sb.WaitContainer(ctx, pod.Name, "main")
		require.NoError(t, err)
		return c.ID
	}
	// readRate reads 4 MiB of the device with O_DIRECT, so that every read
	// reaches it, and returns the rate in bytes per second, timed inside
	// the container by /proc/uptime (busybox's dd prints no rate).
	const readBytes = 64 * 64 << 10
	readRate := func(id string) float64 {
		t.Helper()
		script := `a=$(cut -d" " -f1 /proc/uptime); dd if=` + dev.path + ` of=/dev/null bs=64k count=64 iflag=direct 2>&1 || exit 1; ` +
			`b=$(cut -d" " -f1 /proc/uptime); echo "uptime $a $b"`
		out, err := sb.CRI().Exec(ctx, id, "sh", "-c", script)
		require.NoError(t, err, out)
		require.Contains(t, out, "64+0 records in", "dd read the whole 4 MiB")
		m := regexp.MustCompile(`uptime ([0-9.]+) ([0-9.]+)`).FindStringSubmatch(out)
		require.NotNil(t, m, "the container's report: %s", out)
		start, _ := strconv.ParseFloat(m[1], 64)
		end, _ := strconv.ParseFloat(m[2], 64)
		seconds := max(end-start, 0.01) // /proc/uptime counts hundredths
		t.Logf("container %s read %d bytes in %.2f s", id, readBytes, seconds)
		return readBytes / seconds
	}
	cgroupLines := func(id string, f sandbox.CgroupFile) string {
		t.Helper()
		text, err := sb.ReadCgroup(ctx, id, f)
		require.NoError(t, err)
		return text
	}

	throttled := run(sandbox.BusyboxPod("throttled"))
	info, err := sb.CRI().Inspect(ctx, throttled)
	require.NoError(t, err)
	require.NotNil(t, info.BlockIO, "the runtime resolved the class into linux.resources.blockIO")
	require.Len(t, info.BlockIO.ThrottleReadBpsDevice, 1)
	got := info.BlockIO.ThrottleReadBpsDevice[0]
	assert.Equal(t, [3]uint64{uint64(dev.major), uint64(dev.minor), throttledBps}, [3]uint64{uint64(got.Major), uint64(got.Minor), got.Rate},
		"the spec's read throttle of %s", dev.path)
	assert.Contains(t, cgroupLines(throttled, throttleReadBps), dev.number()+" "+strconv.Itoa(throttledBps), "the limit in the container's cgroup")
	rate := readRate(throttled)
	assert.InEpsilon(t, float64(throttledBps), rate, 0.2, "read rate of the throttled container: %.0f B/s", rate)

	other := sandbox.BusyboxPod("unthrottled")
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	other.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	if why := sb.CannotRun(other); why != "" {
		t.Logf("a Burstable pod instead of a Guaranteed one: %s", why)
		other.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	unthrottled := run(other)
	info, err = sb.CRI().Inspect(ctx, unthrottled)
	require.NoError(t, err)
	if info.BlockIO != nil {
		assert.Empty(t, info.BlockIO.ThrottleReadBpsDevice, "no throttle in the spec")
	}
	assert.NotContains(t, cgroupLines(unthrottled, throttleReadBps), dev.number(), "no limit in the container's cgroup")
	free := readRate(unthrottled)
	assert.Greater(t, free, 5.0*throttledBps, "read rate of the unthrottled container: %.0f B/s", free)

	if !dev.bfq {
		t.Logf("no weight check: %s's schedulers are %q, without bfq", dev.path, dev.schedulers)
		return
	}
	weightedPod := sandbox.BusyboxPod("weighted")
	weightedPod.Annotations = map[string]string{"blockio.nri-suite.io": "weighted"}
	weighted := run(weightedPod)
	info, err = sb.CRI().Inspect(ctx, weighted)
	require.NoError(t, err)
	require.NotNil(t, info.BlockIO)
	require.Len(t, info.BlockIO.WeightDevice, 1)
	require.NotNil(t, info.BlockIO.WeightDevice[0].Weight)
	assert.Equal(t, uint16(200), *info.BlockIO.WeightDevice[0].Weight, "the spec's weight of %s", dev.path)
	assert.Contains(t, cgroupLines(weighted, bfqWeights), dev.number()+" 200", "the BFQ weight in the container's cgroup")
}

// loopDevice is a loop device over a file of the test.
type loopDevice struct {
	path         string
	major, minor uint32
	// schedulers is its queue/scheduler as the kernel offered them; bfq:
	// the test made BFQ its scheduler.
	schedulers string
	bfq        bool
}

func (d loopDevice) number() string { return fmt.Sprintf("%d:%d", d.major, d.minor) }

// newLoopDevice attaches a 16 MiB file to a free loop device, with the BFQ
// scheduler where the kernel has it, and detaches it after the test.
func newLoopDevice(t *testing.T) loopDevice {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		testenv.Unavailable(t, "losetup (util-linux) is missing")
	}
	backing := filepath.Join(t.TempDir(), "disk")
	require.NoError(t, os.WriteFile(backing, make([]byte, 16<<20), 0o600))
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	require.NoError(t, err, "losetup: %s", out)
	d := loopDevice{path: strings.TrimSpace(string(out))}
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", d.path).CombinedOutput(); err != nil {
			t.Errorf("detaching %s: %v: %s", d.path, err, out)
		}
	})
	var st unix.Stat_t
	require.NoError(t, unix.Stat(d.path, &st))
	d.major, d.minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
	scheduler := filepath.Join("/sys/block", filepath.Base(d.path), "queue", "scheduler")
	data, err := os.ReadFile(scheduler)
	require.NoError(t, err)
	d.schedulers = strings.TrimSpace(string(data))
	if strings.Contains(" "+strings.NewReplacer("[", "", "]", "").Replace(d.schedulers)+" ", " bfq ") {
		before := regexp.MustCompile(`\[(.*)\]`).FindStringSubmatch(d.schedulers)
		require.NotNil(t, before, "the scheduler in use among %q", d.schedulers)
		require.NoError(t, os.WriteFile(scheduler, []byte("bfq"), 0o644))
		d.bfq = true
		// The device outlives its detaching: its scheduler goes back.
		t.Cleanup(func() { assert.NoError(t, os.WriteFile(scheduler, []byte(before[1]), 0o644)) })
	}
	t.Logf("loop device %s (%s) over %s; schedulers %q", d.path, d.number(), backing, d.schedulers)
	return d
}
