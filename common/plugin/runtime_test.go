package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every poll in these tests; nothing is expected to take long.
const waitTimeout = 15 * time.Second

// testRuntime is the runtime side of NRI (the adaptation containerd embeds) on a unix
// socket. The adaptation never closes its external plugins' connections, even when
// stopped, so plugins reach it through a proxy that kill() cuts: what a plugin sees
// then is what it sees when a runtime process dies.
type testRuntime struct {
	t       *testing.T
	nri     *adaptation.Adaptation
	proxy   net.Listener
	metrics *invocations

	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

// startRuntime starts a runtime serving socket whose Synchronize reports pods and ctrs.
func startRuntime(t *testing.T, socket string, pods []*api.PodSandbox, ctrs []*api.Container) *testRuntime {
	t.Helper()
	internal := filepath.Join(shortTempDir(t), "nri-internal.sock")
	rt := &testRuntime{t: t, metrics: &invocations{}}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, pods, ctrs)
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		return nil, nil
	}
	var err error
	rt.nri, err = adaptation.New("test-runtime", "v0.0.1", syncFn, updateFn,
		adaptation.WithSocketPath(internal),
		adaptation.WithPluginPath(filepath.Join(shortTempDir(t), "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(shortTempDir(t), "conf.d")),
		adaptation.WithMetrics(rt.metrics),
	)
	require.NoError(t, err)
	require.NoError(t, rt.nri.Start())

	rt.proxy, err = net.Listen("unix", socket)
	require.NoError(t, err)
	go rt.acceptLoop(internal)
	t.Cleanup(rt.kill)
	return rt
}

func (rt *testRuntime) acceptLoop(internal string) {
	for {
		c, err := rt.proxy.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", internal)
		if err != nil {
			c.Close()
			continue
		}
		rt.mu.Lock()
		if rt.killed {
			rt.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		rt.conns = append(rt.conns, c, up)
		rt.mu.Unlock()
		go pipe(c, up)
		go pipe(up, c)
	}
}

// pipe copies until either side fails, then closes both, as a dying process would.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// kill makes the runtime vanish: socket gone, every plugin connection closed.
func (rt *testRuntime) kill() {
	rt.mu.Lock()
	if rt.killed {
		rt.mu.Unlock()
		return
	}
	rt.killed = true
	conns := rt.conns
	rt.mu.Unlock()

	rt.proxy.Close() // also unlinks the socket
	for _, c := range conns {
		c.Close()
	}
	rt.nri.Stop()
}

// createContainer creates like containerd does: holding off plugin synchronization,
// which also waits for a plugin whose Synchronize is in flight to be fully added.
func (rt *testRuntime) createContainer(pod *api.PodSandbox, ctr *api.Container) (*api.CreateContainerResponse, error) {
	block := rt.nri.BlockPluginSync()
	defer block.Unblock()
	return rt.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
}

// invocations records which operations the runtime sent to which plugin: the
// runtime's own account of the plugin's subscription.
type invocations struct {
	mu  sync.Mutex
	ops []string
}

func (m *invocations) RecordPluginInvocation(_, op string, _ error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops = append(m.ops, op)
}

func (m *invocations) recorded() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ops...)
}

func (m *invocations) RecordPluginLatency(string, string, time.Duration) {}
func (m *invocations) RecordPluginAdjustments(string, string, *api.ContainerAdjustment, int, int) {
}
func (m *invocations) UpdatePluginCount(int) {}

// shortTempDir is a temporary directory with a path short enough for unix sockets
// (108 bytes), which t.TempDir() with long test names can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testPod(name string) *api.PodSandbox {
	return &api.PodSandbox{Id: "pod-" + name, Name: name, Namespace: "default", Uid: "uid-" + name}
}

func testContainer(pod *api.PodSandbox, name string) *api.Container {
	return &api.Container{
		Id:           pod.Name + "-" + name,
		PodSandboxId: pod.Id,
		Name:         name,
		State:        api.ContainerState_CONTAINER_RUNNING,
	}
}

// syncBuffer is a log sink the runner writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRunner runs a runner for the test's duration; the returned function stops it
// and returns Run's error.
func startRunner(t *testing.T, s Settings, factory Factory) (*Runner, func() error) {
	t.Helper()
	r, err := New(s, factory)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(waitTimeout):
				runErr = errors.New("runner did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// httpGet polls until the runner serves HTTP, then returns status and body of path.
func httpGet(t *testing.T, r *Runner, path string) (int, string) {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool { addr = r.HTTPAddr(); return addr != "" }, waitTimeout, 10*time.Millisecond)
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// waitReadyz polls /readyz until it answers want and its body contains substr.
func waitReadyz(t *testing.T, r *Runner, want int, substr string) {
	t.Helper()
	var code int
	var body string
	ok := assertEventually(func() bool {
		code, body = httpGet(t, r, "/readyz")
		return code == want && bytes.Contains([]byte(body), []byte(substr))
	})
	require.Truef(t, ok, "/readyz: want %d containing %q, last got %d %q", want, substr, code, body)
}

// assertEventually polls cond until it holds or waitTimeout passes.
func assertEventually(cond func() bool) bool {
	deadline := time.Now().Add(waitTimeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
