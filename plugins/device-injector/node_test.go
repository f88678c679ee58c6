package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestRealNode is issue 4's acceptance on a real node: the plugin binary as
// an external plugin of the real runtime, and as a pre-registered one that
// containerd launches itself (sandbox.Variants), pods from a real kubelet,
// the device checked inside the containers. One sandbox per variant carries
// all the steps, in order:
//
//  1. Injection, once per mode (the plugin restarted with another config
//     between them): a CDI spec in the runtime's spec directory describes a
//     char device node made with mknod (1:3, as /dev/null) in a private
//     directory, an env var and a bind mount of a host directory; a pod
//     asking for it by annotation sees the node (a char device 1:3 that it
//     can read), the variable and the file under the mount. containerd in
//     both modes; CRI-O in plugin mode (runtime mode skips: CRI-O v1.34
//     drops NRI's CDI adjustments).
//  2. Health: the node is removed on the host; the plugin's metrics show the
//     device Unhealthy within a bounded poll, as does the health record of
//     the container still running, and a new pod asking for it is refused
//     with reason unhealthy, in the plugin's metrics and in the kubelet's
//     report of the container's creation error.
func TestRealNode(t *testing.T) {
	sandbox.RunVariants(t, sandbox.Variants(), testRealNode)
}

// The device the spec describes, where it appears in containers, and what
// else its edits bring.
const (
	nodeDevice    = "nri-suite.test/node=dev0"
	nodeDevPath   = "/dev/nri-test-dev0"
	nodeEnvKey    = "NRI_TEST_DEVICE"
	nodeMountPath = "/nri-test-data"
	nodeDataFile  = "hello.txt"
)

func realNodeSpec(hostNode, hostData string) string {
	return fmt.Sprintf(`cdiVersion: "0.6.0"
kind: nri-suite.test/node
devices:
- name: dev0
  containerEdits:
    deviceNodes:
    - path: %s
      hostPath: %s
      type: c
      major: 1
      minor: 3
      permissions: rw
    env: [%s=dev0]
    mounts:
    - hostPath: %s
      containerPath: %s
      options: [ro, bind]
`, nodeDevPath, hostNode, nodeEnvKey, hostData, nodeMountPath)
}

// modesOf are the modes a runtime is tested in, with the reason a mode
// cannot work there ("" when it can).
func modesOf(runtime string) [][2]string {
	if runtime == "crio" {
		return [][2]string{
			{"runtime", "CRI-O v1.34 drops NRI's CDI adjustments silently: runtime mode cannot work there (plugin mode is its default)"},
			{"plugin", ""},
		}
	}
	return [][2]string{{"runtime", ""}, {"plugin", ""}}
}

func testRealNode(t *testing.T, v sandbox.Variant) {
	rt := v.Runtime
	sandbox.RequirePrereqs(t, rt)
	// Made before the sandbox, so that it is removed after the sandbox's
	// teardown, once no container mounts it any longer.
	host := t.TempDir()
	hostNode := filepath.Join(host, "dev0")
	hostData := filepath.Join(host, "data")
	require.NoError(t, os.Mkdir(hostData, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hostData, nodeDataFile), []byte("from the host\n"), 0o644))
	require.NoError(t, unix.Mknod(hostNode, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), "mknod of the test's device node")

	opts := v.Options()
	// No security plugin runs here, which the shipped containerd drop-in
	// requires: the test's pods tolerate its absence.
	opts.TolerateMissingPlugins = true
	sb := sandbox.NewForTest(t, opts)
	ctx := sandbox.TestContext(t)
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "nri-suite-test.yaml"), []byte(realNodeSpec(hostNode, hostData)), 0o644))
	binary := harness.BuildPlugin(t, pluginPkg)
	n := &realNode{sb: sb, ctx: ctx}

	for _, m := range modesOf(rt) {
		mode, cannot := m[0], m[1]
		ok := t.Run("Mode_"+mode, func(t *testing.T) {
			if cannot != "" {
				t.Skip(cannot)
			}
			n.startPlugin(t, binary, mode)
			pod := devicePod("dev-" + mode)
			require.NoError(t, sb.WritePod(pod))
			c, err := sb.WaitContainer(ctx, pod.Name, "main")
			require.NoError(t, err)

			stat, err := sb.CRI().Exec(ctx, c.ID, "stat", "-c", "%F %t:%T", nodeDevPath)
			require.NoError(t, err)
			assert.Equal(t, "character special file 1:3", strings.TrimSpace(stat), "the device node in the container")
			_, err = sb.CRI().Exec(ctx, c.ID, "cat", nodeDevPath)
			assert.NoError(t, err, "the device cgroup lets the container read the node")
			env, err := sb.Environ(ctx, c.ID)
			require.NoError(t, err)
			assert.Equal(t, "dev0", env[nodeEnvKey], "the spec's env var in the container")
			data, err := sb.ReadFile(ctx, c.ID, nodeMountPath+"/"+nodeDataFile)
			require.NoError(t, err, "the spec's mount in the container")
			assert.Equal(t, "from the host\n", data)
			assert.Equal(t, 1.0, n.metric(t, fmt.Sprintf(`nri_suite_device_injector_injections_total{kind="cdi",mode=%q}`, mode)),
				"the plugin injected the device in %s mode", mode)

			// The last mode's pod stays for the health step.
			if n.running != nil {
				require.NoError(t, sb.RemovePod(ctx, n.running.manifest))
			}
			n.running = &runningPod{manifest: pod.Name, container: c.ID}
		})
		if !ok {
			return
		}
	}

	t.Run("Unhealthy", func(t *testing.T) {
		require.NotNil(t, n.plugin, "a mode ran")
		sample := `nri_suite_device_injector_device_health{device="` + nodeDevice + `",health="Unhealthy"}`
		require.Equal(t, 0.0, n.metric(t, sample), "healthy while its node exists")
		require.NoError(t, os.Remove(hostNode))
		n.poll(t, "the device to turn Unhealthy in the plugin's metrics", func() error {
			if v := n.metric(t, sample); v != 1 {
				return fmt.Errorf("%s is %v", sample, v)
			}
			return nil
		})

		// The running container's own health record follows (KEP-4680's
		// allocatedResourcesStatus).
		records, err := state.ContainerHealthRecords(sb.SharedDir())
		require.NoError(t, err)
		n.poll(t, "the running container's health record to say Unhealthy", func() error {
			rec, found, err := records.Read(n.running.container)
			switch {
			case err != nil:
				return err
			case !found:
				return fmt.Errorf("no health record of container %s", n.running.container)
			case len(rec.Resources) != 1 || rec.Resources[0].Health != state.HealthUnhealthy:
				return fmt.Errorf("record %+v", rec)
			}
			assert.Equal(t, nodeDevice, rec.Resources[0].ResourceID)
			assert.Contains(t, rec.Resources[0].Message, hostNode+" is missing")
			return nil
		})

		refused := `nri_suite_device_injector_failures_total{reason="unhealthy"}`
		before := n.metric(t, refused)
		pod := devicePod("dev-unhealthy")
		require.NoError(t, sb.WritePod(pod))
		want := "unhealthy device " + nodeDevice + ": device node " + hostNode + " is missing"
		n.poll(t, "the kubelet to report the refused creation", func() error {
			if v := n.metric(t, refused); v <= before {
				return fmt.Errorf("%s is %v", refused, v)
			}
			log, err := os.ReadFile(sb.KubeletLog())
			if err != nil {
				return err
			}
			if !strings.Contains(string(log), want) {
				return fmt.Errorf("the kubelet's log does not say %q", want)
			}
			return nil
		})
		cs, err := sb.CRI().Containers(ctx)
		require.NoError(t, err)
		for _, c := range cs {
			assert.NotEqual(t, sb.PodName(pod.Name), c.Pod, "no container of the refused pod exists (%s %s)", c.Name, c.State)
		}
		require.NoError(t, sb.RemovePod(ctx, pod.Name))
	})
}

// realNode is the sandbox, the plugin and the pod of TestRealNode.
type realNode struct {
	ctx     context.Context
	sb      *sandbox.Sandbox
	plugin  *sandbox.Plugin
	running *runningPod // the pod of the last mode
}

type runningPod struct {
	manifest, container string
}

// startPlugin (re)starts the plugin in mode, checking health every 200ms.
func (n *realNode) startPlugin(t *testing.T, binary, mode string) {
	t.Helper()
	if n.plugin != nil {
		n.plugin.Stop(5 * time.Second)
	}
	spec := sandbox.PluginSpec{Binary: binary, Name: "device-injector", Idx: "10",
		Config: fmt.Appendf(nil, "spec-dirs: [%s]\nmode: %s\nhealth-interval: 200ms\n", n.sb.CDISpecDir(), mode)}
	p, err := n.sb.StartPlugin(spec)
	require.NoError(t, err)
	require.NoError(t, p.WaitReady(n.ctx))
	n.plugin = p
}

// devicePod is a busybox pod whose container main asks for the device.
func devicePod(name string) *corev1.Pod {
	pod := sandbox.BusyboxPod(name)
	pod.Annotations = map[string]string{"cdi-devices.nri-suite.io/container.main": nodeDevice}
	return pod
}

// metric scrapes the plugin's /metrics for one sample, written as in the
// exposition format with labels in name order; 0 when absent.
func (n *realNode) metric(t *testing.T, sample string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(n.ctx, http.MethodGet, "http://"+n.plugin.HTTPAddr()+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	scanner := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(t, err, "value of %s", sample)
			return v
		}
	}
	require.NoError(t, scanner.Err())
	return 0
}

// poll waits for check to pass, within 30 s.
func (n *realNode) poll(t *testing.T, what string, check func() error) {
	t.Helper()
	sandbox.Eventually(t, n.ctx, 30*time.Second, 100*time.Millisecond, what, check)
}
