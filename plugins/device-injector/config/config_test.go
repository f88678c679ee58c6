package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

func TestParse(t *testing.T) {
	defaultRule := Rule{CDI: []string{"*/*"}}
	for _, tc := range []struct {
		name    string
		data    string
		want    Config
		wantErr []string
	}{
		{
			name: "empty means defaults",
			want: Config{SpecDirs: []string{"/etc/cdi", "/var/run/cdi"}, Mode: ModeAuto, UnhealthyAction: UnhealthyFail, HealthInterval: DefaultHealthInterval, CheckConcurrency: DefaultCheckConcurrency,
				Policy: Policy{Default: defaultRule, Namespaces: map[string]Rule{}}},
		},
		{
			name: "every key",
			data: `spec-dirs: [/etc/cdi, /run/cdi]
mode: plugin
runtime: cri-o
unhealthy-action: warn
health-interval: 500ms
policy:
  default:
    cdi: [nvidia.com/gpu]
  namespaces:
    ml:
      cdi: ["vendor.com/*", "*/*"]
      device-paths: [/dev/fuse, "/dev/dri/*"]
    build:
      mount-sources: [/opt/cache]
`,
			want: Config{SpecDirs: []string{"/etc/cdi", "/run/cdi"}, Mode: ModePlugin, Runtime: "cri-o", UnhealthyAction: UnhealthyWarn, HealthInterval: 500 * time.Millisecond, CheckConcurrency: DefaultCheckConcurrency,
				Policy: Policy{
					Default: Rule{CDI: []string{"nvidia.com/gpu"}},
					Namespaces: map[string]Rule{
						"ml":    {CDI: []string{"vendor.com/*", "*/*"}, DevicePaths: []string{"/dev/fuse", "/dev/dri/*"}},
						"build": {CDI: []string{"nvidia.com/gpu"}, MountSources: []string{"/opt/cache"}},
					},
				}},
		},
		{
			name: "an empty list allows nothing",
			data: "policy:\n  default:\n    cdi: []\n",
			want: Config{SpecDirs: []string{"/etc/cdi", "/var/run/cdi"}, Mode: ModeAuto, UnhealthyAction: UnhealthyFail, HealthInterval: DefaultHealthInterval, CheckConcurrency: DefaultCheckConcurrency,
				Policy: Policy{Default: Rule{CDI: []string{}}, Namespaces: map[string]Rule{}}},
		},
		{name: "unknown key", data: "modes: plugin\n", wantErr: []string{"test.yaml", `unknown key "modes"`}},
		{name: "unknown policy key", data: "policy:\n  default:\n    devices: []\n", wantErr: []string{`unknown key "policy.default.devices"`}},
		{name: "bad mode", data: "mode: cdi\n", wantErr: []string{"mode", `"cdi"`, "expected one of runtime, plugin, auto"}},
		{name: "bad unhealthy action", data: "unhealthy-action: ignore\n", wantErr: []string{"unhealthy-action", `"ignore"`, "fail, warn"}},
		{name: "bad health interval", data: "health-interval: often\n", wantErr: []string{"health-interval", `"often"`, "duration such as 2s"}},
		{name: "health interval too short", data: "health-interval: 2ms\n", wantErr: []string{"health-interval", `"2ms"`, "at least 100ms"}},
		{name: "no spec dirs", data: "spec-dirs: []\n", wantErr: []string{"spec-dirs", "at least one directory"}},
		{name: "relative spec dir", data: "spec-dirs: [cdi]\n", wantErr: []string{`spec-dirs: "cdi": expected an absolute path`}},
		{name: "unclean spec dir", data: "spec-dirs: [/etc/cdi/]\n", wantErr: []string{`spec-dirs: "/etc/cdi/": expected a clean absolute path, such as /etc/cdi`}},
		{name: "system spec dir", data: "spec-dirs: [/etc/cdi, /etc]\n", wantErr: []string{`spec-dirs: "/etc" is a system directory`}},
		{name: "spec dir twice", data: "spec-dirs: [/etc/cdi, /etc/cdi]\n", wantErr: []string{"spec-dirs", "listed twice"}},
		{name: "bad glob", data: "policy:\n  default:\n    cdi: [\"vendor.com/[\"]\n", wantErr: []string{"policy.default.cdi", `"vendor.com/["`, "syntax error in pattern"}},
		{name: "cdi pattern without class", data: "policy:\n  default:\n    cdi: [\"*\"]\n", wantErr: []string{"policy.default.cdi", `"*"`, "vendor/class"}},
		{name: "cdi pattern with device name", data: "policy:\n  default:\n    cdi: [\"a.com/b=c\"]\n", wantErr: []string{"vendor/class"}},
		{name: "relative device path", data: "policy:\n  namespaces:\n    ml:\n      device-paths: [dev/fuse]\n", wantErr: []string{"policy.namespaces.ml.device-paths", `"dev/fuse"`, "absolute"}},
		{name: "empty namespace", data: "policy:\n  namespaces:\n    \"\": {}\n", wantErr: []string{"policy.namespaces", `""`, "expected a Kubernetes namespace name"}},
		// A name no namespace can have would leave its pods on policy.default.
		{name: "namespace with capitals", data: "policy:\n  namespaces:\n    ML-Team: {}\n", wantErr: []string{"policy.namespaces", `"ML-Team"`, "expected a Kubernetes namespace name"}},
		{name: "namespace with a slash", data: "policy:\n  namespaces:\n    default/web: {}\n", wantErr: []string{"policy.namespaces", `"default/web"`}},
		{name: "namespace with a space", data: "policy:\n  namespaces:\n    \" ml\": {}\n", wantErr: []string{"policy.namespaces", `" ml"`}},
		{name: "namespace too long", data: "policy:\n  namespaces:\n    " + strings.Repeat("a", 64) + ": {}\n", wantErr: []string{"policy.namespaces", "at most 63"}},
		{name: "pattern of a megabyte", data: "policy:\n  default:\n    cdi: [\"" + strings.Repeat("[", 1<<20) + "\"]\n", wantErr: []string{"policy.default.cdi", `"[[[[`, "…(1048576 bytes)"}},
		{name: "regular expression of a megabyte", data: "health-checks:\n- devices: [\"/dev/*\"]\n  file: /f\n  expect: \"" + strings.Repeat("(", 1<<20) + "\"\n",
			wantErr: []string{"health-checks[0].expect", `"((((`, "expected a Go regular expression"}},
		{name: "timeout of a megabyte", data: "health-checks:\n- devices: [\"/dev/*\"]\n  command: [/bin/true]\n  timeout: " + strings.Repeat("9", 1<<20) + "\n",
			wantErr: []string{"health-checks[0].timeout", `"9999`, "expected a duration"}},
		{name: "wrong type", data: "spec-dirs: /etc/cdi\n", wantErr: []string{"test.yaml", "line 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data), "test.yaml")
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes bounded prefixes")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEffectiveMode(t *testing.T) {
	for _, tc := range []struct {
		mode     Mode
		runtime  string // the config's override
		reported string // what NRI reported
		want     Mode
	}{
		{ModeAuto, "", "containerd", ModeRuntime},
		{ModeAuto, "", "cri-o", ModePlugin},
		{ModeAuto, "", "", ModePlugin},
		{ModeAuto, "", "nri-suite-harness", ModePlugin},
		{ModeAuto, "containerd", "", ModeRuntime},
		{ModeAuto, "cri-o", "containerd", ModePlugin},
		{ModeRuntime, "", "cri-o", ModeRuntime},
		{ModePlugin, "", "containerd", ModePlugin},
	} {
		t.Run(string(tc.mode)+"/"+tc.runtime+"/"+tc.reported, func(t *testing.T) {
			assert.Equal(t, tc.want, Config{Mode: tc.mode, Runtime: tc.runtime}.EffectiveMode(tc.reported))
		})
	}
}

func TestPolicy(t *testing.T) {
	cfg, err := Parse([]byte(`policy:
  default:
    cdi: [nvidia.com/gpu]
  namespaces:
    ml:
      cdi: ["vendor.com/*"]
      device-paths: ["/dev/dri/*"]
      mount-sources: [/opt/models]
`), "test.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		namespace string
		check     func(Rule, string) error
		wantErr   []string
	}{
		{"default allows its class", "web", func(r Rule, ns string) error { return r.AllowCDI(ns, "nvidia.com/gpu=0") }, nil},
		{"default denies another class", "web", func(r Rule, ns string) error { return r.AllowCDI(ns, "nvidia.com/nic=0") },
			[]string{"CDI device nvidia.com/nic=0", "namespace web", "policy.cdi allows nvidia.com/gpu"}},
		{"default denies device paths", "web", func(r Rule, ns string) error { return r.AllowDevicePath(ns, "/dev/fuse") },
			[]string{"device /dev/fuse", "policy.device-paths allows nothing"}},
		{"default denies mounts", "web", func(r Rule, ns string) error { return r.AllowMountSource(ns, "/") },
			[]string{"mount source /", "policy.mount-sources allows nothing"}},
		{"namespace glob", "ml", func(r Rule, ns string) error { return r.AllowCDI(ns, "vendor.com/fpga=3") }, nil},
		{"namespace replaces default", "ml", func(r Rule, ns string) error { return r.AllowCDI(ns, "nvidia.com/gpu=0") },
			[]string{"namespace ml", "vendor.com/*"}},
		{"path glob", "ml", func(r Rule, ns string) error { return r.AllowDevicePath(ns, "/dev/dri/card0") }, nil},
		{"path glob does not cross directories", "ml", func(r Rule, ns string) error { return r.AllowDevicePath(ns, "/dev/dri/by-path/x") },
			[]string{"device /dev/dri/by-path/x"}},
		{"mount allowed", "ml", func(r Rule, ns string) error { return r.AllowMountSource(ns, "/opt/models") }, nil},
		{"malformed CDI name", "ml", func(r Rule, ns string) error { return r.AllowCDI(ns, "gpu0") }, []string{`"gpu0"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(cfg.Policy.For(tc.namespace), tc.namespace)
			if tc.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			if len(tc.wantErr) > 1 {
				assert.ErrorIs(t, err, ErrDenied)
			}
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"mode: plugin\nspec-dirs: [/etc/cdi]\n",
		"policy:\n  default:\n    cdi: [\"*/*\"]\n  namespaces:\n    a:\n      device-paths: [\"/dev/*\"]\n",
		"policy:\n  default:\n    cdi: [\"[\"]\n",
		"spec-dirs: [relative]\n",
		"spec-dirs: [/]\n",
		"spec-dirs: [/etc/cdi/../cdi]\n",
		"mode: [x]\n",
		"health-checks:\n- devices: [\"vendor.com/gpu=*\"]\n  command: [/bin/check, \"{name}\"]\n  timeout: 1s\n",
		"health-checks:\n- devices: [\"/dev/dri/*\"]\n  file: /sys/class/drm/{name}/health\n  expect: \"ok|good\"\nhealth-check-concurrency: 2\n",
		"health-checks:\n- devices: [\"*\"]\n  file: rel\n  expect: \"(\"\n",
		"policy:\n  namespaces:\n    " + strings.Repeat("N", 1<<13) + ": {}\n",
		"health-checks:\n- devices: [\"/dev/*\"]\n  file: /f\n  expect: \"" + strings.Repeat("(", 1<<13) + "\"\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.yaml", "errors name the source")
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "errors quote bounded prefixes")
			return
		}
		for ns := range cfg.Policy.Namespaces {
			assert.True(t, k8s.IsDNSLabel(ns), "accepted namespace %q", ns)
		}
		// Whatever loads is usable: every pattern is valid, so a check
		// either allows or is a policy refusal.
		require.NotEmpty(t, cfg.SpecDirs)
		for _, r := range append([]Rule{cfg.Policy.Default}, slices.Collect(maps.Values(cfg.Policy.Namespaces))...) {
			for _, err := range []error{r.AllowCDI("ns", "a.com/b=c"), r.AllowDevicePath("ns", "/dev/x"), r.AllowMountSource("ns", "/x")} {
				if err != nil {
					assert.ErrorIs(t, err, ErrDenied)
				}
			}
		}
		assert.Contains(t, []Mode{ModeRuntime, ModePlugin}, cfg.EffectiveMode(""))
		// Every loaded check can be applied: it has something to run or
		// read, a bounded timeout, and its patterns match without error.
		assert.True(t, cfg.CheckConcurrency >= 1 && cfg.CheckConcurrency <= MaxCheckConcurrency)
		for _, c := range cfg.HealthChecks {
			argv, file := c.For("a.com/b=c")
			assert.True(t, len(argv) > 0 || file != "", "check %s does nothing", c.Key)
			assert.True(t, file == "" || c.Expect != nil, "check %s has a file but no expect", c.Key)
			assert.True(t, c.Timeout >= MinCheckTimeout && c.Timeout <= MaxCheckTimeout)
			c.Matches("a.com/b=c")
		}
	})
}
