package deployments

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/internal/catalog"
	securityconfig "github.com/nri-suite/nri-suite/plugins/security/config"
)

// suitePlugins are the plugins by name: install.sh's copy of their
// indexes must agree.
var suitePlugins = catalog.ByName()

// fakeBinDir makes a BIN_DIR whose binaries are scripts naming themselves,
// so that the test can tell which landed where.
func fakeBinDir(t *testing.T) string {
	dir := t.TempDir()
	for name := range suitePlugins {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "nri-"+name), []byte("#!/bin/sh\n# "+name+"\n"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nri-sidecar-helper"), []byte("#!/bin/sh\n# helper\n"), 0o755))
	return dir
}

// runInstall runs install.sh with env on top of a clean environment.
func runInstall(t *testing.T, env map[string]string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{"preregistered/install.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var nriPluginName = regexp.MustCompile(`^[0-9]{2}-[a-z0-9-]+$`)

func TestInstallLayout(t *testing.T) {
	bin, dest := fakeBinDir(t), t.TempDir()
	out, err := runInstall(t, map[string]string{"DESTDIR": dest, "PREFIX": "/usr"}, bin)
	require.NoError(t, err, out)

	pluginDir := filepath.Join(dest, DefaultPaths.PluginDir)
	entries, err := os.ReadDir(pluginDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		assert.Regexp(t, nriPluginName, e.Name(), "NRI refuses the plugin dir if any file is not NN-name")
	}
	var ids []string
	for _, p := range catalog.All {
		ids = append(ids, p.ID())
	}
	assert.ElementsMatch(t, ids, names)
	for name, p := range suitePlugins {
		path := filepath.Join(pluginDir, p.ID())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "#!/bin/sh\n# "+name+"\n", string(data), "%s is nri-%s", path, name)
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), path)

		conf := filepath.Join(dest, DefaultPaths.PluginConfigDir, p.ID()+".conf")
		st, err = os.Stat(conf)
		require.NoError(t, err, "every plugin gets its configuration")
		assert.Equal(t, os.FileMode(0o644), st.Mode().Perm(), conf)
	}

	helper := filepath.Join(dest, "/usr/libexec/nri-suite/nri-sidecar-helper")
	assert.FileExists(t, helper, "the helper goes under PREFIX, outside the plugin dir")
	conf, err := os.ReadFile(filepath.Join(dest, DefaultPaths.PluginConfigDir, "20-sidecar-order.conf"))
	require.NoError(t, err)
	assert.Contains(t, string(conf), "\nhelper: /usr/libexec/nri-suite/nri-sidecar-helper\n", "the path on the node, without DESTDIR")
	assert.NotContains(t, string(conf), "@")
}

// TestMakeInstall runs `make install` as a user would (into DESTDIR): it
// installs the images' static, stripped binaries, which run on a node
// whatever its C library, and names every file it put there.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	dest := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "--no-print-directory", "install", "DESTDIR="+dest, "IMAGES_OUT="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	installed := regexp.MustCompile(`(?m)^installed (/\S+)$`).FindAllStringSubmatch(string(out), -1)
	require.Len(t, installed, 2*len(suitePlugins)+1, "a line per binary, configuration and the helper: %s", out)
	for _, line := range installed {
		path := line[1]
		require.FileExists(t, path)
		if strings.HasSuffix(path, ".conf") {
			continue
		}
		f, err := elf.Open(path)
		require.NoError(t, err, "%s is an executable", path)
		for _, prog := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, prog.Type, "%s is static: no dynamic loader", path)
		}
		assert.Nil(t, f.Section(".symtab"), "%s is stripped", path)
		require.NoError(t, f.Close())
	}
}

func TestInstallKeepsEditedConfigAndUninstalls(t *testing.T) {
	bin, dest := fakeBinDir(t), t.TempDir()
	env := map[string]string{"DESTDIR": dest, "NRI_PLUGIN_DIR": "/p", "NRI_CONF_DIR": "/c", "PREFIX": "/x"}
	out, err := runInstall(t, env, bin)
	require.NoError(t, err, out)
	edited := filepath.Join(dest, "c", "30-topology-aware.conf")
	require.NoError(t, os.WriteFile(edited, []byte("reserved-cpus: \"0\"\n"), 0o644))
	shipped := filepath.Join(dest, "c", "90-stats.conf")
	require.NoError(t, os.Remove(shipped))

	out, err = runInstall(t, env, bin)
	require.NoError(t, err, out)
	assert.Contains(t, out, "kept "+edited)
	data, err := os.ReadFile(edited)
	require.NoError(t, err)
	assert.Equal(t, "reserved-cpus: \"0\"\n", string(data), "an upgrade keeps the operator's configuration")
	assert.FileExists(t, shipped, "a missing configuration is installed again")

	out, err = runInstall(t, env, "--uninstall", bin)
	require.NoError(t, err, out)
	for _, dir := range []string{"p", "c"} {
		entries, err := os.ReadDir(filepath.Join(dest, dir))
		require.NoError(t, err)
		assert.Empty(t, entries, "uninstall removes what install put into %s", dir)
	}
	assert.NoDirExists(t, filepath.Join(dest, "x/libexec/nri-suite"))
}

func TestInstallSubset(t *testing.T) {
	bin, dest := fakeBinDir(t), t.TempDir()
	out, err := runInstall(t, map[string]string{"DESTDIR": dest, "PLUGINS": "device-injector stats"}, bin)
	require.NoError(t, err, out)
	entries, err := os.ReadDir(filepath.Join(dest, DefaultPaths.PluginDir))
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, "10-device-injector", entries[0].Name())
	assert.Equal(t, "90-stats", entries[1].Name())
	assert.NoFileExists(t, filepath.Join(dest, "/usr/local/libexec/nri-suite/nri-sidecar-helper"), "no helper without sidecar-order")
}

func TestInstallErrors(t *testing.T) {
	bin := fakeBinDir(t)
	require.NoError(t, os.Remove(filepath.Join(bin, "nri-sidecar-helper")))
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{name: "no bin dir", wantErr: "usage: install.sh [--uninstall] BIN_DIR"},
		{name: "missing binary", args: []string{t.TempDir()}, wantErr: "plugin device-injector: "},
		{name: "missing helper", args: []string{bin}, wantErr: "sidecar-order: " + bin + "/nri-sidecar-helper is missing"},
		{name: "unknown plugin", env: map[string]string{"PLUGINS": "stats gpu"}, args: []string{bin},
			wantErr: `PLUGINS: unknown plugin "gpu", expected some of: device-injector sidecar-order topology-aware security stats`},
		{name: "relative dir", env: map[string]string{"NRI_PLUGIN_DIR": "plugins"}, args: []string{bin},
			wantErr: "must be absolute paths, got plugins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := t.TempDir()
			env := map[string]string{"DESTDIR": dest}
			for k, v := range tt.env {
				env[k] = v
			}
			out, err := runInstall(t, env, tt.args...)
			require.Error(t, err)
			assert.Contains(t, out, tt.wantErr)
			entries, err := os.ReadDir(dest)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing is installed when a check fails")
		})
	}
}

// Every shipped configuration is named NN-name.conf after a plugin and its index.
func TestShippedConfigsMatchTheirPlugins(t *testing.T) {
	entries, err := os.ReadDir("preregistered/conf.d")
	require.NoError(t, err)
	var plugins []string
	for _, e := range entries {
		base := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".in"), ".conf")
		idx, name, ok := strings.Cut(base, "-")
		require.True(t, ok, e.Name())
		assert.Equal(t, suitePlugins[name].Index, idx, "%s: the plugin's NRI index", e.Name())
		plugins = append(plugins, name)
	}
	assert.Len(t, plugins, len(suitePlugins))
}

// The suite does not refuse itself: the installed security configuration
// lets sidecar-order mount what its installed configuration makes it mount,
// its helper and a pod's directory under its state-dir.
func TestInstalledSecurityAllowsTheSuitesMounts(t *testing.T) {
	bin, dest := fakeBinDir(t), t.TempDir()
	out, err := runInstall(t, map[string]string{"DESTDIR": dest, "PREFIX": "/opt/suite"}, bin)
	require.NoError(t, err, out)
	confDir := filepath.Join(dest, DefaultPaths.PluginConfigDir)
	data, err := os.ReadFile(filepath.Join(confDir, "20-sidecar-order.conf"))
	require.NoError(t, err)
	var sidecar struct {
		Helper   string `yaml:"helper"`
		StateDir string `yaml:"state-dir"`
	}
	require.NoError(t, yaml.Unmarshal(data, &sidecar))
	require.Equal(t, "/opt/suite/libexec/nri-suite/nri-sidecar-helper", sidecar.Helper)

	path := filepath.Join(confDir, "40-security.conf")
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	cfg, err := securityconfig.Parse(data, path)
	require.NoError(t, err)
	const id = securityconfig.PluginID("20-sidecar-order")
	assert.True(t, cfg.Validator.Mounts.Allows(id, sidecar.Helper), "the helper")
	assert.True(t, cfg.Validator.Mounts.Allows(id, sidecar.StateDir+"/0b4a8f0e-pod-uid"), "a pod's coordination directory")
	assert.False(t, cfg.Validator.Mounts.Allows(id, sidecar.StateDir), "nothing more")
	assert.False(t, cfg.Validator.Mounts.Allows("10-device-injector", sidecar.Helper), "for sidecar-order only")
}

// The installed security configuration refuses a pod for a plugin it names
// in annotation-plugins only if that plugin is installed too: a node without
// device-injector runs pods with cdi.k8s.io annotations as before.
func TestInstalledSecurityNamesTheInstalledPlugins(t *testing.T) {
	for _, tc := range []struct {
		plugins string
		want    []string // the plugins annotation-plugins names
	}{
		{"", []string{"10-device-injector", "20-sidecar-order"}},
		{"security sidecar-order", []string{"20-sidecar-order"}},
		{"security stats", nil},
	} {
		t.Run(tc.plugins, func(t *testing.T) {
			bin, dest := fakeBinDir(t), t.TempDir()
			env := map[string]string{"DESTDIR": dest}
			if tc.plugins != "" {
				env["PLUGINS"] = tc.plugins
			}
			out, err := runInstall(t, env, bin)
			require.NoError(t, err, out)
			path := filepath.Join(dest, DefaultPaths.PluginConfigDir, "40-security.conf")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			cfg, err := securityconfig.Parse(data, path)
			require.NoError(t, err)
			var named []string
			for _, id := range cfg.Validator.AnnotationPlugins {
				if !slices.Contains(named, id) {
					named = append(named, id)
				}
			}
			slices.Sort(named)
			assert.Equal(t, tc.want, named)
			if slices.Contains(tc.want, "10-device-injector") {
				assert.Equal(t, "10-device-injector", cfg.Validator.AnnotationPlugins["cdi.k8s.io"])
			}
		})
	}
}
