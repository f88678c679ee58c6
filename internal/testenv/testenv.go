// Package testenv says what a test may expect of the machine it runs on.
// Outside CI a test that cannot run here (not root, a tool missing) skips
// and says why; in CI (CI=true, as .ci/run sets it) everything the tests
// need is installed, so the same test fails instead: a test that skips in
// CI proves nothing.
package testenv

import (
	"os"
	"testing"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable skips t, saying why it cannot run here; in CI it fails t.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("cannot run in CI: %s", why)
	}
	t.Skip(why)
}

// RequireRoot is Unavailable unless the test runs as root; why says what
// it needs root for.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root "+why)
	}
}
