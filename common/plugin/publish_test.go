package plugin

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatusRemoveLeavesTheNextProcessRecord(t *testing.T) {
	dir := t.TempDir()
	log := logrus.NewEntry(logrus.New())
	old, err := newStatusPublisher(dir, "topology-aware", "30", log)
	require.NoError(t, err)
	next, err := newStatusPublisher(dir, "topology-aware", "30", log)
	require.NoError(t, err)
	next.base.PID++ // another process of the plugin

	old.publish(statusSnapshot{Connected: true, Ready: true})
	next.publish(statusSnapshot{Connected: true})
	old.remove()
	rec, found, err := next.records.Read("30-topology-aware")
	require.NoError(t, err)
	require.True(t, found, "the old process's clean stop leaves the next one's record")
	assert.Equal(t, next.base.PID, rec.PID)

	next.remove()
	_, found, err = next.records.Read("30-topology-aware")
	require.NoError(t, err)
	assert.False(t, found, "a process withdraws its own record")
}
