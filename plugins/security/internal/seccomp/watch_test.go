package seccomp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx) }()

	// New files, also in a directory created after Watch started, are picked up.
	writeProfile(t, dir, "deny-mkdir.json", denyMkdir)
	require.Eventually(t, func() bool {
		_, err := s.Build(Request{Profile: "deny-mkdir.json"})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	writeProfile(t, dir, "team/strict.json", denyMkdir)
	require.Eventually(t, func() bool {
		_, err := s.Build(Request{Profile: "team/strict.json"})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)

	// An invalid edit is reported and does not stop the watch.
	writeProfile(t, dir, "deny-mkdir.json", `{"defaultAction":`)
	require.Eventually(t, func() bool {
		_, invalid, _ := s.Status()
		return invalid == 1
	}, 10*time.Second, 20*time.Millisecond)
	_, err := s.Build(Request{Profile: "deny-mkdir.json"})
	assert.NoError(t, err, "the previous version stays in use")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}

func TestWatchWithoutDirectory(t *testing.T) {
	err := newStore(t, "").Watch(context.Background())
	assert.ErrorContains(t, err, "no profile directory configured")
}
