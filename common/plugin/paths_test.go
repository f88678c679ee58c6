package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	toRun := filepath.Join(dir, "run")
	require.NoError(t, os.Symlink("/run", toRun))
	for _, tc := range []struct{ value, want string }{
		{"/run/nri-suite", ""},
		{"/var/lib/nri-suite/state", ""},
		{filepath.Join(dir, "absent", "yet"), ""},
		{"/usr/local/libexec/nri-suite/nri-sidecar-helper", ""},
		{"", `state-dir: empty: expected an absolute path`},
		{"state", `state-dir: "state": expected an absolute path`},
		{"./run/x", `state-dir: "./run/x": expected an absolute path`},
		{"/run/nri-suite/../x", `state-dir: "/run/nri-suite/../x": expected a clean absolute path, such as /run/x`},
		{"/run//nri-suite", `expected a clean absolute path, such as /run/nri-suite`},
		{"/", `state-dir: "/" is a system directory: expected a file or directory of the plugin's own, such as /nri-suite`},
		{"/run", `state-dir: "/run" is a system directory`},
		{"/var/lib", `state-dir: "/var/lib" is a system directory`},
		{"/etc", `state-dir: "/etc" is a system directory`},
		{toRun, `state-dir: "` + toRun + `" resolves to the system directory /run`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			err := CheckPath("state-dir", tc.value)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckAbsPathTakesSystemDirs(t *testing.T) {
	assert.NoError(t, CheckAbsPath("--sysfs-root", "/sys"), "the kernel mounts sysfs there")
	assert.ErrorContains(t, CheckAbsPath("--sysfs-root", "sys"), `--sysfs-root: "sys": expected an absolute path`)
	assert.ErrorContains(t, CheckAbsPath("--sysfs-root", "/sys/"), `--sysfs-root: "/sys/": expected a clean absolute path, such as /sys`)
}
