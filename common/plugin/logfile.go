package plugin

import (
	"io"
	"os"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"
	"gopkg.in/natefinch/lumberjack.v2"
)

// PreRegisteredLogDir is where a pre-registered plugin logs when the runtime
// discards its output: NRI launches plugins from its plugin directory with
// stdout and stderr on the null device (containerd and CRI-O alike), so
// without a file every line such a plugin writes would be lost.
const PreRegisteredLogDir = "/var/log/nri-suite"

// Rotation of those files: a node keeps at most (1+logBackups)*logMaxMB MB
// per plugin.
const (
	logMaxMB   = 10
	logBackups = 3
)

// logOutput is where the runner writes its logs and usage errors: stderr,
// unless this is a pre-registered plugin whose stderr is the null device;
// then <dir>/<NN-name>.log, rotated. A runtime or wrapper that does give
// the plugin a stderr keeps it.
func logOutput(stderr io.Writer, dir string) io.Writer {
	f, ok := stderr.(*os.File)
	if !preRegistered() || !ok || !isNullDevice(f) {
		return stderr
	}
	name := os.Getenv(api.PluginIdxEnvVar) + "-" + os.Getenv(api.PluginNameEnvVar)
	return &lumberjack.Logger{Filename: filepath.Join(dir, name+".log"), MaxSize: logMaxMB, MaxBackups: logBackups}
}

// isNullDevice tells whether f is /dev/null (the same device file, which
// os/exec opens for a child's unset stdout and stderr).
func isNullDevice(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}
