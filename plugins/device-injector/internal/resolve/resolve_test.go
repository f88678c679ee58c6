package resolve

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nullSpec describes /dev/null (1:3, on every Linux host) as example.com/dev=null,
// with env, a mount and a hook, plus a spec-level env shared by its devices.
const nullSpec = `cdiVersion: "0.6.0"
kind: example.com/dev
containerEdits:
  env: [EXAMPLE_SPEC=1]
devices:
- name: "null"
  containerEdits:
    deviceNodes:
    - path: /dev/example-null
      hostPath: /dev/null
      type: c
      major: 1
      minor: 3
    env: [EXAMPLE_DEVICE=null]
    mounts:
    - hostPath: /opt/example
      containerPath: /opt/example
      options: [ro, bind]
    hooks:
    - hookName: createContainer
      path: /usr/bin/example-hook
      args: [example-hook, setup]
- name: zero
  containerEdits:
    deviceNodes:
    - path: /dev/zero
`

func writeSpec(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

func newResolver(t *testing.T, dirs ...string) *Resolver {
	t.Helper()
	r := New(dirs, logrus.NewEntry(logrus.New()))
	t.Cleanup(r.Close)
	return r
}

func TestResolveEdits(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", nullSpec)
	r := newResolver(t, dir)

	devs, err := r.Resolve([]string{"example.com/dev=null", "example.com/dev=zero"}, Owner{UID: 1000, GID: 2000})
	require.NoError(t, err)
	require.Len(t, devs, 2)

	null := devs[0]
	assert.Equal(t, "example.com/dev=null", null.Name)
	require.Len(t, null.Nodes, 1)
	n := null.Nodes[0]
	assert.Equal(t, "/dev/example-null", n.Path)
	assert.Equal(t, "c", n.Type)
	assert.Equal(t, [2]int64{1, 3}, [2]int64{n.Major, n.Minor})
	require.NotNil(t, n.UID, "a node without owner gets the container's user")
	assert.Equal(t, uint32(1000), *n.UID)
	assert.Equal(t, uint32(2000), *n.GID)
	assert.ElementsMatch(t, []string{"EXAMPLE_SPEC=1", "EXAMPLE_DEVICE=null"}, null.Env)
	assert.Equal(t, []rspec.Mount{{Source: "/opt/example", Destination: "/opt/example", Options: []string{"ro", "bind"}}}, null.Mounts)
	assert.Equal(t, []Hook{{Stage: "createContainer", Hook: rspec.Hook{Path: "/usr/bin/example-hook", Args: []string{"example-hook", "setup"}}}}, null.Hooks)
	assert.Empty(t, null.Unsupported)

	zero := devs[1]
	require.Len(t, zero.Nodes, 1)
	assert.Equal(t, [3]any{"c", int64(1), int64(5)}, [3]any{zero.Nodes[0].Type, zero.Nodes[0].Major, zero.Nodes[0].Minor},
		"type and numbers are read from the host's /dev/zero")
	assert.Equal(t, []string{"EXAMPLE_SPEC=1"}, zero.Env)
	assert.Equal(t, 2, r.Devices())
	assert.Zero(t, r.SpecErrors())
}

func TestResolveLaterDirectoryWins(t *testing.T) {
	low, high := t.TempDir(), t.TempDir()
	writeSpec(t, low, "a.yaml", nullSpec)
	writeSpec(t, high, "b.yaml", `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    env: [FROM=high]
`)
	r := newResolver(t, low, high)
	devs, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	require.NoError(t, err)
	assert.Equal(t, []string{"FROM=high"}, devs[0].Env)
	assert.Empty(t, devs[0].Nodes)
}

func TestResolveUnsupportedEdits(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "gids.yaml", `cdiVersion: "0.7.0"
kind: example.com/gid
devices:
- name: a
  containerEdits:
    additionalGids: [44]
`)
	r := newResolver(t, dir)
	devs, err := r.Resolve([]string{"example.com/gid=a"}, Owner{})
	require.NoError(t, err)
	assert.Equal(t, []string{"additionalGids"}, devs[0].Unsupported)
}

func TestResolveErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs map[string]string // file -> content, in one directory
		dev   string
		want  []string
	}{
		{
			name: "unknown device", specs: map[string]string{"example.yaml": nullSpec},
			dev: "example.com/dev=missing", want: []string{"unresolvable CDI device example.com/dev=missing", "no spec in"},
		},
		{
			name: "device two specs define",
			specs: map[string]string{"a.yaml": nullSpec, "b.yaml": `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "null"
  containerEdits:
    env: [OTHER=1]
`},
			dev: "example.com/dev=null", want: []string{"unresolvable CDI device example.com/dev=null", `conflicting device "example.com/dev=null"`, "a.yaml", "b.yaml"},
		},
		{
			name: "wrong version", specs: map[string]string{"v.yaml": `cdiVersion: "9.9.9"
kind: example.com/dev
devices:
- name: x
  containerEdits:
    env: [A=1]
`},
			dev: "example.com/dev=x", want: []string{"v.yaml", "9.9.9"},
		},
		{
			name: "bad device name", specs: map[string]string{"n.yaml": `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: "bad name!"
  containerEdits:
    env: [A=1]
`},
			dev: "example.com/dev=x", want: []string{"n.yaml", "bad name!"},
		},
		{
			name: "bad kind", specs: map[string]string{"k.yaml": `cdiVersion: "0.6.0"
kind: not-a-kind
devices:
- name: x
  containerEdits:
    env: [A=1]
`},
			dev: "example.com/dev=x", want: []string{"k.yaml", "invalid vendor"},
		},
		{
			name: "empty edits", specs: map[string]string{"e.yaml": `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: x
  containerEdits: {}
`},
			dev: "example.com/dev=x", want: []string{"e.yaml", "empty"},
		},
		{
			name: "malformed YAML", specs: map[string]string{"m.yaml": "cdiVersion: [\n"},
			dev: "example.com/dev=x", want: []string{"m.yaml"},
		},
		{
			name: "host device missing", specs: map[string]string{"h.yaml": `cdiVersion: "0.6.0"
kind: example.com/dev
devices:
- name: gone
  containerEdits:
    deviceNodes:
    - path: /dev/nri-suite-does-not-exist
`},
			dev: "example.com/dev=gone", want: []string{"resolve CDI device example.com/dev=gone", "/dev/nri-suite-does-not-exist"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.specs {
				writeSpec(t, dir, name, content)
			}
			r := newResolver(t, dir)
			_, err := r.Resolve([]string{tc.dev}, Owner{})
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestResolveInvalidSpecsCounted(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "good.yaml", nullSpec)
	writeSpec(t, dir, "bad.yaml", `cdiVersion: "9.9.9"
kind: example.com/other
devices: []
`)
	r := newResolver(t, dir)
	assert.Equal(t, 1, r.SpecErrors())
	_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	assert.NoError(t, err, "a bad spec does not hide the good ones")
}

func TestResolveUnreadableSpecDirectory(t *testing.T) {
	// A regular file where a directory should be cannot be listed, even by
	// root. The cache stops scanning there, hiding the later directory too.
	notDir := filepath.Join(t.TempDir(), "cdi")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	later := t.TempDir()
	writeSpec(t, later, "example.yaml", nullSpec)

	r := newResolver(t, notDir, later)
	_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec directory "+notDir+" cannot be read")
	assert.Contains(t, err.Error(), "not a directory")
	assert.Equal(t, 1, r.SpecErrors())
	assert.Empty(t, DirProblems([]string{filepath.Join(later, "absent")}), "an absent directory is fine")
}

func TestResolveFollowsSpecDirectoryChanges(t *testing.T) {
	dir := t.TempDir()
	r := newResolver(t, dir)
	_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	require.ErrorIs(t, err, ErrUnresolvable)

	writeSpec(t, dir, "example.yaml", nullSpec)
	require.Eventually(t, func() bool {
		_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the watcher picks up a new spec")

	other := t.TempDir()
	r.SetSpecDirs([]string{other})
	_, err = r.Resolve([]string{"example.com/dev=null"}, Owner{})
	require.ErrorIs(t, err, ErrUnresolvable, "the old directory is no longer read")
}

// TestSpecDirectoryWithAFIFO: a FIFO named like a spec, there at start or
// made later, is a spec error naming it, and neither blocks the scan nor
// hides the other specs: those there before, and those written after, are
// resolved. (The CDI library's own scan blocks on it for good: New would
// not return.)
func TestSpecDirectoryWithAFIFO(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", nullSpec)
	fifo := filepath.Join(dir, "a-stuck.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	r := newResolver(t, dir)

	_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	require.NoError(t, err, "the other specs are read")
	assert.Equal(t, 1, r.SpecErrors())
	_, err = r.Resolve([]string{"other.com/dev=x"}, Owner{})
	assert.ErrorContains(t, err, fifo+": failed to load CDI Spec: reading "+fifo+": it is a named pipe (FIFO): not a regular file")

	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "b-later.json"), 0o644))
	writeSpec(t, dir, "other.yaml", strings.ReplaceAll(nullSpec, "example.com", "other.com"))
	require.Eventually(t, func() bool {
		_, err := r.Resolve([]string{"other.com/dev=null"}, Owner{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "a spec written while the FIFOs are there is picked up")
	assert.Equal(t, 2, r.SpecErrors())
	assert.ErrorContains(t, r.Inventory().SpecErrors[fifo], "not a regular file")

	require.NoError(t, os.Remove(fifo))
	require.Eventually(t, func() bool { return r.SpecErrors() == 1 }, 10*time.Second, 20*time.Millisecond,
		"a removed FIFO is no longer reported")
}

func TestSpecAboveTheLimit(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "huge.yaml", nullSpec+"#"+strings.Repeat("x", MaxSpecSize))
	r := newResolver(t, dir)
	_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
	assert.ErrorContains(t, err, "reading "+filepath.Join(dir, "huge.yaml")+": larger than the limit of 4 MiB")
}

// TestSpecDirectoryAppearsLater: a spec directory missing at start is
// watched once it exists.
func TestSpecDirectoryAppearsLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cdi")
	r := newResolver(t, dir)
	writeSpec(t, dir, "example.yaml", nullSpec)
	require.Eventually(t, func() bool {
		_, err := r.Resolve([]string{"example.com/dev=null"}, Owner{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, os.RemoveAll(dir))
	require.Eventually(t, func() bool { return r.Devices() == 0 }, 10*time.Second, 20*time.Millisecond,
		"a removed directory's specs are gone")
	writeSpec(t, dir, "example.yaml", nullSpec)
	require.Eventually(t, func() bool { return r.Devices() == 2 }, 10*time.Second, 20*time.Millisecond,
		"and come back with it")
}
