package main_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

// TestDeviceRecordThatIsAFIFO: a FIFO where device-injector's record of a
// container would be neither blocks the plugin nor lets the container
// through unplaced. Its CreateContainer is refused, naming the file and what
// it is (waiting for a writer would outlive NRI's 2 s timeout, and the
// runtime would create the container without its cpuset); a FIFO standing
// for a running container's record does not block Synchronize, at every
// reconnect; and the plugin keeps placing the other containers.
func TestDeviceRecordThatIsAFIFO(t *testing.T) {
	n := startNode(t, "smt-2s-12c-interleaved", nodeOptions{})
	devices := filepath.Join(n.rt.SharedDir(), state.ContainerDevicesKind)
	require.NoError(t, os.MkdirAll(devices, 0o755))
	fifoFor := func(id string) string {
		path := filepath.Join(devices, id+".json")
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		return path
	}

	running := n.rt.RunPod(t, pod(t, "guaranteed-4cpu.yaml")).Container("app")
	placed := cpus(t, running)
	fifoFor(running.ID())

	p := n.rt.NewPod(t, pod(t, "guaranteed-2cpu.yaml"))
	app := p.Container("app")
	fifo := fifoFor(app.ID())
	err := n.rt.StartPod(p)
	require.Error(t, err, "refused, not created without its cpuset")
	assert.ErrorContains(t, err, "topology-aware: ")
	assert.ErrorContains(t, err, "container default/exclusive/app")
	assert.ErrorContains(t, err, "reading "+fifo+": it is a named pipe (FIFO): not a regular file")
	assert.Equal(t, api.ContainerState_CONTAINER_UNKNOWN, app.State())

	for range 2 {
		n.plugin.Stop(t)
		n.plugin.Restart(t) // fails the test unless Synchronize answers
		assert.Equal(t, placed.String(), cpus(t, running).String(), "the running container keeps its CPUs")
	}
	later := pod(t, "guaranteed-2cpu.yaml")
	later.Name, later.UID = "later", "uid-later"
	other := n.rt.RunPod(t, later).Container("app")
	assert.Equal(t, 2, cpus(t, other).Size(), "the plugin keeps placing containers")
	assert.True(t, cpus(t, other).Intersection(placed).IsEmpty())
}
