package simulate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/e2e/harness"
)

// TestBinary runs the nri-topology-aware binary's simulate subcommand end
// to end: the report on stdout is the golden one, and the exit codes tell
// usage errors (2) from failures (1).
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := harness.BuildPlugin(t, pluginPkg)
	c := goldenCases[0]
	want, err := os.ReadFile(c.golden())
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []byte
		stderr string
	}{
		{"golden run", c.args(), ExitOK, want, ""},
		{"both machines", append(c.args(), "--topology", filepath.Join(fixtureDir(c.fixture), "description.yaml")), ExitUsage, nil,
			"exactly one of --sysfs DIR or --topology FILE"},
		{"missing workload", []string{"--sysfs", c.args()[1], "--workload", filepath.Join(t.TempDir(), "none.yaml")}, ExitFailure, nil,
			"read workload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"simulate"}, tc.args...)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			assert.Equal(t, string(tc.stdout), stdout.String())
			if tc.stderr == "" {
				assert.Empty(t, stderr.String())
			} else {
				assert.Contains(t, stderr.String(), tc.stderr)
			}
		})
	}
}
