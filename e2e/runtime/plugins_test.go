package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginSpecValidate(t *testing.T) {
	tests := []struct {
		spec    PluginSpec
		wantErr string
	}{
		{spec: PluginSpec{Binary: "/b", Name: "x", Idx: "05"}},
		{spec: PluginSpec{Binary: "/b", Name: "x", Idx: "5"}, wantErr: `plugin x: idx "5": expected two digits, 00 to 99`},
		{spec: PluginSpec{Binary: "/b", Name: "x", Idx: "-1"}, wantErr: `idx "-1": expected two digits`},
		{spec: PluginSpec{Binary: "/b", Name: "x", Idx: "ab"}, wantErr: `idx "ab": expected two digits`},
		{spec: PluginSpec{Binary: "/b", Idx: "10"}, wantErr: "binary and name are required"},
		{spec: PluginSpec{Name: "x", Idx: "10"}, wantErr: "binary and name are required"},
	}
	for _, tt := range tests {
		err := tt.spec.validate()
		if tt.wantErr == "" {
			assert.NoError(t, err, "%+v", tt.spec)
		} else {
			assert.ErrorContains(t, err, tt.wantErr)
		}
	}
}

func TestLoggedAddr(t *testing.T) {
	tests := map[string]string{
		`time="x" level=info msg="serving /metrics, /healthz and /readyz" addr="127.0.0.1:41234" plugin=e2e`:                 "127.0.0.1:41234",
		`level=info msg="serving /metrics, /healthz and /readyz" addr=127.0.0.1:80` + "\n":                                   "127.0.0.1:80",
		"level=info msg=\"serving /metrics\" addr=\"127.0.0.1:1\"\nlevel=info msg=\"serving /metrics\" addr=\"127.0.0.1:2\"": "127.0.0.1:2",
		`level=info msg="registered with the runtime" addr="127.0.0.1:9"`:                                                    "",
		"": "",
	}
	for log, want := range tests {
		assert.Equal(t, want, LoggedAddr(log, runnerServingMsg), "LoggedAddr(%q)", log)
	}
}

func TestPluginArgs(t *testing.T) {
	tests := []struct {
		name string
		spec PluginSpec
		conf string
		want []string
	}{
		{name: "runner flags and config", spec: PluginSpec{Binary: "/bin/nri-x", Name: "x", Idx: "30"}, conf: "/c.yaml",
			want: []string{"/bin/nri-x", "--name", "x", "--idx", "30", "--socket", "/run/s/nri.sock",
				"--http-addr", "127.0.0.1:0", "--log-level", "info", "--shared-dir", "/run/s/shared", "--config", "/c.yaml"}},
		{name: "log level, no config", spec: PluginSpec{Binary: "/bin/nri-x", Name: "x", Idx: "30", LogLevel: "debug"},
			want: []string{"/bin/nri-x", "--name", "x", "--idx", "30", "--socket", "/run/s/nri.sock",
				"--http-addr", "127.0.0.1:0", "--log-level", "debug", "--shared-dir", "/run/s/shared"}},
		{name: "own flags after the runner's, plugin dir expanded",
			spec: PluginSpec{Binary: "/bin/nri-x", Name: "x", Idx: "30", Args: []string{"--state-dir", PluginDir + "/state", "--sysfs-root=/sys", "--copy=" + PluginDir + ":" + PluginDir}},
			want: []string{"/bin/nri-x", "--name", "x", "--idx", "30", "--socket", "/run/s/nri.sock",
				"--http-addr", "127.0.0.1:0", "--log-level", "info", "--shared-dir", "/run/s/shared",
				"--state-dir", "/run/s/plugins/30-x/state", "--sysfs-root=/sys", "--copy=/run/s/plugins/30-x:/run/s/plugins/30-x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, pluginArgs(tt.spec, "/run/s/nri.sock", tt.conf, "/run/s/shared", "/run/s/plugins/30-x"))
		})
	}
}

func TestInstallPreRegistered(t *testing.T) {
	dir := t.TempDir()
	nri := NRIConfig{PluginPath: filepath.Join(dir, "plugins"), PluginConfigPath: filepath.Join(dir, "conf.d")}
	require.NoError(t, os.MkdirAll(nri.PluginPath, 0o755))
	require.NoError(t, os.MkdirAll(nri.PluginConfigPath, 0o755))
	bin := filepath.Join(dir, "nri-x")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))

	require.NoError(t, installPreRegistered(PluginSpec{Binary: bin, Name: "x", Idx: "20", Config: []byte("a: 1\ndirs: [" + CDIDir + "]\n")}, nri, "/sb/cdi"))
	st, err := os.Stat(filepath.Join(nri.PluginPath, "20-x"))
	require.NoError(t, err)
	assert.NotZero(t, st.Mode().Perm()&0o100, "the installed plugin is executable")
	conf, err := os.ReadFile(filepath.Join(nri.PluginConfigPath, "20-x.conf"))
	require.NoError(t, err)
	assert.Equal(t, "a: 1\ndirs: [/sb/cdi]\n", string(conf), "CDIDir stands for the sandbox's CDI spec dir")

	err = installPreRegistered(PluginSpec{Binary: filepath.Join(dir, "missing"), Name: "y", Idx: "21"}, nri, "/sb/cdi")
	assert.ErrorContains(t, err, "reading plugin binary")
	err = installPreRegistered(PluginSpec{Binary: bin, Name: "z", Idx: "22", Args: []string{"--state-dir", "/s"}}, nri, "/sb/cdi")
	assert.ErrorContains(t, err, `pre-registered plugin 22-z: args ["--state-dir" "/s"]: the runtime launches pre-registered plugins without flags`)
	assert.NoFileExists(t, filepath.Join(nri.PluginPath, "22-z"), "a refused plugin is not installed")
}

func TestPreRegisteredFromLayout(t *testing.T) {
	dir := t.TempDir()
	plugins, confs := filepath.Join(dir, "plugins"), filepath.Join(dir, "conf.d")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	require.NoError(t, os.MkdirAll(confs, 0o755))
	for _, name := range []string{"10-a", "90-b"} {
		require.NoError(t, os.WriteFile(filepath.Join(plugins, name), []byte("#!/bin/sh\n"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(confs, "10-a.conf"), []byte("k: v\n"), 0o644))

	specs, err := PreRegisteredFromLayout(plugins, confs)
	require.NoError(t, err)
	assert.Equal(t, []PluginSpec{
		{Binary: filepath.Join(plugins, "10-a"), Name: "a", Idx: "10", Config: []byte("k: v\n")},
		{Binary: filepath.Join(plugins, "90-b"), Name: "b", Idx: "90"},
	}, specs)

	require.NoError(t, os.WriteFile(filepath.Join(plugins, "helper"), []byte("#!/bin/sh\n"), 0o755))
	_, err = PreRegisteredFromLayout(plugins, confs)
	assert.ErrorContains(t, err, "helper: expected only executables named NN-name in "+plugins)
	_, err = PreRegisteredFromLayout(filepath.Join(dir, "missing"), confs)
	assert.ErrorContains(t, err, "reading pre-registered layout")
}
