package annotations_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/annotations"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/coord"
)

func TestParse(t *testing.T) {
	d := func(v time.Duration) coord.Duration { return coord.Duration(v) }
	process := coord.Readiness{Kind: coord.ReadyProcess}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want *coord.Pod
	}{
		{"no annotation", map[string]string{"other": "x"}, nil},
		{"defaults", map[string]string{annotations.Sidecars: "proxy"}, &coord.Pod{
			StopAfterMains: true, HoldTimeout: d(20 * time.Second), StopGrace: d(5 * time.Second),
			Sidecars: []coord.Sidecar{{Name: "proxy", Ready: process, Timeout: d(time.Minute), OnTimeout: coord.OnTimeoutStart}},
		}},
		{"everything, container keys beat pod keys", map[string]string{
			annotations.Sidecars:                           " proxy , log-agent ",
			annotations.Mains:                              "app",
			annotations.Ready + "/pod":                     "file:/run/ready",
			annotations.Ready + "/container.proxy":         "tcp:127.0.0.1:15000",
			annotations.ReadyTimeout:                       "3s",
			annotations.ReadyTimeout + "/container.proxy":  "30s",
			annotations.OnTimeout + "/container.log-agent": "fail",
			annotations.StopAfterMains:                     "false",
			annotations.HoldTimeout:                        "1m",
			annotations.StopGrace + "/pod":                 "2s",
		}, &coord.Pod{
			Mains: []string{"app"}, StopAfterMains: false, HoldTimeout: d(time.Minute), StopGrace: d(2 * time.Second),
			Sidecars: []coord.Sidecar{
				{Name: "proxy", Ready: coord.Readiness{Kind: coord.ReadyTCP, Target: "127.0.0.1:15000"}, Timeout: d(30 * time.Second), OnTimeout: coord.OnTimeoutStart},
				{Name: "log-agent", Ready: coord.Readiness{Kind: coord.ReadyFile, Target: "/run/ready"}, Timeout: d(3 * time.Second), OnTimeout: coord.OnTimeoutFail},
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := annotations.Parse(tc.ann)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"empty list", map[string]string{annotations.Sidecars: ""},
			`annotation sidecar-order.nri-suite.io/sidecars="": want a comma-separated list of one or more sidecar container names`},
		{"empty element", map[string]string{annotations.Sidecars: "a,,b"},
			`annotation sidecar-order.nri-suite.io/sidecars="a,,b": want a comma-separated list without empty elements`},
		{"duplicate", map[string]string{annotations.Sidecars: "proxy,logs,proxy"},
			`annotation sidecar-order.nri-suite.io/sidecars="proxy,logs,proxy": want distinct container names, but "proxy" appears twice`},
		{"duplicated main", map[string]string{annotations.Sidecars: "proxy", annotations.Mains: "app,app"},
			`annotation sidecar-order.nri-suite.io/mains="app,app": want distinct container names, but "app" appears twice`},
		{"not a container name", map[string]string{annotations.Sidecars: "Proxy"},
			`want container names (lowercase letters, digits and '-', at most 63), but "Proxy" is not one`},
		{"main is a sidecar", map[string]string{annotations.Sidecars: "proxy", annotations.Mains: "app,proxy"},
			`annotation sidecar-order.nri-suite.io/mains="app,proxy": want containers that are not sidecars, but "proxy" is also in sidecar-order.nri-suite.io/sidecars`},
		{"malformed readiness", map[string]string{annotations.Sidecars: "proxy", annotations.Ready + "/container.proxy": "http://x"},
			`annotation ready.sidecar-order.nri-suite.io/container.proxy="http://x": want one of "process", "file:<absolute path>", "tcp:<host>:<port>" or "exec:<absolute path> [args...]"`},
		{"readiness for an unknown sidecar", map[string]string{annotations.Sidecars: "proxy", annotations.Ready + "/container.prxy": "process"},
			`annotation ready.sidecar-order.nri-suite.io/container.prxy="process": want a key for a sidecar listed in sidecar-order.nri-suite.io/sidecars (proxy), but "prxy" is not listed`},
		{"bad timeout", map[string]string{annotations.Sidecars: "proxy", annotations.ReadyTimeout: "soon"},
			`annotation ready-timeout.sidecar-order.nri-suite.io="soon": want a non-negative duration`},
		{"bad on-timeout", map[string]string{annotations.Sidecars: "proxy", annotations.OnTimeout + "/container.proxy": "retry"},
			`annotation on-timeout.sidecar-order.nri-suite.io/container.proxy="retry": want one of "start", "fail"`},
		{"bad bool", map[string]string{annotations.Sidecars: "proxy", annotations.StopAfterMains: "yes"},
			`annotation stop-after-mains.sidecar-order.nri-suite.io="yes": want a boolean`},
		{"bad grace", map[string]string{annotations.Sidecars: "proxy", annotations.StopGrace: "-1s"},
			`annotation stop-grace.sidecar-order.nri-suite.io="-1s": want a non-negative duration`},
		// Keys that can never apply.
		{"unknown suffix", map[string]string{annotations.Sidecars: "proxy", annotations.Ready + "/containers.proxy": "process"},
			`annotation ready.sidecar-order.nri-suite.io/containers.proxy="process": want a key of the form ready.sidecar-order.nri-suite.io, ready.sidecar-order.nri-suite.io/pod or ready.sidecar-order.nri-suite.io/container.<name>`},
		{"unknown suffix of the list", map[string]string{annotations.Sidecars: "proxy", annotations.Sidecars + "/bogus": "x"},
			`annotation sidecar-order.nri-suite.io/sidecars/bogus="x": want a key of the form sidecar-order.nri-suite.io/sidecars,`},
		{"unknown key of the plugin", map[string]string{annotations.Sidecars: "proxy", "sidecar-order.nri-suite.io/main": "app"},
			`annotation sidecar-order.nri-suite.io/main="app": want one of the plugin's keys: sidecar-order.nri-suite.io/sidecars, sidecar-order.nri-suite.io/mains, stop-after-mains.sidecar-order.nri-suite.io, hold-timeout.sidecar-order.nri-suite.io, stop-grace.sidecar-order.nri-suite.io, or ready.sidecar-order.nri-suite.io, ready-timeout.sidecar-order.nri-suite.io, on-timeout.sidecar-order.nri-suite.io with /pod or /container.<sidecar>`},
		{"misspelt key of the plugin", map[string]string{annotations.Sidecars: "proxy", "readiness.sidecar-order.nri-suite.io/container.proxy": "tcp:127.0.0.1:1"},
			`annotation readiness.sidecar-order.nri-suite.io/container.proxy="tcp:127.0.0.1:1": want one of the plugin's keys`},
		{"container key of a pod-level key", map[string]string{annotations.Sidecars: "proxy", annotations.StopGrace + "/container.proxy": "1s"},
			`annotation stop-grace.sidecar-order.nri-suite.io/container.proxy="1s": want stop-grace.sidecar-order.nri-suite.io or stop-grace.sidecar-order.nri-suite.io/pod: the key is for the whole pod`},
		{"value above the limit", map[string]string{annotations.Sidecars: "proxy", annotations.Ready: "exec:/bin/check " + strings.Repeat("a ", 1<<19)},
			`annotation ready.sidecar-order.nri-suite.io="exec:/bin/check a a a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := annotations.Parse(tc.ann)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var annErr *k8s.AnnotationError
			assert.True(t, errors.As(err, &annErr), "an AnnotationError naming the key")
			assert.Less(t, len(err.Error()), 2048, "the error quotes a bounded prefix")
		})
	}
}

func TestParseReadiness(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want coord.Readiness
		err  string
	}{
		{in: "process", want: coord.Readiness{Kind: "process"}},
		{in: " file:/run/./ready ", want: coord.Readiness{Kind: "file", Target: "/run/ready"}},
		{in: "tcp:127.0.0.1:15000", want: coord.Readiness{Kind: "tcp", Target: "127.0.0.1:15000"}},
		{in: "tcp:[::1]:80", want: coord.Readiness{Kind: "tcp", Target: "[::1]:80"}},
		{in: "exec:/bin/check --ready  now", want: coord.Readiness{Kind: "exec", Target: "/bin/check", Args: []string{"--ready", "now"}}},
		{in: "process:x", err: `"process" takes no argument`},
		{in: "file:run/ready", err: "file needs an absolute path"},
		{in: "tcp:localhost", err: "tcp needs host:port"},
		{in: "tcp::80", err: "tcp needs host:port"},
		{in: "tcp:h:0", err: "port from 1 to 65535"},
		{in: "tcp:h:70000", err: "port from 1 to 65535"},
		{in: "exec:check", err: "exec needs the absolute path"},
		{in: "exec:", err: "exec needs the absolute path"},
		{in: "http:/x", err: `one of "process"`},
		{in: "", err: `one of "process"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := annotations.ParseReadiness(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseReadiness: no input panics, and an accepted spec renders to a
// string that parses back to itself.
func FuzzParseReadiness(f *testing.F) {
	for _, s := range []string{"process", "file:/run/ready", "tcp:127.0.0.1:15000", "tcp:[::1]:1", "exec:/bin/check a b", "exec:", "tcp::", "file:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := annotations.ParseReadiness(s)
		if err != nil {
			return
		}
		again, err := annotations.ParseReadiness(r.String())
		require.NoError(t, err, "rendering %q as %q", s, r.String())
		assert.Equal(t, r, again)
	})
}

// FuzzParse: no set of annotations panics; an accepted one has distinct,
// non-empty sidecars with known readiness kinds and on-timeout actions.
func FuzzParse(f *testing.F) {
	f.Add("proxy,log-agent", "app", "tcp:127.0.0.1:15000", "30s", "fail", "true")
	f.Add("a,a", "", "exec:/x", "-1s", "start", "no")
	f.Add("", "b", "file:/r", "1h", "x", "0")
	f.Add("proxy", "app", "exec:/x "+strings.Repeat("y", 1<<13), "1s", "start", "true")
	f.Add(strings.Repeat("P", 1<<13), "", "", "", "", "")
	f.Fuzz(func(t *testing.T, sidecars, mains, ready, timeout, onTimeout, stop string) {
		p, err := annotations.Parse(map[string]string{
			annotations.Sidecars: sidecars, annotations.Mains: mains,
			annotations.Ready: ready, annotations.ReadyTimeout: timeout,
			annotations.OnTimeout: onTimeout, annotations.StopAfterMains: stop,
		})
		if err != nil {
			var annErr *k8s.AnnotationError
			require.True(t, errors.As(err, &annErr), "error %v names an annotation", err)
			assert.Less(t, len(err.Error()), 2048, "the error quotes a bounded prefix")
			return
		}
		require.NotNil(t, p)
		require.NotEmpty(t, p.Sidecars)
		seen := map[string]bool{}
		for _, s := range p.Sidecars {
			assert.False(t, seen[s.Name], "duplicate %q", s.Name)
			seen[s.Name] = true
			assert.Contains(t, []string{coord.ReadyProcess, coord.ReadyFile, coord.ReadyTCP, coord.ReadyExec}, s.Ready.Kind)
			assert.Contains(t, []string{coord.OnTimeoutStart, coord.OnTimeoutFail}, s.OnTimeout)
			assert.GreaterOrEqual(t, s.Timeout, coord.Duration(0))
		}
		for _, m := range p.Mains {
			assert.False(t, seen[m], "main %q is also a sidecar", m)
		}
	})
}
