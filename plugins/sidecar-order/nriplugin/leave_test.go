package nriplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper/helpertest"
)

// Uninstalled, the plugin removes the coordination directory of a pod
// whose containers all ran and exited, and the helper on the host; the
// directory of a pod whose sidecar runs stays, named in the error, and so
// does whatever it did not make in its state directory.
func TestRemoveNodeState(t *testing.T) {
	helperDir, stateDir := t.TempDir(), filepath.Join(t.TempDir(), "sidecar-order")
	helperPath := filepath.Join(helperDir, "nri-sidecar-helper")
	require.NoError(t, os.Rename(helpertest.Build(t, ""), helperPath))
	p, err := New(plugin.Deps{Log: logrus.NewEntry(logrus.New()), Registry: prometheus.NewRegistry(), MetricsNamespace: "test"},
		Options{HelperPath: helperPath, StateDir: stateDir})
	require.NoError(t, err)
	dirOf := func(uid string) coord.Dir {
		pod := &api.PodSandbox{Id: uid, Name: uid, Namespace: "default", Uid: uid,
			Annotations: map[string]string{"sidecar-order.nri-suite.io/sidecars": "proxy"}}
		_, _, err := p.CreateContainer(context.Background(), pod, &api.Container{Id: uid + "-proxy", PodSandboxId: uid, Name: "proxy", Args: []string{"/proxy"}})
		require.NoError(t, err)
		dir, err := p.podDir(pod)
		require.NoError(t, err)
		return dir
	}
	done, running := dirOf("done"), dirOf("running")
	lock, err := done.LockSidecar("proxy")
	require.NoError(t, err)
	require.NoError(t, lock.Close()) // it ran and exited
	lock, err = running.LockSidecar("proxy")
	require.NoError(t, err)
	defer lock.Close()
	foreign := filepath.Join(stateDir, "not-mine")
	require.NoError(t, os.Mkdir(foreign, 0o755))

	err = p.RemoveNodeState()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "coordination directories of pods whose containers still run or wait to start stay: "+running.Path)
	assert.NoDirExists(t, done.Path)
	assert.DirExists(t, running.Path)
	assert.DirExists(t, foreign, "a directory it did not make")
	assert.NoFileExists(t, helperPath)
	assert.DirExists(t, helperDir, "the helper's directory, a mount point in the chart")

	require.NoError(t, lock.Close())
	require.NoError(t, os.Remove(foreign))
	require.NoError(t, p.RemoveNodeState(), "once the pod's containers exited")
	assert.NoDirExists(t, stateDir)
}
