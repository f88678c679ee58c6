package netns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Command runs its argv in the namespace's network namespace, in the
// caller's mount namespace, as the very process the caller started.
func TestCommand(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ns := newNamespace(t, uniqueName(t, ""))

	argv := ns.Command([]string{"sh", "-c", "echo $$; readlink /proc/self/ns/net /proc/self/ns/mnt"})
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = &out
	require.NoError(t, cmd.Run())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())

	assert.Equal(t, strconv.Itoa(cmd.Process.Pid), lines[0], "nsenter did not exec in place")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(ns.Path(), &st))
	assert.Equal(t, fmt.Sprintf("net:[%d]", st.Ino), lines[1])
	ownMnt, err := os.Readlink("/proc/self/ns/mnt")
	require.NoError(t, err)
	assert.Equal(t, ownMnt, lines[2])
}
