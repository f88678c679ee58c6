package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

// recorder is a plugin that remembers what it was asked, in memory: the state a
// reconnect must keep.
type recorder struct {
	mu       sync.Mutex
	deps     Deps
	created  []string
	syncs    [][]string
	sources  []string
	env      map[string]string
	runtimes []string
	closed   int
}

type recorderConfig struct {
	Env map[string]string `yaml:"env"`
}

func newRecorder() (*recorder, Factory) {
	p := &recorder{}
	return p, func(d Deps) (any, error) {
		p.deps = d
		return p, nil
	}
}

func (p *recorder) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	switch ctr.GetName() {
	case "boom":
		_ = ctr.GetArgs()[1] // a genuine bug: the container has no arguments
	case "refused":
		return nil, nil, errors.New("test-plugin: container " + ctr.GetId() + " refused")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created = append(p.created, ctr.GetId())
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("SEEN_BY", p.deps.Name)
	return adjust, nil, nil
}

func (p *recorder) Synchronize(_ context.Context, _ []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	ids := make([]string, 0, len(ctrs))
	for _, c := range ctrs {
		ids = append(ids, c.GetId())
	}
	slices.Sort(ids)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs = append(p.syncs, ids)
	return nil, nil
}

func (p *recorder) SetRuntime(name, version string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runtimes = append(p.runtimes, name+" "+version)
}

func (p *recorder) Configure(data []byte, source string) error {
	var cfg recorderConfig
	if err := DecodeConfig(data, source, &cfg); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sources = append(p.sources, source)
	p.env = cfg.Env
	return nil
}

func (p *recorder) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed++
	return nil
}

func (p *recorder) snapshot() recorder {
	p.mu.Lock()
	defer p.mu.Unlock()
	return recorder{
		created:  slices.Clone(p.created),
		syncs:    slices.Clone(p.syncs),
		sources:  slices.Clone(p.sources),
		env:      p.env,
		runtimes: slices.Clone(p.runtimes),
		closed:   p.closed,
	}
}

func testSettings(socket string, log io.Writer) Settings {
	s := DefaultSettings("test-plugin")
	s.Idx = "50"
	s.SocketPath = socket
	s.SharedDir = filepath.Join(filepath.Dir(socket), "shared") // never the host's default
	s.HTTPAddr = "127.0.0.1:0"
	s.LogFormat = "json"
	s.LogOutput = log
	return s
}

// metricValue reads a counter or gauge from the runner's registry; ok is false when
// no series has these labels.
func metricValue(t *testing.T, r *Runner, name string, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	families, err := r.registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, set := labels[l.GetName()]; set && want != l.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// envOf returns the environment an adjustment adds.
func envOf(adjust *api.ContainerAdjustment) map[string]string {
	env := map[string]string{}
	for _, kv := range adjust.GetEnv() {
		env[kv.GetKey()] = kv.GetValue()
	}
	return env
}

func TestRunnerRegistersSynchronizesAndServesHealth(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	pod := testPod("web")
	startRuntime(t, socket, []*api.PodSandbox{pod},
		[]*api.Container{testContainer(pod, "app"), testContainer(pod, "sidecar")})
	p, factory := newRecorder()
	r, stop := startRunner(t, testSettings(socket, io.Discard), factory)

	waitReadyz(t, r, 200, "ready")
	assert.Equal(t, [][]string{{"web-app", "web-sidecar"}}, p.snapshot().syncs)

	code, body := httpGet(t, r, "/healthz")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)
	code, body = httpGet(t, r, "/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "nri_suite_test_plugin_connected 1")
	assert.Contains(t, body, "go_goroutines ")
	assert.Contains(t, body, "process_start_time_seconds ")

	addr := r.HTTPAddr()
	require.NoError(t, stop())
	assert.Equal(t, 1, p.snapshot().closed, "Close is called once at stop")
	_, err := net.Dial("tcp", addr)
	assert.Error(t, err, "HTTP stops with the runner")
}

func TestRunnerRecoversHandlerPanic(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)
	logs := &syncBuffer{}
	p, factory := newRecorder()
	r, _ := startRunner(t, testSettings(socket, logs), factory)
	waitReadyz(t, r, 200, "ready")

	pod := testPod("web")
	_, err := rt.createContainer(pod, testContainer(pod, "boom"))
	require.Error(t, err, "the panicking request fails")
	assert.Contains(t, err.Error(), "CreateContainer handler panicked")

	reply, err := rt.createContainer(pod, testContainer(pod, "app"))
	require.NoError(t, err, "the next request is served")
	assert.Equal(t, map[string]string{"SEEN_BY": "test-plugin"}, envOf(reply.GetAdjust()))
	assert.Equal(t, []string{"web-app"}, p.snapshot().created)

	for _, tc := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"nri_suite_test_plugin_handler_panics_total", map[string]string{"event": "CreateContainer"}, 1},
		{"nri_suite_test_plugin_requests_total", map[string]string{"event": "CreateContainer", "outcome": "panic"}, 1},
		{"nri_suite_test_plugin_requests_total", map[string]string{"event": "CreateContainer", "outcome": "ok"}, 1},
		{"nri_suite_test_plugin_connected", nil, 1},
	} {
		got, ok := metricValue(t, r, tc.metric, tc.labels)
		assert.True(t, ok, "%s%v exists", tc.metric, tc.labels)
		assert.Equal(t, tc.want, got, "%s%v", tc.metric, tc.labels)
	}

	var panicLine map[string]any
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["level"] == "error" && entry["event"] == "CreateContainer" {
			panicLine = entry
		}
	}
	require.NotNil(t, panicLine, "the panic is logged at error level")
	assert.Equal(t, "web", panicLine["pod"])
	assert.Equal(t, "default", panicLine["namespace"])
	assert.Equal(t, "boom", panicLine["container"])
	assert.Equal(t, "CreateContainer", panicLine["event"])
	assert.Equal(t, "test-plugin", panicLine["plugin"])
	assert.Contains(t, panicLine["panic"], "index out of range")
}

func TestRunnerWaitsForAbsentSocket(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	logs := &syncBuffer{}
	_, factory := newRecorder()
	r, _ := startRunner(t, testSettings(socket, logs), factory)

	waitReadyz(t, r, 503, "connect to NRI socket "+socket)
	pod := testPod("db")
	startRuntime(t, socket, []*api.PodSandbox{pod}, []*api.Container{testContainer(pod, "postgres")})
	waitReadyz(t, r, 200, "ready")

	assert.Equal(t, 1, strings.Count(logs.String(), "waiting for the runtime"), "the outage is logged once")
	got, _ := metricValue(t, r, "nri_suite_test_plugin_reconnects_total", nil)
	assert.Zero(t, got, "the first registration is no reconnect")
}

func TestRunnerReconnectsAfterRuntimeRestart(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	first := startRuntime(t, socket, nil, nil)
	p, factory := newRecorder()
	r, _ := startRunner(t, testSettings(socket, io.Discard), factory)
	waitReadyz(t, r, 200, "ready")

	pod := testPod("web")
	_, err := first.createContainer(pod, testContainer(pod, "app"))
	require.NoError(t, err)

	first.kill()
	waitReadyz(t, r, 503, "")
	connected, _ := metricValue(t, r, "nri_suite_test_plugin_connected", nil)
	assert.Zero(t, connected)

	second := startRuntime(t, socket, []*api.PodSandbox{pod},
		[]*api.Container{testContainer(pod, "app"), testContainer(pod, "sidecar")})
	waitReadyz(t, r, 200, "ready")

	got := p.snapshot()
	assert.Equal(t, [][]string{{}, {"web-app", "web-sidecar"}}, got.syncs,
		"the new runtime's Synchronize reaches the same plugin value")
	assert.Equal(t, []string{"web-app"}, got.created, "in-memory state survives the reconnect")
	reconnects, _ := metricValue(t, r, "nri_suite_test_plugin_reconnects_total", nil)
	assert.Equal(t, 1.0, reconnects)

	_, err = second.createContainer(pod, testContainer(pod, "late"))
	require.NoError(t, err, "the new connection serves requests")
	assert.Equal(t, []string{"web-app", "web-late"}, p.snapshot().created)
}

// onlyCreate implements a single event handler.
type onlyCreate struct{}

func (onlyCreate) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

func TestRunnerSubscribesOnlyImplementedEvents(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)
	r, _ := startRunner(t, testSettings(socket, io.Discard), func(Deps) (any, error) { return onlyCreate{}, nil })
	waitReadyz(t, r, 200, "ready")

	ctx := context.Background()
	pod := testPod("web")
	ctr := testContainer(pod, "app")
	_, err := rt.createContainer(pod, ctr)
	require.NoError(t, err)
	require.NoError(t, rt.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}))
	_, err = rt.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: &api.LinuxResources{}})
	require.NoError(t, err)
	_, err = rt.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
	require.NoError(t, err)
	require.NoError(t, rt.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}))

	assert.Equal(t, []string{"Synchronize", "CreateContainer"}, rt.metrics.recorded(),
		"the runtime sends only the events the plugin implements")
}

func TestRunnerPreRegisteredExitsWhenConnectionCloses(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)

	// What a runtime does for a plugin in its plugin directory: a connected socket on
	// a file descriptor, name and index in the environment.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	local := os.NewFile(uintptr(fds[0]), "runtime end")
	runtimeEnd, err := net.FileConn(local)
	require.NoError(t, err)
	local.Close()
	up, err := net.Dial("unix", socket)
	require.NoError(t, err)
	go pipe(runtimeEnd, up)
	go pipe(up, runtimeEnd)
	t.Setenv(api.PluginSocketEnvVar, strconv.Itoa(fds[1])) // the stub takes this fd over
	t.Setenv(api.PluginNameEnvVar, "launched")
	t.Setenv(api.PluginIdxEnvVar, "60")

	p, factory := newRecorder()
	s := testSettings("/nonexistent/nri.sock", io.Discard)
	s.Name = "flag-name" // the runtime's choice wins
	r, err := New(s, factory)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()

	waitReadyz(t, r, 200, "ready")
	assert.Equal(t, "launched", p.deps.Name)

	rt.kill()
	select {
	case err := <-done:
		require.NoError(t, err, "a pre-registered plugin ends cleanly when its runtime goes")
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after the pre-registered connection closed")
	}
	assert.Equal(t, 1, p.snapshot().closed)
}

func TestNewConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	good := write("good.yaml", "env:\n  A: b\n")
	malformed := write("malformed.yaml", "env: [unclosed\n")
	unknown := write("unknown.yaml", "env:\n  A: b\nenvs: {}\n")
	missing := filepath.Join(dir, "missing.yaml")
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	huge := write("huge.yaml", "# "+strings.Repeat("x", MaxConfigSize)+"\n")

	for _, tc := range []struct {
		name    string
		file    string
		factory Factory
		wantErr []string
	}{
		{name: "valid file applied", file: good},
		{name: "missing file", file: missing, wantErr: []string{"config file: reading " + missing, "no such file"}},
		// A FIFO without a writer would block the start for good.
		{name: "FIFO", file: fifo, wantErr: []string{"config file: reading " + fifo + ": it is a named pipe (FIFO): not a regular file"}},
		{name: "directory", file: dir, wantErr: []string{"config file: reading " + dir + ": it is a directory: not a regular file"}},
		{name: "above the limit", file: huge, wantErr: []string{"config file: reading " + huge + ": larger than the limit of 1 MiB"}},
		{name: "malformed YAML", file: malformed, wantErr: []string{"decode config " + malformed, "line 1"}},
		{name: "unknown key", file: unknown, wantErr: []string{"decode config " + unknown, `line 3: unknown key "envs"`}},
		{
			name: "plugin without configuration", file: good,
			factory: func(Deps) (any, error) { return onlyCreate{}, nil },
			wantErr: []string{"--config " + good, "takes no configuration"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, factory := newRecorder()
			if tc.factory != nil {
				factory = tc.factory
			}
			s := testSettings("/nonexistent/nri.sock", io.Discard)
			s.ConfigFile = tc.file
			r, err := New(s, factory)
			if tc.factory != nil {
				require.Error(t, err, "a usage error stops the start")
				assertContainsAll(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.wantErr == nil {
				assert.Equal(t, []string{good}, p.snapshot().sources)
				assert.Equal(t, map[string]string{"A": "b"}, p.snapshot().env)
				return
			}
			// The file's own errors hold Run until it is fixed or stopped.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err = r.Run(ctx)
			require.Error(t, err)
			assertContainsAll(t, err.Error(), tc.wantErr)
			assert.Empty(t, p.snapshot().sources, "nothing was applied")
		})
	}
}

func assertContainsAll(t *testing.T, s string, subs []string) {
	t.Helper()
	for _, sub := range subs {
		assert.Contains(t, s, sub)
	}
}

// A --config file that cannot be applied holds the plugin off the runtime, ready
// never, with the error as /readyz's answer and in the log, until the file is
// fixed: then it applies and the plugin connects, without a restart.
func TestRunWaitsForAGoodConfigFile(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	pod := testPod("web")
	startRuntime(t, socket, []*api.PodSandbox{pod}, []*api.Container{testContainer(pod, "app")})
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("envs: {A: b}\n"), 0o600))
	p, factory := newRecorder()
	log := &syncBuffer{}
	s := testSettings(socket, log)
	s.ConfigFile = path
	r, _ := startRunner(t, s, factory)

	waitReadyz(t, r, 503, "not ready: configure plugin test-plugin: decode config "+path+`: line 1: unknown key "envs"`)
	assert.Contains(t, log.String(), `unknown key \"envs\"`, "the log names the key")
	assert.Empty(t, p.snapshot().syncs, "not registered with a configuration nobody wrote")

	require.NoError(t, os.WriteFile(path, []byte("env: {A: b}\n"), 0o600))
	waitReadyz(t, r, 200, "ready")
	assert.Equal(t, []string{path}, p.snapshot().sources)
	assert.Equal(t, map[string]string{"A": "b"}, p.snapshot().env)
	assert.Equal(t, [][]string{{"web-app"}}, p.snapshot().syncs, "registered once the file applied")
}

func TestConfigureFromRuntime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		config      string
		factory     func(*recorder) any
		wantSources []string
		wantErr     string
	}{
		{name: "empty config keeps the plugin's own", config: "", wantSources: nil},
		{name: "config applied", config: "env: {A: b}\n", wantSources: []string{"NRI Configure from containerd v2.4.2"}},
		{name: "unknown key rejected", config: "bogus: 1\n", wantErr: `NRI Configure from containerd v2.4.2: line 1: unknown key "bogus"`},
		{name: "above the limit", config: "# " + strings.Repeat("x", MaxConfigSize) + "\n",
			wantErr: fmt.Sprintf("configuration (NRI Configure from containerd v2.4.2): %d bytes, above the limit of 1 MiB", MaxConfigSize+3)},
		{
			name: "plugin without configuration", config: "env: {}\n",
			factory: func(*recorder) any { return onlyCreate{} },
			wantErr: "takes none",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, factory := newRecorder()
			if tc.factory != nil {
				factory = func(Deps) (any, error) { return tc.factory(p), nil }
			}
			r, err := New(testSettings("/nonexistent/nri.sock", io.Discard), factory)
			require.NoError(t, err)
			events, err := r.wrapper.Configure(context.Background(), tc.config, "containerd", "v2.4.2")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, r.wrapper.events, events)
			assert.Equal(t, tc.wantSources, p.snapshot().sources)
			if tc.factory == nil {
				assert.Equal(t, []string{"containerd v2.4.2"}, p.snapshot().runtimes,
					"a RuntimeAware plugin learns the runtime at registration, with or without config")
			}
		})
	}
}

func TestRunnerRefusesUnusableHTTPAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	p, factory := newRecorder()
	s := testSettings("/nonexistent/nri.sock", io.Discard)
	s.HTTPAddr = busy.Addr().String()
	r, err := New(s, factory)
	require.NoError(t, err)
	err = r.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen on --http-addr "+s.HTTPAddr)
	assert.Equal(t, 1, p.snapshot().closed, "the plugin is closed even when Run fails")
}

// Several --http-addr addresses serve the same endpoints (a plugin on the
// node's network: probes on loopback, Prometheus on the node's address),
// and all of them stop with the runner.
func TestRunnerServesEveryHTTPAddr(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	startRuntime(t, socket, nil, nil)
	logs := &syncBuffer{}
	s := testSettings(socket, logs)
	s.HTTPAddr = "127.0.0.1:0, [::1]:0"
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		s.HTTPAddr = "127.0.0.1:0,127.0.0.2:0" // no IPv6 loopback here
	} else {
		ln.Close()
	}
	_, factory := newRecorder()
	r, stop := startRunner(t, s, factory)
	waitReadyz(t, r, 200, "ready")

	var addrs []string
	for line := range strings.Lines(logs.String()) {
		var entry struct{ Msg, Addr string }
		require.NoError(t, json.Unmarshal([]byte(line), &entry))
		if entry.Msg == "serving /metrics, /healthz and /readyz" {
			addrs = append(addrs, entry.Addr)
		}
	}
	require.Len(t, addrs, 2, "one listener per address: %s", logs)
	assert.NotEqual(t, addrs[0], addrs[1])
	for _, addr := range addrs {
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err, addr)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Contains(t, string(body), "nri_suite_test_plugin_connected 1", addr)
	}
	require.NoError(t, stop())
	for _, addr := range addrs {
		_, err := net.Dial("tcp", addr)
		assert.Error(t, err, "%s stops with the runner", addr)
	}
}

// An address that cannot be bound fails the start, naming it, and the
// addresses bound before it are let go.
func TestRunnerRefusesOneUnusableHTTPAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	freeAddr := free.Addr().String()
	free.Close()
	_, factory := newRecorder()
	s := testSettings("/nonexistent/nri.sock", io.Discard)
	s.HTTPAddr = freeAddr + "," + busy.Addr().String()
	r, err := New(s, factory)
	require.NoError(t, err)
	err = r.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen on --http-addr "+busy.Addr().String())
	ln, err := net.Listen("tcp", freeAddr)
	require.NoError(t, err, "the first address was let go")
	ln.Close()
}

// failingSync fails its first Synchronize, as a plugin with a transient problem would.
type failingSync struct {
	onlyCreate
	mu    sync.Mutex
	calls int
}

func (p *failingSync) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls == 1 {
		return nil, errors.New("state directory not mounted yet")
	}
	return nil, nil
}

func TestRunnerRetriesAfterFailedSynchronize(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	startRuntime(t, socket, nil, nil)
	p := &failingSync{}
	r, _ := startRunner(t, testSettings(socket, io.Discard), func(Deps) (any, error) { return p, nil })

	waitReadyz(t, r, 200, "ready")
	for _, tc := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"nri_suite_test_plugin_requests_total", map[string]string{"event": "Synchronize", "outcome": "error"}, 1},
		{"nri_suite_test_plugin_requests_total", map[string]string{"event": "Synchronize", "outcome": "ok"}, 1},
		{"nri_suite_test_plugin_reconnects_total", nil, 1},
	} {
		got, ok := metricValue(t, r, tc.metric, tc.labels)
		assert.True(t, ok, "%s%v exists", tc.metric, tc.labels)
		assert.Equal(t, tc.want, got, "%s%v", tc.metric, tc.labels)
	}
}

func TestRunnerPublishesItsStatusToSharedState(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	settings := testSettings(socket, io.Discard)
	statuses, err := state.PluginStatuses(settings.SharedDir)
	require.NoError(t, err)
	read := func() (state.PluginStatus, bool) {
		st, found, err := statuses.Read("50-test-plugin")
		require.NoError(t, err)
		return st, found
	}

	_, factory := newRecorder()
	r, stop := startRunner(t, settings, factory)
	waitReadyz(t, r, 503, "") // no runtime yet
	require.True(t, assertEventually(func() bool { _, found := read(); return found }))
	st, _ := read()
	assert.False(t, st.Connected)
	assert.False(t, st.Ready)
	assert.Equal(t, os.Getpid(), st.PID)
	assert.Equal(t, 50, st.Index)

	rt := startRuntime(t, socket, nil, nil)
	waitReadyz(t, r, 200, "ready")
	require.True(t, assertEventually(func() bool { st, _ = read(); return st.Ready }))
	assert.True(t, st.Connected)
	assert.False(t, st.LastSynchronize.IsZero(), "the record says when the plugin last synchronized")

	rt.kill()
	require.True(t, assertEventually(func() bool { st, _ = read(); return !st.Connected }),
		"a lost runtime is published too")
	assert.False(t, st.Ready)

	require.NoError(t, stop())
	_, found := read()
	assert.False(t, found, "a clean stop withdraws the record")
}

// A plugin that holds itself not ready (Deps.NotReady) is not ready while
// connected (/readyz saying why, the published record not ready) until it
// releases.
func TestRunnerNotReadyHeldByThePlugin(t *testing.T) {
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	settings := testSettings(socket, io.Discard)
	statuses, err := state.PluginStatuses(settings.SharedDir)
	require.NoError(t, err)
	startRuntime(t, socket, nil, nil)
	p, factory := newRecorder()
	r, _ := startRunner(t, settings, factory)
	waitReadyz(t, r, 200, "ready")

	p.deps.NotReady("loading --stats-tls-cert /x: no such file")
	waitReadyz(t, r, 503, "not ready: loading --stats-tls-cert /x: no such file")
	st, _, err := statuses.Read("50-test-plugin")
	require.NoError(t, err)
	assert.True(t, st.Connected)
	assert.False(t, st.Ready, "the published record is not ready either")

	p.deps.NotReady("")
	waitReadyz(t, r, 200, "ready")
	st, _, err = statuses.Read("50-test-plugin")
	require.NoError(t, err)
	assert.True(t, st.Ready)
}

// legacyAware handles creation and validation but, like security, subscribes to
// validation only on runtimes whose NRI has it.
type legacyAware struct {
	onlyCreate
	runtime string
	only    api.EventMask // what Events keeps on "old-runtime"; 0: nothing
}

func (p *legacyAware) SetRuntime(name, _ string) { p.runtime = name }

func (*legacyAware) ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error {
	return nil
}

func (p *legacyAware) Events(implemented api.EventMask) api.EventMask {
	if p.runtime == "old-runtime" {
		return p.only | api.MustParseEventMask("RunPodSandbox") // not implemented: ignored
	}
	return implemented
}

func TestConfigureAppliesEventFilter(t *testing.T) {
	create := api.MustParseEventMask("CreateContainer")
	both := api.MustParseEventMask("CreateContainer,ValidateContainerAdjustment")
	for _, tc := range []struct {
		runtime string
		only    api.EventMask
		want    api.EventMask
		wantErr string
	}{
		{runtime: "containerd", want: both},
		{runtime: "old-runtime", only: create, want: create},
		{runtime: "old-runtime", wantErr: "subscribes to no NRI event on this runtime"},
	} {
		t.Run(tc.runtime+"/"+tc.want.PrettyString(), func(t *testing.T) {
			p := &legacyAware{only: tc.only}
			r, err := New(testSettings("/nonexistent/nri.sock", io.Discard), func(Deps) (any, error) { return p, nil })
			require.NoError(t, err)
			require.Equal(t, both, r.wrapper.events, "the implemented events")
			events, err := r.wrapper.Configure(context.Background(), "", tc.runtime, "v1")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want.PrettyString(), events.PrettyString())
		})
	}
}

// Updates are sent in batches under the transport's message limit, in
// order, and every update is in exactly one batch.
func TestBatchUpdates(t *testing.T) {
	var updates []*api.ContainerUpdate
	for i := range 100 {
		u := &api.ContainerUpdate{ContainerId: fmt.Sprintf("%064d", i)}
		u.SetLinuxCPUSetCPUs(strings.Repeat("0,", 50) + "1")
		updates = append(updates, u)
	}
	one := updates[0].SizeVT()
	limit := 10 * (one + 3)
	var got []*api.ContainerUpdate
	batches := 0
	for sent, batch := range batchUpdates(updates, limit) {
		assert.Equal(t, len(got), sent, "yielded with the number sent before it")
		size := 0
		for _, u := range batch {
			size += u.SizeVT() + 3
		}
		assert.LessOrEqual(t, size, limit)
		got = append(got, batch...)
		batches++
	}
	assert.Equal(t, updates, got)
	assert.Equal(t, 10, batches)

	huge := &api.ContainerUpdate{ContainerId: "huge"}
	huge.SetLinuxCPUSetCPUs(strings.Repeat("0,", 5000) + "1")
	batches = 0
	for _, batch := range batchUpdates([]*api.ContainerUpdate{updates[0], huge, updates[1]}, limit) {
		batches++
		assert.NotEmpty(t, batch)
	}
	assert.Equal(t, 3, batches, "an update above the limit goes alone")
}
