package plugin

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/version"
)

func TestRunMain(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	socket := "--socket=" + filepath.Join(t.TempDir(), "absent.sock")

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "clean stop", args: []string{socket}, wantCode: 0},
		{name: "help", args: []string{"-h"}, wantCode: 0, wantErr: "-http-addr"},
		{name: "unknown flag", args: []string{"--bogus"}, wantCode: 2, wantErr: "flag provided but not defined: -bogus"},
		{name: "stray argument", args: []string{socket, "extra"}, wantCode: 2, wantErr: `unexpected arguments ["extra"]`},
		{name: "bad log format", args: []string{"--log-format=xml"}, wantCode: 1, wantErr: `invalid --log-format "xml": expected text or json`},
		{name: "bad log level", args: []string{"--log-level=loud"}, wantCode: 1, wantErr: `invalid --log-level "loud"`},
		{name: "bad index", args: []string{"--idx=7"}, wantCode: 1, wantErr: `--idx: invalid plugin index "7"`},
		{name: "bad name", args: []string{"--name=a b"}, wantCode: 1, wantErr: `--name: invalid plugin name "a b"`},
		{name: "empty socket", args: []string{"--socket="}, wantCode: 1, wantErr: "empty --socket"},
		{name: "missing config file", args: []string{"--config=" + missing}, wantCode: 1, wantErr: "config file: reading " + missing},
		{name: "config file is a FIFO", args: []string{"--config=" + fifo}, wantCode: 1,
			wantErr: "config file: reading " + fifo + ": it is a named pipe (FIFO): not a regular file"},
		{name: "relative config file", args: []string{"--config=plugin.yaml"}, wantCode: 1, wantErr: `--config: "plugin.yaml": expected an absolute path`},
		{name: "relative socket", args: []string{"--socket=nri.sock"}, wantCode: 1, wantErr: `--socket: "nri.sock": expected an absolute path`},
		{name: "shared dir /", args: []string{"--shared-dir=/"}, wantCode: 1, wantErr: `--shared-dir: "/" is a system directory`},
		{name: "shared dir /run", args: []string{"--shared-dir=/run"}, wantCode: 1, wantErr: `--shared-dir: "/run" is a system directory: expected a file or directory of the plugin's own, such as /run/nri-suite`},
		{name: "unclean shared dir", args: []string{"--shared-dir=/run/nri-suite/"}, wantCode: 1, wantErr: `--shared-dir: "/run/nri-suite/": expected a clean absolute path, such as /run/nri-suite`},
		{name: "bad DaemonSet", args: []string{"--daemonset=nri-suite-stats"}, wantCode: 1,
			wantErr: `--daemonset: DaemonSet "nri-suite-stats": want namespace/name`},
		{name: "busy HTTP address", args: []string{socket, "--http-addr=" + busy.Addr().String()}, wantCode: 1, wantErr: "listen on --http-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, factory := newRecorder()
			var stderr syncBuffer
			// A cancelled context: the run stops as soon as it would start serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			args := append([]string{"--shared-dir=" + t.TempDir()}, tc.args...)
			code := runMain(ctx, "test-plugin", factory, args, io.Discard, &stderr, WithIdx("50"))
			assert.Equal(t, tc.wantCode, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tc.wantErr)
		})
	}
}

// A --config file that does not apply is one error line: not a handler's
// warning first, nor again when the plugin stops.
func TestRunMainConfigErrorPrintedOnce(t *testing.T) {
	_, factory := newRecorder()
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte("env:\n  A: b\nnested:\n  bogus: 1\n"), 0o600))
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code := runMain(ctx, "test-plugin", factory, []string{"--shared-dir=" + t.TempDir(), "--config=" + config,
		"--socket=" + filepath.Join(t.TempDir(), "absent.sock")}, io.Discard, &stderr, WithIdx("50"))
	assert.Equal(t, 1, code)
	out := stderr.String()
	assert.Equal(t, 1, strings.Count(out, "unknown key"), "the error is printed once: %s", out)
	assert.Contains(t, out, `level=error msg="cannot apply the configuration`)
	assert.NotContains(t, out, "level=warning")
}

// --version prints the binary's name and build, and starts nothing (the
// factory is never called).
func TestRunMainVersion(t *testing.T) {
	factory := func(Deps) (any, error) { return nil, errors.New("the factory ran") }
	var stdout, stderr strings.Builder
	code := runMain(context.Background(), "my-plugin", factory, []string{"--version"}, &stdout, &stderr)
	assert.Equal(t, 0, code, stderr.String())
	assert.Equal(t, version.Line("nri-my-plugin")+"\n", stdout.String())
}

func TestRunMainPluginFlagsAndDefaults(t *testing.T) {
	var greeting string
	var got Deps
	factory := func(d Deps) (any, error) {
		got = d
		if greeting == "" {
			return nil, errEmptyGreeting
		}
		return onlyCreate{}, nil
	}
	opts := []Option{
		WithIdx("42"),
		WithHTTPAddr(""),
		WithFlags(func(fs *flag.FlagSet) { fs.StringVar(&greeting, "greeting", "", "what to say") }),
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	var stderr syncBuffer
	code := runMain(ctx, "my-plugin", factory, []string{"--socket=/nonexistent/nri.sock", "--greeting=hello", "--shared-dir=" + t.TempDir()}, io.Discard, &stderr, opts...)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, "hello", greeting, "plugin flags are parsed before the factory runs")
	assert.Equal(t, "my-plugin", got.Name, "--name defaults to the plugin kind")
	assert.Equal(t, "nri_suite_my_plugin", got.MetricsNamespace)
	assert.Equal(t, "my-plugin", got.Log.Data["plugin"])

	greeting = ""
	stderr = syncBuffer{}
	code = runMain(ctx, "my-plugin", factory, []string{"--name=renamed", "--shared-dir=" + t.TempDir()}, io.Discard, &stderr, opts...)
	assert.Equal(t, 1, code)
	assert.True(t, strings.HasPrefix(stderr.String(), "nri-my-plugin: create plugin renamed: "), stderr.String())
	assert.Contains(t, stderr.String(), errEmptyGreeting.Error())
	assert.Equal(t, "nri_suite_my_plugin", got.MetricsNamespace, "metric names follow the kind, not --name")
}

var errEmptyGreeting = errors.New("--greeting is required")
