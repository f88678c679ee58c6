package health

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/internal/testenv"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// mknod makes a char node major:minor at path.
func mknod(t *testing.T, path string, major, minor uint32) {
	t.Helper()
	require.NoError(t, unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))))
}

func TestCheckNodes(t *testing.T) {
	testenv.RequireRoot(t, "to make device nodes with mknod")
	dir := t.TempDir()
	char13 := filepath.Join(dir, "char13")
	mknod(t, char13, 1, 3)
	regular := filepath.Join(dir, "regular")
	require.NoError(t, os.WriteFile(regular, nil, 0o644))
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name  string
		nodes []resolve.Node
		want  state.Health
		msg   []string
	}{
		{"the spec's node", []resolve.Node{{HostPath: char13, Type: "c", Major: 1, Minor: 3}}, state.HealthHealthy, nil},
		{"numbers left to the host", []resolve.Node{{HostPath: char13}}, state.HealthHealthy, nil},
		{"no nodes at all", nil, state.HealthHealthy, nil},
		{"missing", []resolve.Node{{HostPath: missing, Type: "c", Major: 1, Minor: 3}}, state.HealthUnhealthy,
			[]string{"device node " + missing + " is missing"}},
		{"not a device", []resolve.Node{{HostPath: regular}}, state.HealthUnhealthy,
			[]string{"device node " + regular + " is not a char or block device"}},
		{"other numbers", []resolve.Node{{HostPath: char13, Type: "c", Major: 1, Minor: 5}}, state.HealthUnhealthy,
			[]string{"is c 1:3, the spec says c 1:5"}},
		{"other type", []resolve.Node{{HostPath: char13, Type: "b", Major: 1, Minor: 3}}, state.HealthUnhealthy,
			[]string{"is c 1:3, the spec says b 1:3"}},
		{"every bad node is named", []resolve.Node{{HostPath: char13}, {HostPath: missing}, {HostPath: regular}}, state.HealthUnhealthy,
			[]string{missing + " is missing", regular + " is not a char"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkNodes(tc.nodes)
			assert.Equal(t, tc.want, got.Health)
			if tc.msg == nil {
				assert.Empty(t, got.Message)
			}
			for _, want := range tc.msg {
				assert.Contains(t, got.Message, want)
			}
		})
	}
}

// sources is what a monitor checks, changed by the test between rounds.
type sources struct {
	mu    sync.Mutex
	inv   resolve.Inventory
	inUse []string
}

func (s *sources) set(inv resolve.Inventory, inUse ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inv, s.inUse = inv, inUse
}

func (s *sources) monitor() *Monitor {
	return New(Sources{
		Inventory: func() resolve.Inventory { s.mu.Lock(); defer s.mu.Unlock(); return s.inv },
		InUse:     func() []string { s.mu.Lock(); defer s.mu.Unlock(); return s.inUse },
	}, time.Hour)
}

func inventory(errs map[string]error, devices ...resolve.Defined) resolve.Inventory {
	if errs == nil {
		errs = map[string]error{}
	}
	return resolve.Inventory{Devices: devices, SpecErrors: errs}
}

// TestMonitorRounds walks one monitor through the states a device goes
// through, round by round.
func TestMonitorRounds(t *testing.T) {
	testenv.RequireRoot(t, "to make device nodes with mknod")
	dir := t.TempDir()
	node := filepath.Join(dir, "dev0")
	mknod(t, node, 1, 3)
	byPath := filepath.Join(dir, "fuse")
	mknod(t, byPath, 10, 229)
	spec := filepath.Join(dir, "vendor.yaml")
	dev0 := resolve.Defined{Name: "vendor.com/dev=0", SpecPath: spec, Nodes: []resolve.Node{{HostPath: node, Type: "c", Major: 1, Minor: 3}}}
	dev1 := resolve.Defined{Name: "vendor.com/dev=1", SpecPath: spec}

	src := &sources{}
	m := src.monitor()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return clock }
	assert.Equal(t, state.DeviceHealth{Health: state.HealthUnknown, Message: "not checked yet"}, m.Health(dev0.Name))

	round := func(wantChanged bool) map[string]state.DeviceHealth {
		t.Helper()
		clock = clock.Add(time.Second)
		changed, err := m.Check(t.Context())
		require.NoError(t, err)
		assert.Equal(t, wantChanged, changed, "whether the round changed anything")
		return m.Snapshot()
	}

	src.set(inventory(nil, dev0, dev1), byPath)
	got := round(true)
	first := clock
	assert.Equal(t, map[string]state.DeviceHealth{
		dev0.Name: {Health: state.HealthHealthy, Since: first},
		dev1.Name: {Health: state.HealthHealthy, Since: first},
		byPath:    {Health: state.HealthHealthy, Since: first},
	}, got, "defined devices and device nodes in use")

	got = round(false)
	assert.Equal(t, first, got[dev0.Name].Since, "an unchanged health keeps its since")

	require.NoError(t, os.Remove(node))
	got = round(true)
	assert.Equal(t, state.HealthUnhealthy, got[dev0.Name].Health)
	assert.Contains(t, got[dev0.Name].Message, node+" is missing")
	assert.Equal(t, clock, got[dev0.Name].Since)
	assert.Equal(t, first, got[dev1.Name].Since, "the other device is untouched")
	assert.Equal(t, got[dev0.Name], m.Health(dev0.Name))

	src.set(inventory(map[string]error{spec: errors.New(`invalid version "9.9.9"`)}))
	got = round(true)
	for _, name := range []string{dev0.Name, dev1.Name} {
		assert.Equal(t, state.HealthUnhealthy, got[name].Health, "%s of a broken spec", name)
		assert.Equal(t, "spec "+spec+` is invalid: invalid version "9.9.9"`, got[name].Message)
	}
	assert.NotContains(t, got, byPath, "a device node nobody uses any longer is not watched")

	src.set(inventory(nil), dev1.Name)
	got = round(true)
	assert.Equal(t, map[string]state.DeviceHealth{dev1.Name: {Health: state.HealthUnhealthy,
		Message: "no spec defines it any longer (it was in " + spec + ")", Since: clock}}, got,
		"a removed device is kept while in use, and forgotten otherwise")

	src.set(inventory(nil))
	assert.Empty(t, round(true))
}

func TestCheckStopsWithItsContext(t *testing.T) {
	src := &sources{}
	src.set(inventory(nil, resolve.Defined{Name: "vendor.com/dev=0"}))
	m := src.monitor()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m.SetProbes(Probes{Checks: checks(t, "vendor.com/dev=*", []string{"/bin/true"}), Concurrency: 1})
	changed, err := m.Check(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, changed)
	assert.Empty(t, m.Snapshot(), "an interrupted round stores nothing")
}
