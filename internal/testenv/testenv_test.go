package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A test that cannot run skips outside CI and fails in CI, saying why
// either way. The verdict is read from a child test process.
func TestUnavailable(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Unavailable(t, "no frobnicator here")
		return
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestUnavailable"},
		{"true", true, "cannot run in CI: no frobnicator here"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestUnavailable$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		assert.Equal(t, tc.wantFail, err != nil, "CI=%q: %s", tc.ci, out)
		assert.True(t, strings.Contains(string(out), tc.want), "CI=%q: %s", tc.ci, out)
		assert.Contains(t, string(out), "no frobnicator here")
	}
}
