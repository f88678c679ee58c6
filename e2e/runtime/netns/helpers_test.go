package netns

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/internal/testenv"
)

// requireRoot skips a test that makes namespaces when it cannot (not root,
// no iproute2 or nsenter), saying why; with CI=true it fails instead.
func requireRoot(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root to create network namespaces"
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil && why == "" {
			why = "needs " + tool + ": " + err.Error()
		}
	}
	if why != "" {
		testenv.Unavailable(t, why)
	}
}

// uniqueName is Prefix+infix and random hex, so that parallel tests and runs
// never share a namespace.
func uniqueName(t *testing.T, infix string) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return Prefix + infix + hex.EncodeToString(b)
}

var nodeAddr = &net.IPNet{IP: net.IPv4(198, 18, 0, 2), Mask: net.CIDRMask(24, 32)}

func testConfig() Config {
	return Config{Interface: "node0", Address: nodeAddr, Routes: []*net.IPNet{{IP: net.IPv4(198, 18, 128, 0), Mask: net.CIDRMask(24, 32)}}}
}

// newNamespace creates a namespace named name for t; cleanup closes it and
// checks that it is gone.
func newNamespace(t *testing.T, name string) *Namespace {
	t.Helper()
	ns, err := Create(name, testConfig())
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, ns.Close())
		assert.False(t, listed(t, name), "%s still in ip netns list", name)
	})
	return ns
}

// listed reports whether `ip netns list` shows name.
func listed(t *testing.T, name string) bool {
	t.Helper()
	for _, line := range strings.Split(ipOut(t, "netns", "list"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// ipOut runs ip and returns its output, failing the test if it fails.
func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}
