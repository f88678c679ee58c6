package main_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

const askNull = `    cdi-devices.nri-suite.io/container.app: example.com/dev=null`

// holdLock takes the writers' lock of a shared-state directory, as a stuck
// writer would, until the returned release (or the test's end).
func holdLock(t *testing.T, dir string) (path string, release func()) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path = filepath.Join(dir, ".state.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() { f.Close() })
	return path, func() { require.NoError(t, f.Close()) }
}

// TestHeldStateLock: while another process holds devices/.state.lock, a
// container asking for a device is refused, with an error naming the lock
// and its holder: never created without its device, as it was when the
// plugin waited for the lock past NRI's 2 s timeout and the runtime dropped
// it. A Synchronize with several records to rebuild still answers, and once
// the lock is free containers get their devices again.
func TestHeldStateLock(t *testing.T) {
	n := startNode(t, "mode: plugin\n", map[string]string{"example.yaml": exampleSpec})
	n.plugin.Stop(t)
	for i := range 5 {
		n.rt.RunPod(t, harness.ParsePod(t, podYAML(fmt.Sprintf("early-%d", i), askNull, "app")))
	}
	lock, release := holdLock(t, n.records.Dir())

	n.plugin.Restart(t) // fails the test unless Synchronize answers
	assert.Contains(t, n.plugin.Log(), "rebuilt device record could not be published")

	p := n.rt.NewPod(t, harness.ParsePod(t, podYAML("locked", askNull, "app")))
	err := n.rt.StartPod(p)
	require.Error(t, err, "refused, not created without its device")
	assert.ErrorContains(t, err, "device-injector: container default/locked/app: publishing device locality")
	assert.ErrorContains(t, err, fmt.Sprintf("lock held: %s is held by pid %d (", lock, os.Getpid()))
	assert.Equal(t, api.ContainerState_CONTAINER_UNKNOWN, p.Container("app").State())

	release()
	app := n.rt.RunPod(t, harness.ParsePod(t, podYAML("after", askNull, "app"))).Container("app")
	app.RequireDevice(t, "/dev/example-null")
	_, found, err := n.records.Read(app.ID())
	require.NoError(t, err)
	assert.True(t, found)
}

// TestFIFOInSpecDirectory: FIFOs named like CDI specs, made while the plugin
// runs or there when it starts, neither block it nor hide the other specs:
// containers get their devices, a spec written after the FIFO is seen, and
// the FIFO is logged as a spec error. (The CDI library's own scan blocks on a
// FIFO, under the lock that every lookup takes.)
func TestFIFOInSpecDirectory(t *testing.T) {
	n := startNode(t, "mode: plugin\n", map[string]string{"example.yaml": exampleSpec})
	fifo := filepath.Join(n.specDir, "a-stuck.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	late := strings.NewReplacer("example.com", "late.com", "/dev/example-null", "/dev/late-null").Replace(exampleSpec)
	require.NoError(t, os.WriteFile(filepath.Join(n.specDir, "late.yaml"), []byte(late), 0o644))

	attempt := 0
	lateDevice := func() bool {
		attempt++
		p := n.rt.NewPod(t, harness.ParsePod(t, podYAML(fmt.Sprintf("late-%d", attempt),
			`    cdi-devices.nri-suite.io/container.app: late.com/dev=null`, "app")))
		return n.rt.StartPod(p) == nil && p.Container("app").Spec().Device("/dev/late-null") != nil
	}
	require.Eventually(t, lateDevice, 10*time.Second, 50*time.Millisecond, "a spec written after the FIFO is seen")
	app := n.rt.RunPod(t, harness.ParsePod(t, podYAML("early", askNull, "app"))).Container("app")
	app.RequireDevice(t, "/dev/example-null")

	n.plugin.Stop(t)
	n.plugin.Restart(t) // fails the test unless the plugin starts with the FIFO there
	require.True(t, lateDevice(), "specs are read at start despite the FIFO")
	assert.Contains(t, n.plugin.Log(), "CDI spec error")
	assert.Contains(t, n.plugin.Log(), "reading "+fifo+": it is a named pipe (FIFO): not a regular file")
}

// TestHangingAPIServer: with an API server that accepts connections and
// never answers, every refusal is still the plugin's own error (a handler
// waiting for the API server would miss NRI's 2 s deadline: the runtime
// would fail the creation with its timeout, then drop the plugin and create
// the next containers without it), and containers asking for a device still
// get it. The plugin did try the API server: it has requests hanging there.
func TestHangingAPIServer(t *testing.T) {
	var requests atomic.Int64
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, fmt.Appendf(nil, "apiVersion: v1\nkind: Config\n"+
		"clusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {}}]\n"+
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", srv.URL), 0o600))

	n := startNode(t, "mode: plugin\n", map[string]string{"example.yaml": exampleSpec}, "--kubeconfig", kubeconfig, "--node-name", "node-1")
	for i := range 30 {
		name := fmt.Sprint("refused-", i)
		p := n.rt.NewPod(t, harness.ParsePod(t, podYAML(name, "    devices.nri-suite.io: '[{path: /dev/full}]'", "app")))
		err := n.rt.StartPod(p)
		require.ErrorContains(t, err, "device-injector: container default/"+name+"/app: ")
		require.ErrorContains(t, err, "policy.device-paths allows nothing")
	}
	app := n.rt.RunPod(t, harness.ParsePod(t, podYAML("served", askNull, "app"))).Container("app")
	app.RequireDevice(t, "/dev/example-null")
	require.Eventually(t, func() bool { return requests.Load() > 0 }, 30*time.Second, 10*time.Millisecond,
		"the plugin asks the API server (Events, the node's condition)")
	assert.NotContains(t, n.plugin.Log(), "no API server")
}
