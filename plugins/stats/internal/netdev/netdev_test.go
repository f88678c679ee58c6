package netdev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const header = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

// The fixture is a host's file with the interfaces cAdvisor leaves out (lo,
// veth*, docker*, and case-insensitively LOOP1 for its "lo" prefix) and a
// counter that runs into the colon, as the kernel writes one wider than
// its column.
func TestRead(t *testing.T) {
	proc := t.TempDir()
	data, err := os.ReadFile("testdata/net_dev")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "42", "net"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "42", "net", "dev"), data, 0o644))

	got, err := Read(proc, 42)
	require.NoError(t, err)
	assert.Equal(t, []Interface{
		{Name: "eth0", RxBytes: 18446744073709551615, RxPackets: 58959, RxErrors: 3, RxDropped: 4,
			TxBytes: 4432833, TxPackets: 41185, TxErrors: 9, TxDropped: 10},
		{Name: "ifb0"},
	}, got)
}

func TestReadMissing(t *testing.T) {
	_, err := Read(t.TempDir(), 7)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), filepath.Join("7", "net", "dev"))
}

func TestParseOnlyIgnored(t *testing.T) {
	got, err := Parse([]byte(header + "    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"))
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NotNil(t, got, "no interfaces is an empty list, not a failure")
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "no header"},
		{"header only half", "Inter-|\n", "no header"},
		{"short line", header + "  eth0: 1 2 3\n", `line 3: "  eth0: 1 2 3"`},
		{"long line", header + "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", "expected \"<interface>: <16 counters>\""},
		{"no colon", header + "  eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", "line 3"},
		{"no name", header + "  : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", "line 3"},
		{"space in name", header + "et h0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", "line 3"},
		{"not a number", header + "  eth0: 1 2 3 4 5 6 7 8 x 10 11 12 13 14 15 16\n", `interface eth0: counter "x"`},
		{"negative", header + "  eth0: -1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", `counter "-1"`},
		{"bad line after good", header + "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n  eth1:\n", "line 4"},
		{"ignored but malformed", header + "  lo: 1\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.text))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, got)
		})
	}
}

// A file that does not parse names itself in the error.
func TestReadNamesTheFile(t *testing.T) {
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "1", "net"), 0o755))
	path := filepath.Join(proc, "1", "net", "dev")
	require.NoError(t, os.WriteFile(path, []byte(header+"eth0: 1\n"), 0o644))
	_, err := Read(proc, 1)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), path+": line 3"), err.Error())
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile("testdata/net_dev")
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte(header + "eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"))
	f.Add([]byte(header + "eth0: 1 2\n"))
	f.Add([]byte("\n\n:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Parse(data)
		if err != nil {
			if got != nil {
				t.Fatalf("error %v with a result %+v", err, got)
			}
			return
		}
		for _, iface := range got {
			if iface.Name == "" || ignored(iface.Name) || strings.ContainsAny(iface.Name, " \t:") {
				t.Fatalf("accepted interface name %q", iface.Name)
			}
		}
	})
}
