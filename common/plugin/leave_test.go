package plugin

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leaver is a plugin with node state of its own: a file in the shared
// directory that RemoveNodeState removes.
type leaver struct {
	onlyCreate
	file    string
	removed int
}

func (l *leaver) RemoveNodeState() error {
	l.removed++
	return os.Remove(l.file)
}

// A plugin stopped by a signal asks whether its DaemonSet is being deleted:
// yes, its node state goes, and so do the status records' directory and the
// shared directory once empty; no, or no answer (the API server away), all
// of it stays, with a warning for the latter. A plugin whose run ends
// without a signal (it failed, or a pre-registered one's runtime went)
// never asks.
func TestRunnerLeavesTheNodeWhenItsDaemonSetIsDeleted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leaving bool
		err     error
		signal  bool
		gone    bool
		logged  string
	}{
		{name: "DaemonSet deleted", leaving: true, signal: true, gone: true, logged: "the plugin left the node"},
		{name: "DaemonSet there", signal: true},
		{name: "API server away", err: errors.New("connection refused"), signal: true, logged: "cannot tell an uninstall from a restart"},
		{name: "failed, no signal", leaving: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			settings := testSettings(filepath.Join(shortTempDir(t), "nri.sock"), &log)
			require.NoError(t, os.MkdirAll(settings.SharedDir, 0o755))
			plugin := &leaver{file: filepath.Join(settings.SharedDir, "mine")}
			require.NoError(t, os.WriteFile(plugin.file, nil, 0o644))
			r, err := New(settings, func(Deps) (any, error) { return plugin, nil })
			require.NoError(t, err)
			asked := 0
			r.leaving = func(context.Context) (bool, error) { asked++; return tc.leaving, tc.err }

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.signal {
				cancel()
				require.NoError(t, r.Run(ctx))
			} else {
				taken, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				defer taken.Close()
				r.settings.HTTPAddr = taken.Addr().String()
				require.Error(t, r.Run(ctx), "its HTTP address is taken")
			}

			assert.Equal(t, tc.signal, asked == 1, "asked the API server")
			if tc.gone {
				assert.Equal(t, 1, plugin.removed)
				assert.NoDirExists(t, settings.SharedDir, "the shared directory goes once empty")
			} else {
				assert.Zero(t, plugin.removed)
				assert.FileExists(t, plugin.file, "the node state stays")
			}
			assert.Contains(t, log.String(), tc.logged)
		})
	}
}

// uninstall's flags: the namespace, a selector that parses and is not
// empty (it would delete every DaemonSet of the namespace), a timeout.
func TestCheckUninstallFlags(t *testing.T) {
	assert.NoError(t, checkUninstallFlags("kube-system", "app.kubernetes.io/instance=nri-suite", time.Minute, nil))
	for _, tc := range []struct {
		namespace, selector string
		timeout             time.Duration
		rest                []string
		want                string
	}{
		{"kube-system", "", time.Minute, nil, "--selector is empty"},
		{"kube-system", "a in (", time.Minute, nil, `--selector "a in ("`},
		{"Kube_System", "a=b", time.Minute, nil, `--namespace "Kube_System"`},
		{"kube-system", "a=b", 0, nil, "--timeout 0s"},
		{"kube-system", "a=b", time.Minute, []string{"x"}, "unexpected arguments"},
	} {
		assert.ErrorContains(t, checkUninstallFlags(tc.namespace, tc.selector, tc.timeout, tc.rest), tc.want)
	}
	var out bytes.Buffer
	assert.Equal(t, 2, uninstall(context.Background(), []string{"--namespace", "kube-system"}, &out), "bad usage")
	assert.Contains(t, out.String(), "--selector is empty")
}
