package deployments

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var privatePaths = Paths{
	NRISocket:       "/run/sb/nri/nri.sock",
	PluginDir:       "/run/sb/nri/plugins",
	PluginConfigDir: "/run/sb/nri/conf.d",
	CDISpecDirs:     []string{"/run/sb/cdi", "/run/sb/cdi-run"},
}

// quotes are the string quotes of each drop-in's format.
var quotes = map[string]string{Containerd: "'", CRIO: `"`}

func defaultPathList() []string {
	return append([]string{DefaultPaths.NRISocket, DefaultPaths.PluginDir, DefaultPaths.PluginConfigDir}, DefaultPaths.CDISpecDirs...)
}

func TestDropInWithDefaultPathsIsTheShippedFile(t *testing.T) {
	for runtime, d := range dropIns {
		got, err := DropIn(runtime, DefaultPaths)
		require.NoError(t, err, runtime)
		assert.Equal(t, d.content, got, runtime)
	}
}

// The rewritten drop-in differs from the shipped one in the path values
// only: every other line is the same, and no default path is left.
func TestDropInReplacesOnlyThePaths(t *testing.T) {
	for runtime, d := range dropIns {
		t.Run(runtime, func(t *testing.T) {
			got, err := DropIn(runtime, privatePaths)
			require.NoError(t, err)
			shipped, rewritten := strings.Split(d.content, "\n"), strings.Split(got, "\n")
			require.Len(t, rewritten, len(shipped))
			changed := 0
			for i := range shipped {
				if shipped[i] != rewritten[i] {
					changed++
					assert.NotContains(t, rewritten[i], "#", "line %d: a comment changed", i+1)
				}
			}
			assert.Equal(t, 4, changed, "socket, plugin dir, config dir and the CDI list's line")
			for _, p := range defaultPathList() {
				assert.NotContains(t, got, "'"+p+"'")
				assert.NotContains(t, got, `"`+p+`"`)
			}
			for _, p := range append([]string{privatePaths.NRISocket, privatePaths.PluginDir, privatePaths.PluginConfigDir}, privatePaths.CDISpecDirs...) {
				assert.Equal(t, 1, strings.Count(got, quotes[runtime]+p+quotes[runtime]), "%s once, in the file's quotes", p)
			}
		})
	}
}

// A new path that equals another default is not replaced a second time.
func TestDropInSwapsPaths(t *testing.T) {
	swapped := DefaultPaths
	swapped.CDISpecDirs = []string{DefaultPaths.CDISpecDirs[1], DefaultPaths.CDISpecDirs[0]}
	got, err := DropIn(Containerd, swapped)
	require.NoError(t, err)
	assert.Contains(t, got, "cdi_spec_dirs = ['/var/run/cdi', '/etc/cdi']")
}

func TestDropInErrors(t *testing.T) {
	tests := []struct {
		name    string
		runtime string
		paths   func(p Paths) Paths
		wantErr string
	}{
		{name: "unknown runtime", runtime: "docker", wantErr: `runtime drop-in "docker": unknown runtime, expected containerd or crio`},
		{name: "one CDI dir", runtime: Containerd, paths: func(p Paths) Paths { p.CDISpecDirs = []string{"/x"}; return p },
			wantErr: `rewriting deployments/containerd/nri-suite.toml: 1 CDI spec dirs ["/x"] given, expected 2`},
		{name: "relative path", runtime: CRIO, paths: func(p Paths) Paths { p.PluginDir = "plugins"; return p },
			wantErr: `rewriting deployments/crio/nri-suite.conf: path "plugins" in place of /opt/nri/plugins: expected an absolute path`},
		{name: "quote in path", runtime: Containerd, paths: func(p Paths) Paths { p.NRISocket = "/run/x'y"; return p },
			wantErr: `path "/run/x'y" in place of /var/run/nri/nri.sock: expected an absolute path without quotes`},
		{name: "empty path", runtime: Containerd, paths: func(p Paths) Paths { p.PluginConfigDir = ""; return p },
			wantErr: `path "" in place of /etc/nri/conf.d`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := privatePaths
			if tt.paths != nil {
				p = tt.paths(p)
			}
			_, err := DropIn(tt.runtime, p)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestFindQuotedOnce(t *testing.T) {
	tests := []struct {
		content, value string
		wantAt         int
		wantErr        string
	}{
		{content: `a = '/x'`, value: "/x", wantAt: 4},
		{content: `a = "/x"`, value: "/x", wantAt: 4},
		{content: `a = "/xy"`, value: "/x", wantErr: "default path /x occurs quoted 0 times, expected exactly once"},
		{content: `a = "/x"` + "\n" + `b = '/x'`, value: "/x", wantErr: "occurs quoted 2 times"},
	}
	for _, tt := range tests {
		at, _, err := findQuotedOnce(tt.content, tt.value)
		if tt.wantErr != "" {
			assert.ErrorContains(t, err, tt.wantErr, tt.content)
			continue
		}
		require.NoError(t, err, tt.content)
		assert.Equal(t, tt.wantAt, at, tt.content)
	}
}

// FuzzDropIn: any paths give an error or a drop-in holding each of them.
func FuzzDropIn(f *testing.F) {
	f.Add("/run/sb/nri.sock", "/run/sb/plugins", "/run/sb/conf.d", "/run/sb/cdi")
	f.Add("/etc/cdi", "/var/run/cdi", "/opt/nri/plugins", "/etc/nri/conf.d")
	f.Add("relative", "/a'b", "/c\"d", "/e\\f")
	f.Fuzz(func(t *testing.T, socket, plugins, conf, cdi string) {
		p := Paths{NRISocket: socket, PluginDir: plugins, PluginConfigDir: conf, CDISpecDirs: []string{cdi, cdi + "/run"}}
		for runtime := range dropIns {
			got, err := DropIn(runtime, p)
			if err != nil {
				continue
			}
			for _, path := range []string{socket, plugins, conf, cdi, cdi + "/run"} {
				assert.Contains(t, got, path)
			}
		}
	})
}
