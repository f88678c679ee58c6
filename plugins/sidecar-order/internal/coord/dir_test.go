package coord_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

// flock locks belong to open file descriptions, so a lock taken here
// conflicts with the probes this process makes through other descriptors,
// as it would with another container's.

func TestMainStates(t *testing.T) {
	d := coord.Dir{Path: t.TempDir()}
	spec := &coord.Pod{}
	exited, err := d.MainsExited(spec)
	require.NoError(t, err)
	assert.False(t, exited, "no main at all is not 'every main exited'")

	assert.Equal(t, coord.MainUnknown, d.Main("app"))
	require.NoError(t, d.RegisterMain("app"))
	require.NoError(t, d.RegisterMain("worker"))
	assert.Equal(t, coord.MainCreated, d.Main("app"))
	assert.False(t, d.MainsRunning(spec), "created is not running")

	app, err := d.LockMain("app")
	require.NoError(t, err)
	assert.Equal(t, coord.MainRunning, d.Main("app"))
	assert.True(t, d.MainsRunning(spec))
	require.NoError(t, app.Close())
	assert.Equal(t, coord.MainExited, d.Main("app"))

	exited, err = d.MainsExited(spec)
	require.NoError(t, err)
	assert.False(t, exited, "worker has not run yet")
	worker, err := d.LockMain("worker")
	require.NoError(t, err)
	require.NoError(t, worker.Close())
	exited, err = d.MainsExited(spec)
	require.NoError(t, err)
	assert.True(t, exited)

	declared := &coord.Pod{Mains: []string{"app", "late"}}
	exited, err = d.MainsExited(declared)
	require.NoError(t, err)
	assert.False(t, exited, "a declared main that never ran keeps the sidecars")
}

func TestSidecarReadiness(t *testing.T) {
	d := coord.Dir{Path: t.TempDir()}
	require.NoError(t, d.MarkReady("proxy"))
	assert.False(t, d.SidecarReady("proxy"), "a marker without a live helper (a killed one) is not ready")
	lock, err := d.LockSidecar("proxy")
	require.NoError(t, err)
	assert.True(t, d.SidecarReady("proxy"))
	require.NoError(t, d.ClearReady("proxy"))
	assert.False(t, d.SidecarReady("proxy"))
	assert.True(t, d.SidecarAlive("proxy"))
	require.NoError(t, d.ClearReady("proxy"), "clearing twice is fine")
	require.NoError(t, lock.Close())
	assert.False(t, d.SidecarAlive("proxy"))
}

func TestSpecRoundTrip(t *testing.T) {
	d := coord.Dir{Path: t.TempDir()}
	assert.False(t, d.Exists())
	spec := &coord.Pod{StopAfterMains: true, HoldTimeout: coord.Duration(1500 * time.Millisecond),
		Sidecars: []coord.Sidecar{{Name: "p", Ready: coord.Readiness{Kind: coord.ReadyExec, Target: "/x", Args: []string{"a"}},
			Timeout: coord.Duration(time.Minute), OnTimeout: coord.OnTimeoutFail}}}
	require.NoError(t, d.WriteSpec(spec))
	assert.True(t, d.Exists())
	got, err := d.ReadSpec()
	require.NoError(t, err)
	assert.Equal(t, spec, got)
	data, err := os.ReadFile(filepath.Join(d.Path, "pod.json"))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"holdTimeout": "1.5s"`, "durations are readable")

	require.NoError(t, os.WriteFile(filepath.Join(d.Path, "pod.json"), []byte(`{"holdTimeout": "soon"}`), 0o644))
	_, err = d.ReadSpec()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decoding the pod's sidecar spec")
}

// TestOwnership: Make marks the directory it makes; an existing directory
// is taken only if the plugin made it, marked or (made before marks) with
// the pod's spec, and a FIFO is no mark.
func TestOwnership(t *testing.T) {
	base := t.TempDir()
	made := coord.Dir{Path: filepath.Join(base, "made")}
	require.NoError(t, made.Make())
	assert.True(t, made.Owned())
	info, err := os.Stat(made.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o777), info.Mode().Perm())
	require.NoError(t, made.Make(), "the plugin's own directory is taken again")

	legacy := coord.Dir{Path: filepath.Join(base, "legacy")}
	require.NoError(t, os.Mkdir(legacy.Path, 0o755))
	require.NoError(t, legacy.WriteSpec(&coord.Pod{Sidecars: []coord.Sidecar{{Name: "proxy"}}}))
	assert.True(t, legacy.Owned(), "a directory with the pod's spec was made by an earlier version")
	require.NoError(t, legacy.Make())
	assert.FileExists(t, filepath.Join(legacy.Path, ".nri-sidecar-order"), "and is marked now")

	foreign := coord.Dir{Path: filepath.Join(base, "placements")}
	require.NoError(t, os.Mkdir(foreign.Path, 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(foreign.Path, ".nri-sidecar-order"), 0o644))
	assert.False(t, foreign.Owned())
	err = foreign.Make()
	require.Error(t, err)
	assert.Contains(t, err.Error(), foreign.Path+" exists and was not made by sidecar-order (it holds no .nri-sidecar-order): left alone")
	info, err = os.Stat(foreign.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm(), "left as it was")
}

// TestTakeReportsOfWhatIsNotAFile: a container may put anything in its
// pod's directory. A FIFO named like a report does not block the plugin (it
// would until someone wrote to it), a link is not followed out of the
// directory, and both are reported and removed beside the good reports.
func TestTakeReportsOfWhatIsNotAFile(t *testing.T) {
	d := coord.Dir{Path: t.TempDir()}
	require.NoError(t, d.WriteReport(coord.Report{Container: "app", Role: "main"}))
	fifo := filepath.Join(d.Path, "report-fifo-1.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(d.Path, "report-link-1.json")
	require.NoError(t, os.Symlink("/etc/passwd", link))

	reports, err := d.TakeReports()
	require.Len(t, reports, 1)
	assert.Equal(t, "app", reports[0].Container)
	assert.ErrorContains(t, err, "reading "+fifo+": it is a named pipe (FIFO): not a regular file")
	assert.ErrorContains(t, err, "reading "+link+": it is a symbolic link: not a regular file")
	entries, err := os.ReadDir(d.Path)
	require.NoError(t, err)
	assert.Empty(t, entries, "every report is taken")
}

// A directory is in use while any of its containers runs or may still
// start: a sidecar that has not run, a main created and not started, a
// held lock; once all of them ran and exited it is idle. A spec that
// cannot be read keeps it in use.
func TestInUse(t *testing.T) {
	d := coord.Dir{Path: t.TempDir()}
	assert.True(t, d.InUse(), "no spec: not known to be idle")
	require.NoError(t, d.WriteSpec(&coord.Pod{Sidecars: []coord.Sidecar{{Name: "proxy"}}}))
	assert.True(t, d.InUse(), "the sidecar has not run yet")

	proxy, err := d.LockSidecar("proxy")
	require.NoError(t, err)
	assert.True(t, d.InUse(), "the sidecar's helper runs")
	require.NoError(t, d.RegisterMain("app"))
	require.NoError(t, proxy.Close())
	assert.True(t, d.InUse(), "the main was created and has not started")

	app, err := d.LockMain("app")
	require.NoError(t, err)
	assert.True(t, d.InUse(), "the main runs")
	require.NoError(t, app.Close())
	assert.False(t, d.InUse(), "every container ran and exited")

	assert.False(t, coord.Dir{Path: filepath.Join(t.TempDir(), "gone")}.InUse(), "a directory that is gone")
}
