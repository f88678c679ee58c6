package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/e2e/testplugin/syncreport"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const waitTimeout = 15 * time.Second

func newForTest(t *testing.T) *testPlugin {
	t.Helper()
	p, err := newTestPlugin(plugin.Deps{Name: "e2e-test", Log: logrus.NewEntry(logrus.New())})
	require.NoError(t, err)
	return p.(*testPlugin)
}

func envOf(adjust *api.ContainerAdjustment) []string {
	var env []string
	for _, kv := range adjust.GetEnv() {
		env = append(env, kv.GetKey()+"="+kv.GetValue())
	}
	return env
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		wantEnv []string
		wantErr string
	}{
		{name: "no config: default names the plugin", config: "", wantEnv: []string{"NRI_SUITE_E2E=e2e-test"}},
		{name: "env replaces the default, in key order", config: "env: {B: two, A: one}\n", wantEnv: []string{"A=one", "B=two"}},
		{name: "explicit empty env adds nothing", config: "env: {}\n", wantEnv: nil},
		{name: "only a report keeps the default env", config: "syncReport: /tmp/r.json\n", wantEnv: []string{"NRI_SUITE_E2E=e2e-test"}},
		{name: "unknown key", config: "envs: {A: b}\n", wantErr: `cfg.yaml: line 1: unknown key "envs"`},
		{name: "key with '='", config: "env: {\"A=B\": c}\n", wantErr: `env key "A=B": expected a non-empty name without '='`},
		{name: "empty key", config: "env: {\"\": c}\n", wantErr: `env key ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newForTest(t)
			err := p.Configure([]byte(tc.config), "cfg.yaml")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			adjust, updates, err := p.CreateContainer(context.Background(), nil, nil)
			require.NoError(t, err)
			assert.Empty(t, updates)
			assert.Equal(t, tc.wantEnv, envOf(adjust))
		})
	}
}

func readReport(t *testing.T, path string) (syncreport.Report, bool) {
	t.Helper()
	r, found, err := syncreport.Read(path)
	require.NoError(t, err, "the report is always complete JSON")
	return r, found
}

func TestSynchronizeWritesReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	p := newForTest(t)
	require.NoError(t, p.Configure([]byte("syncReport: "+path+"\n"), "cfg.yaml"))

	pods := []*api.PodSandbox{
		{Id: "p2", Name: "web", Namespace: "prod"},
		{Id: "p1", Name: "db", Namespace: "prod"},
	}
	ctrs := []*api.Container{
		{Id: "c3", PodSandboxId: "p2", Name: "app", State: api.ContainerState_CONTAINER_RUNNING},
		{Id: "c1", PodSandboxId: "p1", Name: "postgres", State: api.ContainerState_CONTAINER_STOPPED},
		{Id: "c9", PodSandboxId: "gone", Name: "orphan", State: api.ContainerState_CONTAINER_CREATED},
	}
	for round := 1; round <= 2; round++ {
		_, err := p.Synchronize(context.Background(), pods, ctrs)
		require.NoError(t, err)
		got, ok := readReport(t, path)
		require.True(t, ok)
		assert.Equal(t, syncreport.Report{
			Synchronizations: round,
			Containers: []syncreport.Container{
				{ID: "c9", Container: "orphan", State: "CONTAINER_CREATED"},
				{ID: "c1", Pod: "db", Namespace: "prod", Container: "postgres", State: "CONTAINER_STOPPED"},
				{ID: "c3", Pod: "web", Namespace: "prod", Container: "app", State: "CONTAINER_RUNNING"},
			},
		}, got)
	}

	_, err := p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"containers": []`, "no containers is an empty list, not null")

	require.NoError(t, p.Close())
	got, _ := readReport(t, path)
	assert.Equal(t, syncreport.Report{Synchronizations: 3, Closed: true, Containers: []syncreport.Container{}}, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

func TestSynchronizeReportsUnwritablePath(t *testing.T) {
	p := newForTest(t)
	path := filepath.Join(t.TempDir(), "missing-dir", "report.json")
	require.NoError(t, p.Configure([]byte("syncReport: "+path+"\n"), "cfg.yaml"))
	_, err := p.Synchronize(context.Background(), nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "writing sync report "+path)
}

// buildBinary builds this plugin into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nri-e2e-test")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// shortTempDir keeps unix socket paths under their 108-byte limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

var (
	testPod  = &api.PodSandbox{Id: "pod-1", Name: "web", Namespace: "default"}
	survivor = &api.Container{Id: "ctr-1", PodSandboxId: "pod-1", Name: "app", State: api.ContainerState_CONTAINER_RUNNING}
)

// startRuntime runs NRI's runtime side with one running container; plugins in dir's
// plugins/ are launched pre-registered with config from dir's conf.d/.
func startRuntime(t *testing.T, dir string) *adaptation.Adaptation {
	t.Helper()
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, []*api.PodSandbox{testPod}, []*api.Container{survivor})
		return err
	}
	updateFn := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	rt, err := adaptation.New("test-runtime", "v0.0.1", syncFn, updateFn,
		adaptation.WithSocketPath(filepath.Join(dir, "nri.sock")),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
	)
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	t.Cleanup(rt.Stop)
	return rt
}

func createEnv(t *testing.T, rt *adaptation.Adaptation) []string {
	t.Helper()
	ctr := &api.Container{Id: "ctr-2", PodSandboxId: "pod-1", Name: "new"}
	// As containerd does; this also waits until a synchronizing plugin is fully added.
	block := rt.BlockPluginSync()
	defer block.Unblock()
	reply, err := rt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: testPod, Container: ctr})
	require.NoError(t, err)
	return envOf(reply.GetAdjust())
}

// waitReport polls the report until it counts want synchronizations.
func waitReport(t *testing.T, path string, want int) syncreport.Report {
	t.Helper()
	var got syncreport.Report
	require.Eventually(t, func() bool {
		var ok bool
		got, ok = readReport(t, path)
		return ok && got.Synchronizations >= want
	}, waitTimeout, 20*time.Millisecond, "report %s never counted %d synchronizations", path, want)
	return got
}

var wantSurvivor = []syncreport.Container{{ID: "ctr-1", Pod: "web", Namespace: "default", Container: "app", State: "CONTAINER_RUNNING"}}

func TestBinaryExternalStopsCleanlyOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	dir := shortTempDir(t)
	rt := startRuntime(t, dir)
	reportPath := filepath.Join(dir, "report.json")
	cfg := filepath.Join(dir, "e2e.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("env: {FROM_FILE: \"1\"}\nsyncReport: "+reportPath+"\n"), 0o600))

	cmd := exec.Command(bin, "--socket", filepath.Join(dir, "nri.sock"), "--config", cfg, "--log-format", "json",
		"--shared-dir", filepath.Join(dir, "shared"))
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	got := waitReport(t, reportPath, 1)
	assert.Equal(t, syncreport.Report{Synchronizations: 1, Containers: wantSurvivor}, got)
	assert.Equal(t, []string{"FROM_FILE=1"}, createEnv(t, rt))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "SIGTERM ends the plugin with exit status 0")
	case <-time.After(waitTimeout):
		t.Fatal("plugin did not exit after SIGTERM")
	}
	got, _ = readReport(t, reportPath)
	assert.True(t, got.Closed, "Close flushed the final report")
}

func TestBinaryPreRegisteredTakesConfigFromRuntime(t *testing.T) {
	bin := buildBinary(t)
	dir := shortTempDir(t)
	reportPath := filepath.Join(dir, "report.json")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "plugins"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755))
	// The runtime launches NN-name without arguments and output: a launcher script
	// keeps the plugin's shared state and log in the test's directory instead of
	// the host's defaults.
	launcher := fmt.Sprintf("#!/bin/sh\nexec %s --shared-dir %s 2>>%s\n", bin, filepath.Join(dir, "shared"), filepath.Join(dir, "plugin.log"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plugins", "45-e2e-pre"), []byte(launcher), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "conf.d", "45-e2e-pre.conf"),
		[]byte("syncReport: "+reportPath+"\n"), 0o600))

	rt := startRuntime(t, dir) // launches, registers and synchronizes the plugin

	got := waitReport(t, reportPath, 1)
	assert.Equal(t, syncreport.Report{Synchronizations: 1, Containers: wantSurvivor}, got)
	assert.Equal(t, []string{"NRI_SUITE_E2E=e2e-pre"}, createEnv(t, rt),
		"the default env names the plugin as the runtime launched it")
}

func FuzzConfigure(f *testing.F) {
	for _, seed := range []string{"", "env: {A: b}\n", "env: {\"A=B\": c}\n", "syncReport: /x\n", "envs: 1\n", "env: [1]\n",
		"weaken: {hooks: [/bin/true], seccompUnconfined: true, namespaces: [{type: ipc, remove: true}]}\n",
		"weaken: {seccomp: {defaultAction: SCMP_ACT_ALLOW, syscalls: [{names: [\"\"], action: SCMP_ACT_ERRNO}]}, deviceCgroups: [{type: a, access: rwm}], " +
			"mounts: [{source: /, destination: /host, type: bind}], cgroupsPath: /, oomScoreAdj: -1000, env: {LD_PRELOAD: x}, rlimits: [{type: RLIMIT_NOFILE, hard: 1}]}\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newForTest(t)
		if err := p.Configure(data, "fuzz.yaml"); err != nil {
			assert.Contains(t, err.Error(), "fuzz.yaml", "errors name their source")
			return
		}
		adjust, _, err := p.CreateContainer(context.Background(), nil, nil)
		require.NoError(t, err)
		for _, kv := range adjust.GetEnv() {
			assert.NotContains(t, kv.GetKey(), "=", "no accepted key breaks the environment")
		}
	})
}
