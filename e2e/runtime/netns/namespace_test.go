package netns

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A new namespace has lo and the node's interface and address up, its
// routes (the Service range) on that interface, no default route (so
// nothing outside is reachable), and ip_forward on inside only.
func TestCreate(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	hostForward, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)

	ns := newNamespace(t, uniqueName(t, ""))
	assert.True(t, listed(t, ns.Name()))
	assert.Equal(t, "/run/netns/"+ns.Name(), ns.Path())

	assert.Contains(t, ipOut(t, "-n", ns.Name(), "link", "show", "lo"), ",UP,")
	assert.Contains(t, ipOut(t, "-n", ns.Name(), "-o", "addr", "show", "dev", "lo"), "inet 127.0.0.1/8")
	assert.Contains(t, ipOut(t, "-n", ns.Name(), "link", "show", "node0"), ",UP,LOWER_UP>")
	assert.Contains(t, ipOut(t, "-n", ns.Name(), "-o", "addr", "show", "dev", "node0"), "inet 198.18.0.2/24")
	// node0's peer is inside too, up, without an IPv4 address.
	assert.Contains(t, ipOut(t, "-n", ns.Name(), "link", "show", "node0-peer"), "node0-peer@node0:")
	assert.NotContains(t, ipOut(t, "-n", ns.Name(), "-o", "addr", "show", "dev", "node0-peer"), "inet ")

	assert.Contains(t, ipOut(t, "-n", ns.Name(), "route", "show", "198.18.128.0/24"), "198.18.128.0/24 dev node0")
	assert.Empty(t, ipOut(t, "-n", ns.Name(), "route", "show", "default"))
	assert.Empty(t, ipOut(t, "-n", ns.Name(), "-6", "route", "show", "default"))
	// A route lookup only: no packet is sent.
	out, err := exec.Command("ip", "-n", ns.Name(), "route", "get", "192.0.2.1").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "Network is unreachable")

	argv := ns.Command([]string{"cat", "/proc/sys/net/ipv4/ip_forward"})
	inside, err := exec.Command(argv[0], argv[1:]...).Output()
	require.NoError(t, err)
	assert.Equal(t, "1", strings.TrimSpace(string(inside)))
	after, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	require.NoError(t, err)
	assert.Equal(t, string(hostForward), string(after), "the host's ip_forward changed")
}

func TestClose(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ns, err := Create(uniqueName(t, ""), testConfig())
	require.NoError(t, err)
	require.True(t, listed(t, ns.Name()))

	require.NoError(t, ns.Close())
	assert.False(t, listed(t, ns.Name()))
	assert.NoFileExists(t, ns.Path())
	assert.NoError(t, ns.Close(), "a second Close")
}

// A namespace whose setup fails is not left behind.
func TestCreateFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	name := uniqueName(t, "")
	_, err := Create(name, Config{Interface: "longer-than-ifnamsiz", Address: nodeAddr})
	require.ErrorContains(t, err, "setting up network namespace "+name)
	assert.False(t, listed(t, name))
}

// Bad names and configs are refused before anything is made (no root needed).
func TestCreateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		cfg           Config
	}{
		{name: "", wantErr: `name "": want nri-cluster- followed by`},
		{name: Prefix, wantErr: `name "nri-cluster-"`},
		{name: "cni-1234", wantErr: `name "cni-1234"`},
		{name: Prefix + "a/b", wantErr: `without a slash`},
		{name: Prefix + "x", cfg: Config{Address: nodeAddr}, wantErr: "network namespace nri-cluster-x: config needs an interface and an address"},
		{name: Prefix + "x", cfg: Config{Interface: "node0"}, wantErr: "config needs an interface and an address"},
		{
			name: Prefix + "x", cfg: Config{Interface: "node0", Address: &net.IPNet{IP: net.IPv4(198, 18, 0, 0), Mask: net.CIDRMask(24, 32)}},
			wantErr: "address 198.18.0.0/24 is the network's own address",
		},
	} {
		if tc.cfg.Interface == "" && tc.cfg.Address == nil {
			tc.cfg = testConfig()
		}
		_, err := Create(tc.name, tc.cfg)
		assert.ErrorContains(t, err, tc.wantErr, "name %q", tc.name)
	}
}
