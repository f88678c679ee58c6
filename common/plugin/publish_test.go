package plugin

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
)

const statusKey = "30-topology-aware"

// newPublisher is a publisher in dir as if it were process pid, started at
// ticks on boot "boot-1".
func newPublisher(t *testing.T, dir string, pid int, ticks uint64) (*statusPublisher, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	p, err := newStatusPublisher(dir, "topology-aware", "30", logrus.NewEntry(log))
	require.NoError(t, err)
	p.base.PID, p.base.Started = pid, state.ProcessStart{BootID: "boot-1", Ticks: ticks}
	return p, hook
}

func readStatus(t *testing.T, p *statusPublisher) (state.PluginStatus, bool) {
	t.Helper()
	rec, found, err := p.records.Read(statusKey)
	require.NoError(t, err)
	return rec, found
}

func TestStatusRemoveLeavesTheNextProcessRecord(t *testing.T) {
	dir := t.TempDir()
	old, _ := newPublisher(t, dir, 100, 1000)
	next, _ := newPublisher(t, dir, 101, 2000)

	old.publish(statusSnapshot{Connected: true, Ready: true})
	next.publish(statusSnapshot{Connected: true})
	old.remove()
	rec, found := readStatus(t, next)
	require.True(t, found, "the old process's clean stop leaves the next one's record")
	assert.Equal(t, next.base.PID, rec.PID)

	next.remove()
	_, found = readStatus(t, next)
	assert.False(t, found, "a process withdraws its own record")
}

// TestStatusOldProcessLeavesTheNewerRecord: a process that publishes after
// a newer process of the plugin published, as an old DaemonSet pod losing
// its runtime beside its successor does, leaves the newer record as it is,
// and says so once.
func TestStatusOldProcessLeavesTheNewerRecord(t *testing.T) {
	dir := t.TempDir()
	old, oldLog := newPublisher(t, dir, 100, 1000)
	next, _ := newPublisher(t, dir, 101, 2000)
	old.publish(statusSnapshot{Connected: true, Ready: true})
	next.publish(statusSnapshot{Connected: true, Ready: true})

	old.publish(statusSnapshot{Reason: "connection to the runtime lost"})
	old.publish(statusSnapshot{Reason: "still away"})
	rec, found := readStatus(t, next)
	require.True(t, found)
	assert.Equal(t, next.base.PID, rec.PID, "the newer process's record stays")
	assert.True(t, rec.Ready)
	n := 0
	for _, e := range oldLog.AllEntries() {
		if strings.Contains(e.Message, "a newer process of the plugin publishes its status") {
			n++
		}
	}
	assert.Equal(t, 1, n, "said once")

	next.publish(statusSnapshot{Connected: true})
	rec, _ = readStatus(t, next)
	assert.False(t, rec.Ready, "the newer process goes on publishing")
	assert.Equal(t, next.base.Started, rec.Started)
}

// TestStatusPIDReuse: the same PID is not the same process. A process whose
// PID a newer one got (in another PID namespace) neither overwrites nor
// removes the newer one's record; a record of an earlier boot, or of a
// process whose start is unknown, is replaced.
func TestStatusPIDReuse(t *testing.T) {
	dir := t.TempDir()
	newer, _ := newPublisher(t, dir, 1, 5000)
	older, _ := newPublisher(t, dir, 1, 4000)
	newer.publish(statusSnapshot{Ready: true})
	older.publish(statusSnapshot{})
	older.remove()
	rec, found := readStatus(t, newer)
	require.True(t, found)
	assert.Equal(t, newer.base.Started, rec.Started)
	assert.True(t, rec.Ready)

	rebooted, _ := newPublisher(t, dir, 1, 10)
	rebooted.base.Started.BootID = "boot-2"
	rebooted.publish(statusSnapshot{Connected: true})
	rec, _ = readStatus(t, rebooted)
	assert.Equal(t, rebooted.base.Started, rec.Started, "a record of another boot is replaced")

	unknown, _ := newPublisher(t, dir, 7, 0)
	unknown.base.Started = state.ProcessStart{}
	unknown.publish(statusSnapshot{})
	rec, _ = readStatus(t, unknown)
	assert.Equal(t, 7, rec.PID, "a process that cannot tell replaces the record, as before")
	rebooted.publish(statusSnapshot{})
	rec, _ = readStatus(t, unknown)
	assert.Equal(t, 1, rec.PID, "and a record of unknown start is replaced")
}

func TestProcessStart(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want uint64
		err  string
	}{
		{"4242 (nri-topology) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 10 0 98765 1 2\n", 98765, ""},
		{"7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123 1\n", 123, ""},
		{"7 (x) R 1 2 3\n", 0, "4 fields after the command name: expected at least 20"},
		{"no command\n", 0, "no command name"},
		{"7 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 soon\n", 0, `starttime "soon"`},
	} {
		got, err := startTicks(tc.stat)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.stat)
			continue
		}
		require.NoError(t, err, tc.stat)
		assert.Equal(t, tc.want, got)
	}

	self, err := processStart("self")
	require.NoError(t, err)
	assert.NotEmpty(t, self.BootID)
	child := exec.Command("sleep", "10")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	started, err := processStart(strconv.Itoa(child.Process.Pid))
	require.NoError(t, err)
	assert.False(t, self.After(started), "a child does not start before its parent")
	assert.Equal(t, self.BootID, started.BootID)
}
