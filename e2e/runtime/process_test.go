package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A daemon runs where its command says, by default next to its log, with
// its output and its environment additions in the log.
func TestStartProcessWorkingDirAndLog(t *testing.T) {
	base := t.TempDir()
	work := filepath.Join(base, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	tests := []struct {
		name, dir, want string
	}{
		{name: "default: the log's directory", dir: "", want: base},
		{name: "its own directory", dir: work, want: work},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logPath := filepath.Join(base, fmt.Sprintf("d%d.log", i))
			p, err := startProcess(command{name: "pwd", argv: []string{"sh", "-c", `pwd; echo "X=$X"`},
				env: []string{"X=from-env"}, logPath: logPath, dir: tt.dir})
			require.NoError(t, err)
			<-p.done
			data, err := os.ReadFile(logPath)
			require.NoError(t, err)
			assert.Equal(t, []string{tt.want, "X=from-env"}, strings.Fields(string(data)))
		})
	}
	_, err := startProcess(command{name: "nothing", argv: []string{filepath.Join(base, "missing")}, logPath: filepath.Join(base, "m.log")})
	assert.ErrorContains(t, err, "starting nothing")
}

// A runtime that was never started has no PID, cannot be restarted, and
// stops without complaint (teardown after a failed start).
func TestCRIDaemonNotStarted(t *testing.T) {
	for _, name := range RuntimeNames() {
		rt, err := NewRuntime(name)
		require.NoError(t, err)
		assert.Zero(t, rt.PID(), "%s PID", name)
		assert.ErrorContains(t, rt.Restart(context.Background()), "the runtime was not started", "%s Restart", name)
		assert.NoError(t, rt.Stop(context.Background(), time.Second), "%s Stop", name)
	}
}
