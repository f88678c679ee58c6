package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// TestPreRegisteredInstall runs the whole suite as pre-registered plugins on
// a real runtime and kubelet: the binaries are laid out by install.sh (what
// `make install` runs), the runtime is configured by the shipped drop-in,
// and the runtime launches every plugin from that layout with its shipped
// configuration. Only the CDI spec dir of device-injector is the sandbox's
// (appended to the shipped configuration). Each plugin must be connected and
// act on the scenario's pods (runScenario).
func TestPreRegisteredInstall(t *testing.T) {
	for _, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) { testPreRegistered(t, rt) })
	}
}

func testPreRegistered(t *testing.T, rt string) {
	sandbox.RequirePrereqs(t, rt)
	ctx := sandbox.TestContext(t)
	layout := install(ctx, t, slices.Sorted(maps.Keys(plugins)))
	specs, err := sandbox.PreRegisteredFromLayout(layout.pluginDir, layout.confDir)
	require.NoError(t, err)
	require.Len(t, specs, len(plugins), "every installed plugin is in the layout")
	for i := range specs {
		if specs[i].Name == "device-injector" {
			specs[i].Config = append(specs[i].Config, "spec-dirs: ["+sandbox.CDIDir+"]\n"...)
		}
	}

	sb := sandbox.NewForTest(t, sandbox.Options{Runtime: rt, PreRegistered: specs})
	require.NoError(t, os.WriteFile(filepath.Join(sb.CDISpecDir(), "deploy.yaml"), []byte(deviceSpec), 0o644))
	waitConnected(ctx, t, sb)
	t.Run("logs", func(t *testing.T) {
		for name, info := range plugins {
			data, err := os.ReadFile(filepath.Join(plugin.PreRegisteredLogDir, info.ID()+".log"))
			require.NoError(t, err, "the runtime discards a launched plugin's output: %s logs to a file", name)
			assert.Contains(t, string(data), "serving /metrics", "%s's log", name)
		}
	})

	runScenario(ctx, t, sb)
	t.Run("runtime restart", func(t *testing.T) { restartRelaunches(ctx, t, sb) })
}

// restartRelaunches kills the runtime and starts it again, as after a crash
// or an upgrade: it must launch every plugin of the layout again (new
// processes, connected and ready), and no running container may move.
func restartRelaunches(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	cpus := func() map[string]string {
		ctrs, err := sb.CRI().Containers(ctx)
		require.NoError(t, err)
		out := map[string]string{}
		for _, c := range ctrs {
			if c.State == "CONTAINER_RUNNING" {
				status, err := sb.ProcStatus(ctx, c.ID)
				require.NoError(t, err)
				out[c.Pod+"/"+c.Name] = status["Cpus_allowed_list"]
			}
		}
		return out
	}
	statuses, err := state.PluginStatuses(state.DefaultDir)
	require.NoError(t, err)
	pids := map[string]int{}
	for name, info := range plugins {
		st, _, err := statuses.Read(info.ID())
		require.NoError(t, err)
		pids[name] = st.PID
	}
	before := cpus()

	require.NoError(t, sb.RestartRuntime(ctx))
	for name, info := range plugins {
		err := poll(ctx, func() error {
			st, found, err := statuses.Read(info.ID())
			if err != nil || !found || st.PID == pids[name] || !st.Connected || !st.Ready {
				return fmt.Errorf("plugin %s: status %+v (found %v, error %v), expected a new process (not pid %d), connected and ready",
					name, st, found, err, pids[name])
			}
			return nil
		})
		require.NoError(t, err, "the runtime relaunched %s", name)
	}
	assert.Equal(t, before, cpus(), "containers' CPUs after the runtime restart")
}

// layout is a pre-registered install.
type layout struct{ pluginDir, confDir string }

// install runs `make install` for the named plugins: the plugin and config
// dirs and PREFIX in a temporary directory, without DESTDIR, so that the
// paths the configurations name (the helper's) are real.
func install(ctx context.Context, t *testing.T, names []string) layout {
	root := t.TempDir()
	l := layout{pluginDir: filepath.Join(root, "opt/nri/plugins"), confDir: filepath.Join(root, "etc/nri/conf.d")}
	// make install itself: the images' static binaries (make static), which
	// the cluster test's make images has left in the build cache.
	cmd := exec.CommandContext(ctx, "make", "-C", repoRoot(t), "--no-print-directory", "install", "IMAGES_OUT="+t.TempDir(),
		"PREFIX="+filepath.Join(root, "usr"), "NRI_PLUGIN_DIR="+l.pluginDir, "NRI_CONF_DIR="+l.confDir, "DESTDIR=")
	cmd.Env = append(os.Environ(), "PLUGINS="+strings.Join(names, " "))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make install: %s", out)
	return l
}

// repoRoot is the module root, two directories above this package.
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Join(wd, "..", "..", "..")
}
