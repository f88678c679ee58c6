package nriplugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper/helpertest"
)

func TestHelperPath(t *testing.T) {
	dir := t.TempDir()
	static := helpertest.Build(t, dir)
	notExec := filepath.Join(dir, "not-exec")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	script := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	dynamic, err := exec.LookPath("sh") // the host's shell is dynamically linked
	require.NoError(t, err)

	for _, tc := range []struct {
		name, path, want string
	}{
		{"static", static, ""},
		{"missing", filepath.Join(dir, "nope"), "no such file or directory (build it with CGO_ENABLED=0"},
		{"not executable", notExec, "expected an executable file"},
		{"not ELF", script, "expected a static ELF executable"},
		{"dynamic", dynamic, "dynamically linked: expected a static executable (CGO_ENABLED=0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := helperPath(tc.path)
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.path, got)
		})
	}
}

// TestMetricsFromReports: the helpers' reports become the wait histogram,
// the timeout and the ordered-stop counters, each counted once.
func TestMetricsFromReports(t *testing.T) {
	dir := coord.Dir{Path: t.TempDir()}
	for _, r := range []coord.Report{
		{Container: "app", Role: helper.RoleMain, Waited: coord.Duration(3 * time.Second)},
		{Container: "app2", Role: helper.RoleMain, Waited: coord.Duration(time.Second), TimedOut: []string{"proxy"}, Action: coord.OnTimeoutFail},
		{Container: "logs", Role: helper.RoleSidecar, Stop: coord.StopMainsExited},
		{Container: "proxy", Role: helper.RoleSidecar, Stop: coord.StopSignal, TimedOut: []string{"x"}, Action: coord.OnTimeoutStart},
	} {
		require.NoError(t, dir.WriteReport(r))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir.Path, "report-bad-1.json"), []byte("{"), 0o644))

	m := newMetrics("test")
	reports, err := dir.TakeReports()
	require.Error(t, err, "the damaged report is an error")
	assert.Contains(t, err.Error(), "report-bad-1.json")
	for _, r := range reports {
		m.observe(r)
	}
	var wait dto.Metric
	require.NoError(t, m.mainWait.Write(&wait))
	assert.Equal(t, uint64(2), wait.GetHistogram().GetSampleCount(), "two mains waited")
	assert.Equal(t, 4.0, wait.GetHistogram().GetSampleSum(), "for 3 s and 1 s")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.timeouts.WithLabelValues(helper.RoleMain, coord.OnTimeoutFail)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.timeouts.WithLabelValues(helper.RoleSidecar, coord.OnTimeoutStart)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.orderedStops.WithLabelValues(coord.StopMainsExited)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.orderedStops.WithLabelValues(coord.StopSignal)))

	again, err := dir.TakeReports()
	require.NoError(t, err)
	assert.Empty(t, again, "taken reports are gone")
}

// TestArgsDroppedByRuntime: a runtime that creates the container without
// the helper's args (its NRI predates args adjustments) is noticed at
// PostCreateContainer, and later annotated pods are left alone.
func TestArgsDroppedByRuntime(t *testing.T) {
	p, err := New(plugin.Deps{Log: logrus.NewEntry(logrus.New()), Registry: prometheus.NewRegistry(), MetricsNamespace: "test"},
		Options{HelperPath: helpertest.Build(t, ""), StateDir: t.TempDir()})
	require.NoError(t, err)
	p.SetRuntime("cri-o", "1.34.0")
	pod := &api.PodSandbox{Id: "sandbox", Name: "web", Namespace: "default", Uid: "uid-web",
		Annotations: map[string]string{"sidecar-order.nri-suite.io/sidecars": "proxy"}}
	ctr := func(id, name string) *api.Container {
		return &api.Container{Id: id, PodSandboxId: "sandbox", Name: name, Args: []string{"/bin/" + name}}
	}

	adjust, _, err := p.CreateContainer(context.Background(), pod, ctr("c1", "proxy"))
	require.NoError(t, err)
	require.Equal(t, HelperArgs(helper.RoleSidecar, "proxy", []string{"/bin/proxy"}), adjust.GetArgs())
	created := ctr("c1", "proxy")
	created.Args = adjust.GetArgs()
	require.NoError(t, p.PostCreateContainer(context.Background(), pod, created))
	assert.False(t, p.argsDropped.Load(), "the runtime applied the args")

	_, _, err = p.CreateContainer(context.Background(), pod, ctr("c2", "app"))
	require.NoError(t, err)
	require.NoError(t, p.PostCreateContainer(context.Background(), pod, ctr("c2", "app")), "created with its own args")
	assert.True(t, p.argsDropped.Load())
	assert.Equal(t, 1.0, testutil.ToFloat64(p.metrics.unsupported))

	adjust, _, err = p.CreateContainer(context.Background(), pod, ctr("c3", "app"))
	require.NoError(t, err)
	assert.Nil(t, adjust, "left alone once the runtime is known to drop args")
	assert.Equal(t, 2.0, testutil.ToFloat64(p.metrics.unsupported))
	assert.Empty(t, p.adjusted, "nothing left to check")
}

// TestConfigure: a plugin started without a helper next to it (pre-registered)
// refuses annotated pods until its configuration names one; bad
// configuration is refused with the key or the path.
func TestConfigure(t *testing.T) {
	p, err := New(plugin.Deps{Log: logrus.NewEntry(logrus.New()), Registry: prometheus.NewRegistry(), MetricsNamespace: "test"},
		Options{StateDir: t.TempDir()})
	require.NoError(t, err, "no helper next to the test binary is not fatal")
	pod := &api.PodSandbox{Id: "sandbox", Name: "web", Namespace: "default", Uid: "uid-web",
		Annotations: map[string]string{"sidecar-order.nri-suite.io/sidecars": "proxy"}}
	app := &api.Container{Id: "c1", PodSandboxId: "sandbox", Name: "app", Args: []string{"/app"}}
	_, _, err = p.CreateContainer(context.Background(), pod, app)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no helper binary: expected --helper or helper in the configuration")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "helpr: /x\n", "helpr"},
		{"missing helper", "helper: /nonexistent/helper\n", "helper /nonexistent/helper"},
		{"empty state dir", "state-dir: \"\"\n", `state-dir: empty: expected an absolute path`},
		{"root state dir", "state-dir: /\n", `state-dir: "/" is a system directory`},
		{"system state dir", "state-dir: /var/lib\n", `state-dir: "/var/lib" is a system directory`},
		{"relative state dir", "state-dir: state\n", `state-dir: "state": expected an absolute path`},
		{"unclean state dir", "state-dir: /run/nri-suite/../sidecar-order\n", `state-dir: "/run/nri-suite/../sidecar-order": expected a clean absolute path, such as /run/sidecar-order`},
		{"state dir a file", "state-dir: " + file + "\n", `state-dir: "` + file + `" is not a directory (mode -rw-r--r--): expected a directory`},
		{"relative helper", "helper: bin/nri-sidecar-helper\n", `helper: "bin/nri-sidecar-helper": expected an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Configure([]byte(tc.yaml), "test config")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	bin := helpertest.Build(t, "")
	stateDir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, p.Configure([]byte("helper: "+bin+"\nstate-dir: "+stateDir+"\n"), "test config"))
	adjust, _, err := p.CreateContainer(context.Background(), pod, app)
	require.NoError(t, err)
	require.Len(t, adjust.GetMounts(), 2)
	assert.Equal(t, bin, adjust.GetMounts()[0].Source)
	assert.Equal(t, filepath.Join(stateDir, "uid-web"), adjust.GetMounts()[1].Source)
}

// TestStateDirMadeOnceConfigured: neither New nor Configure creates a state
// directory, the default's least: it is made at the first annotated pod, in
// the directory the configuration names.
func TestStateDirMadeOnceConfigured(t *testing.T) {
	base := t.TempDir()
	flagDir, configDir := filepath.Join(base, "default"), filepath.Join(base, "configured")
	p, err := New(plugin.Deps{Log: logrus.NewEntry(logrus.New()), Registry: prometheus.NewRegistry(), MetricsNamespace: "test"},
		Options{HelperPath: helpertest.Build(t, ""), StateDir: flagDir})
	require.NoError(t, err)
	assert.NoDirExists(t, flagDir, "not made before the configuration arrives")
	require.NoError(t, p.Configure([]byte("state-dir: "+configDir+"\n"), "test config"))
	assert.NoDirExists(t, configDir, "not made before a pod needs it")
	_, err = p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err, "nothing to clean up in a directory not made yet")

	pod := &api.PodSandbox{Id: "sandbox", Name: "web", Namespace: "default", Uid: "uid-web",
		Annotations: map[string]string{"sidecar-order.nri-suite.io/sidecars": "proxy"}}
	_, _, err = p.CreateContainer(context.Background(), pod, &api.Container{Id: "c1", PodSandboxId: "sandbox", Name: "app", Args: []string{"/app"}})
	require.NoError(t, err)
	info, err := os.Stat(configDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o711), info.Mode().Perm())
	assert.DirExists(t, filepath.Join(configDir, "uid-web"))
	assert.NoDirExists(t, flagDir, "the flag's directory is never made")
}
