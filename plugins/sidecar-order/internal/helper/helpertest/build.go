// Package helpertest builds the real helper binary for tests, the way the
// project ships it: static and stripped.
package helpertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Pkg is the helper's main package, relative to the module root.
const Pkg = "./plugins/sidecar-order/cmd/sidecar-helper"

// Build builds the helper into dir (a test's temporary directory when
// empty) as nri-sidecar-helper and returns its path. Go's build cache makes
// repeated builds cheap.
func Build(t testing.TB, dir string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("locating the module root: %v", err)
	}
	out := filepath.Join(dir, "nri-sidecar-helper")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, Pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, output)
	}
	return out
}
