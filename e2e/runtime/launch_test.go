package runtime

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

func TestStartRefusesUnknownLaunch(t *testing.T) {
	_, err := Start(context.Background(), Options{Launch: Launch(7)})
	assert.ErrorContains(t, err, "launch Launch(7): expected LaunchExternal or LaunchByRuntime")
}

func TestValidatePreRegisteredRefusesFlags(t *testing.T) {
	base := PluginSpec{Binary: "/b", Name: "x", Idx: "30", Config: []byte("k: v\n")}
	require.NoError(t, base.validatePreRegistered())
	withArgs, withLevel := base, base
	withArgs.Args = []string{"--state-dir", "/s"}
	withLevel.LogLevel = "debug"
	assert.ErrorContains(t, withArgs.validatePreRegistered(), `pre-registered plugin 30-x: args ["--state-dir" "/s"]: the runtime launches pre-registered plugins without flags, expected none`)
	assert.ErrorContains(t, withLevel.validatePreRegistered(), `pre-registered plugin 30-x: log level "debug": the runtime launches pre-registered plugins without flags, expected none`)
	invalid := withArgs
	invalid.Idx = "3"
	assert.ErrorContains(t, invalid.validatePreRegistered(), `idx "3": expected two digits`, "the spec itself is checked first")
}

// shippedDir is the repository's deployments/preregistered.
func shippedDir(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	require.NoError(t, err)
	return filepath.Join(root, "deployments", "preregistered")
}

func TestShippedBySuite(t *testing.T) {
	confDir := filepath.Join(shippedDir(t), "conf.d")
	for _, spec := range []PluginSpec{
		{Name: "device-injector", Idx: "10"},
		{Name: "sidecar-order", Idx: "20"}, // shipped as a template, 20-sidecar-order.conf.in
		{Name: "stats", Idx: "90"},
	} {
		shipped, err := shippedBySuite(spec, confDir)
		require.NoError(t, err)
		assert.True(t, shipped, "install.sh lays out %s", spec.id())
	}
	shipped, err := shippedBySuite(PluginSpec{Name: "e2e-test", Idx: "50"}, confDir)
	require.NoError(t, err)
	assert.False(t, shipped, "the e2e test plugin is none of the suite's")
	_, err = shippedBySuite(PluginSpec{Name: "stats", Idx: "91"}, confDir)
	assert.ErrorContains(t, err, "plugin stats: idx 91: install.sh installs it as 90-stats ("+filepath.Join(confDir, "90-stats.conf")+"), expected that index")
}

// layOutDirs are a runtime's plugin and config dirs and the staging dir,
// in a temporary directory.
func layOutDirs(t *testing.T) (NRIConfig, string) {
	t.Helper()
	dir := t.TempDir()
	nri := NRIConfig{PluginPath: filepath.Join(dir, "plugins"), PluginConfigPath: filepath.Join(dir, "conf.d")}
	require.NoError(t, os.MkdirAll(nri.PluginPath, 0o755))
	require.NoError(t, os.MkdirAll(nri.PluginConfigPath, 0o755))
	return nri, filepath.Join(dir, "work")
}

// fakeBinary writes an executable script at path.
func fakeBinary(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n# "+content+"\n"), 0o755))
}

func TestLayOutSuitePlugin(t *testing.T) {
	nri, work := layOutDirs(t)
	build := t.TempDir() // as harness.BuildPlugin names binaries, not nri-<name>
	binary := filepath.Join(build, "sidecar-order-1234")
	fakeBinary(t, binary, "plugin")
	spec := PluginSpec{Binary: binary, Name: "sidecar-order", Idx: "20", Config: []byte("helper: /h\ndirs: [" + CDIDir + "]\n")}

	_, err := layOut(context.Background(), spec, nri, "/sb/cdi", work, shippedDir(t))
	require.ErrorContains(t, err, "laying out plugin 20-sidecar-order with "+filepath.Join(shippedDir(t), "install.sh"))
	assert.ErrorContains(t, err, "nri-sidecar-helper is missing", "install.sh's reason: no helper next to the plugin")

	fakeBinary(t, filepath.Join(build, "nri-sidecar-helper"), "helper")
	out, err := layOut(context.Background(), spec, nri, "/sb/cdi", work, shippedDir(t))
	require.NoError(t, err)
	assert.Contains(t, out, "installed: sidecar-order into "+nri.PluginPath)
	installed, err := os.ReadFile(filepath.Join(nri.PluginPath, "20-sidecar-order"))
	require.NoError(t, err)
	assert.Contains(t, string(installed), "# plugin", "the plugin's binary, as NN-name")
	helper, err := os.ReadFile(filepath.Join(work, "prefix", "libexec", "nri-suite", "nri-sidecar-helper"))
	require.NoError(t, err, "install.sh puts the helper under PREFIX")
	assert.Contains(t, string(helper), "# helper")
	conf, err := os.ReadFile(filepath.Join(nri.PluginConfigPath, "20-sidecar-order.conf"))
	require.NoError(t, err)
	assert.Equal(t, "helper: /h\ndirs: [/sb/cdi]\n", string(conf), "the spec's configuration replaces the shipped one")
	entries, err := os.ReadDir(nri.PluginPath)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the plugin dir holds only NN-name executables")

	// Laid out again: the previous layout's configuration is no operator's
	// edit for install.sh to keep. Without a configuration: the defaults.
	spec.Config = nil
	out, err = layOut(context.Background(), spec, nri, "/sb/cdi", work, shippedDir(t))
	require.NoError(t, err)
	assert.NotContains(t, out, "kept")
	assert.NoFileExists(t, filepath.Join(nri.PluginConfigPath, "20-sidecar-order.conf"))
}

func TestLayOutOtherPlugin(t *testing.T) {
	nri, work := layOutDirs(t)
	binary := filepath.Join(t.TempDir(), "testplugin")
	fakeBinary(t, binary, "test plugin")
	spec := PluginSpec{Binary: binary, Name: "e2e-test", Idx: "50", Config: []byte("env: {}\n")}
	_, err := layOut(context.Background(), spec, nri, "/sb/cdi", work, shippedDir(t))
	require.NoError(t, err)
	installed, err := os.ReadFile(filepath.Join(nri.PluginPath, "50-e2e-test"))
	require.NoError(t, err)
	assert.Contains(t, string(installed), "# test plugin")
	conf, err := os.ReadFile(filepath.Join(nri.PluginConfigPath, "50-e2e-test.conf"))
	require.NoError(t, err)
	assert.Equal(t, "env: {}\n", string(conf))
	assert.NoDirExists(t, work, "no install.sh staging for a plugin the suite does not ship")

	spec.Args = []string{"--x"}
	_, err = layOut(context.Background(), spec, nri, "/sb/cdi", work, shippedDir(t))
	assert.ErrorContains(t, err, "without flags")
}

func TestRelaunchedPID(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fresh := state.PluginStatus{PID: 42, Connected: true, Ready: true, Updated: since.Add(time.Second)}
	tests := []struct {
		name    string
		st      state.PluginStatus
		found   bool
		err     error
		before  int
		wantErr string
	}{
		{name: "new process, ready", st: fresh, found: true, before: 41},
		{name: "first launch", st: fresh, found: true},
		{name: "read error", found: true, err: errors.New("bad record"), wantErr: "bad record"},
		{name: "no record", wantErr: "no status record yet"},
		{name: "same process as before", st: fresh, found: true, before: 42, wantErr: "expected a process launched since"},
		{name: "published before the restart", st: state.PluginStatus{PID: 42, Connected: true, Ready: true, Updated: since.Add(-time.Second)},
			found: true, before: 41, wantErr: "status record of pid 42 updated 2026-01-02T03:04:04Z"},
		{name: "not ready yet", st: state.PluginStatus{PID: 42, Connected: true, Updated: since.Add(time.Second)},
			found: true, before: 41, wantErr: "pid 42: connected true, ready false: expected both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid, err := relaunchedPID(tt.st, tt.found, tt.err, tt.before, since)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.st.PID, pid)
		})
	}
}

// startSleeper starts a process to hold through a pidfd; the test reaps it.
func startSleeper(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestLaunchedProcess(t *testing.T) {
	l := newLaunched("plugin 50-x", filepath.Join(t.TempDir(), "x.log"))
	assert.True(t, l.exited(), "not launched yet")
	assert.Zero(t, l.PID())

	first := startSleeper(t, "exec sleep 60")
	require.NoError(t, l.bind(first.Process.Pid))
	defer l.release()
	assert.Equal(t, first.Process.Pid, l.PID())
	assert.False(t, l.exited())
	assert.False(t, l.waitExit(50*time.Millisecond))
	l.stop(5 * time.Second)
	// Not reaped yet (the test is its parent, as the runtime is a plugin's):
	// a zombie counts as exited.
	assert.True(t, l.exited(), "stopped by SIGTERM")
	assert.Error(t, first.Wait(), "ended by a signal")

	// Bound to the next process, as after the runtime's relaunch; one that
	// ignores SIGTERM is killed after the grace.
	second := startSleeper(t, `trap "" TERM; while :; do sleep 0.05; done`)
	require.NoError(t, l.bind(second.Process.Pid))
	assert.False(t, l.exited(), "the new process runs")
	l.stop(200 * time.Millisecond)
	assert.True(t, l.exited(), "killed after the grace")

	third := startSleeper(t, "sleep 0.2")
	require.NoError(t, l.bind(third.Process.Pid))
	err := l.waitFor(context.Background(), "something that never happens", func(context.Context) error { return errors.New("not yet") })
	assert.ErrorContains(t, err, "waiting for something that never happens: plugin 50-x (pid "+strconv.Itoa(third.Process.Pid)+") exited (last: not yet)")
	require.NoError(t, l.waitFor(context.Background(), "done", func(context.Context) error { return nil }))

	assert.ErrorContains(t, l.bind(1<<30), "opening pidfd of plugin 50-x (pid 1073741824)")
}

func TestVariants(t *testing.T) {
	names := func(vs []Variant) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name())
		}
		return out
	}
	assert.Equal(t, []string{"containerd", "crio", "containerd-preregistered"}, names(Variants()))
	assert.Equal(t, []string{"containerd", "containerd-preregistered"}, names(Variants("containerd")))
	assert.Equal(t, []string{"crio"}, names(Variants("crio")), "CRI-O launching the plugins is not a variant")
	assert.Equal(t, Options{Runtime: "containerd", Launch: LaunchByRuntime}, Variant{Runtime: "containerd", Launch: LaunchByRuntime}.Options())
}
