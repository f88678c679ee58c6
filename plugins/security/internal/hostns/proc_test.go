package hostns

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcHost(t *testing.T) {
	h := ProcHost{Proc: "/proc"}
	own := fmt.Sprintf("/proc/%d/ns/net", os.Getpid())
	host, err := h.IsHost("network", own)
	require.NoError(t, err)
	assert.True(t, host, "the plugin's own namespace is the host's")
	host, err = h.IsHost("network", "/proc/self/ns/ipc")
	require.NoError(t, err)
	assert.False(t, host, "another namespace type is another inode")
	missing := filepath.Join(t.TempDir(), "missing")
	_, err = h.IsHost("network", missing)
	assert.ErrorContains(t, err, "reading namespace "+missing)
	_, err = h.IsHost("bogus", own)
	assert.ErrorContains(t, err, `unknown namespace type "bogus"`)
	_, err = ProcHost{Proc: t.TempDir()}.IsHost("network", own)
	assert.ErrorContains(t, err, "reading the host's network namespace")
}
