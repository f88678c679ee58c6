package nriplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/security/internal/seccomp"
)

const denyMkdir = `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}`

type fixture struct {
	p    *Plugin
	reg  *prometheus.Registry
	logs *logtest.Hook
	dir  string
}

func newFixture(t testing.TB, config string) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "deny-mkdir.json"), []byte(denyMkdir), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "broken.json"), []byte("{"), 0o644))
	logger, hook := logtest.NewNullLogger()
	f.logs = hook
	p, err := New(plugin.Deps{Name: "security", Log: logrus.NewEntry(logger), Registry: f.reg,
		MetricsNamespace: "nri_suite_security"}, Options{Proc: "/proc"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	f.p = p
	require.NoError(t, p.Configure([]byte(strings.ReplaceAll(config, "{{profiles}}", f.dir)), "cfg.yaml"))
	return f
}

// metric is the value of the series name{labels} in the plugin's registry,
// as it would be scraped.
func (f *fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func (f *fixture) decisions(t *testing.T, rule, outcome string) float64 {
	return f.metric(t, "nri_suite_security_decisions_total", map[string]string{"rule": rule, "outcome": outcome})
}

func pod(namespace, name string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: "pod-" + name, Name: name, Namespace: namespace, Annotations: annotations}
}

var unconfined = &api.Container{Id: "c1", Name: "app",
	Linux: &api.LinuxContainer{SeccompProfile: &api.SecurityProfile{ProfileType: api.SecurityProfile_UNCONFINED}}}

func TestCreateContainerCountsDecisions(t *testing.T) {
	f := newFixture(t, "seccomp: {profile-dir: \"{{profiles}}\"}\nuser-namespaces: {namespaces: [tenants]}\n")
	ctx := context.Background()

	adjust, _, err := f.p.CreateContainer(ctx, pod("default", "web", nil), unconfined)
	require.NoError(t, err)
	assert.Equal(t, "SCMP_ACT_ERRNO", adjust.GetLinux().GetSeccompPolicy().GetDefaultAction())

	adjust, _, err = f.p.CreateContainer(ctx, pod("default", "named",
		map[string]string{"seccomp.nri-suite.io/pod": "deny-mkdir.json"}), unconfined)
	require.NoError(t, err)
	assert.Equal(t, "SCMP_ACT_ALLOW", adjust.GetLinux().GetSeccompPolicy().GetDefaultAction())

	_, _, err = f.p.CreateContainer(ctx, pod("tenants", "t", nil), unconfined)
	require.ErrorContains(t, err, "security rule user-namespace refused container tenants/t/app")

	assert.Equal(t, 2.0, f.decisions(t, "seccomp", outcomeApplied))
	assert.Equal(t, 2.0, f.decisions(t, "user-namespace", outcomePass))
	assert.Equal(t, 1.0, f.decisions(t, "user-namespace", outcomeRefused))

	assert.Equal(t, 1.0, f.metric(t, "nri_suite_security_profiles_loaded", nil))
	assert.Equal(t, 1.0, f.metric(t, "nri_suite_security_profiles_invalid", nil), "broken.json")
}

func TestUnsupportedRuntimeFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		runtime, version string
		config           string
		wantErr          string
	}{
		{"cri-o", "1.34.0", "rules: {seccomp: enforce}\n", "runtime cri-o 1.34.0 drops NRI seccomp policies"},
		{"cri-o", "1.34.0", "rules: {seccomp: {namespaces: {default: enforce}}}\n", "runtime cri-o 1.34.0 drops NRI seccomp policies"},
		{"cri-o", "1.34.0", "rules: {seccomp: {mode: audit}}\n", ""},
		{"containerd", "v2.1.4", "rules: {seccomp: enforce}\n", "runtime containerd v2.1.4 drops NRI seccomp policies"},
		{"containerd", "v2.4.2", "", ""},
		{"cri-o", "1.35.1", "", ""},
	} {
		t.Run(tc.runtime+" "+tc.version+" "+tc.config, func(t *testing.T) {
			f := newFixture(t, tc.config)
			f.p.SetRuntime(tc.runtime, tc.version)
			adjust, _, err := f.p.CreateContainer(context.Background(), pod("default", "web", nil), unconfined)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "would run unconfined: cannot apply seccomp profile runtime/default: "+tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.config == "" {
				assert.NotNil(t, adjust.GetLinux().GetSeccompPolicy())
			} else {
				assert.Nil(t, adjust, "audit leaves the container as it is")
			}
		})
	}
}

// TestUnsupportedRuntimeDefaultAudits: where the configuration does not
// say enforce, a runtime that drops seccomp policies gets the rule in
// audit mode rather than every unconfined container refused, so that
// installing the suite with its defaults on CRI-O 1.34 breaks no pod.
func TestUnsupportedRuntimeDefaultAudits(t *testing.T) {
	f := newFixture(t, "rules: {seccomp: {namespaces: {strict: enforce}}}\n")
	f.p.SetRuntime("cri-o", "1.34.0")
	before := f.decisions(t, "seccomp", outcomeAudited)
	adjust, _, err := f.p.CreateContainer(context.Background(), pod("default", "web", nil), unconfined)
	require.NoError(t, err)
	assert.Nil(t, adjust)
	assert.Equal(t, before+1, f.decisions(t, "seccomp", outcomeAudited), "counted as audited")
	_, _, err = f.p.CreateContainer(context.Background(), pod("strict", "web", nil), unconfined)
	assert.ErrorContains(t, err, "drops NRI seccomp policies", "fails closed where the configuration enforces")
}

func TestConfigureErrorKeepsConfiguration(t *testing.T) {
	f := newFixture(t, "seccomp: {profile-dir: \"{{profiles}}\"}\n")
	for _, bad := range []string{
		"rules: {seccomp: {mode: loud}}\n",
		"seccomp: {extra-rules: [{names: [no_such_call], action: SCMP_ACT_ERRNO}]}\n",
		"seccomp: {profile-dir: " + filepath.Join(f.dir, "missing") + "}\n",
	} {
		err := f.p.Configure([]byte(bad), "bad.yaml")
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "bad.yaml")
	}
	adjust, _, err := f.p.CreateContainer(context.Background(), pod("default", "named",
		map[string]string{"seccomp.nri-suite.io/pod": "deny-mkdir.json"}), unconfined)
	require.NoError(t, err, "the named profile of the last good configuration is still there")
	assert.Equal(t, "SCMP_ACT_ALLOW", adjust.GetLinux().GetSeccompPolicy().GetDefaultAction())
}

// A profile directory that is a file is refused at configure time, with an
// error naming the key, and the last good configuration stays.
func TestConfigureRefusesAProfileDirThatIsAFile(t *testing.T) {
	f := newFixture(t, "seccomp: {profile-dir: \"{{profiles}}\"}\n")
	file := filepath.Join(f.dir, "deny-mkdir.json")
	err := f.p.Configure([]byte("seccomp: {profile-dir: "+file+"}\n"), "bad.yaml")
	require.ErrorIs(t, err, seccomp.ErrNotDirectory)
	assert.EqualError(t, err, "config bad.yaml: seccomp.profile-dir: seccomp profile directory "+file+
		": not a directory: expected a directory of <name>.json profiles")
	_, _, err = f.p.CreateContainer(context.Background(), pod("default", "named",
		map[string]string{"seccomp.nri-suite.io/pod": "deny-mkdir.json"}), unconfined)
	assert.NoError(t, err, "the last good configuration is still there")
}

func TestValidateAuditLine(t *testing.T) {
	f := newFixture(t, "rules: {oci-hooks: {mode: audit}}\n")
	req := &api.ValidateContainerAdjustmentRequest{
		Pod:       pod("default", "web", nil),
		Container: &api.Container{Id: "c1", Name: "app"},
		Adjust:    &api.ContainerAdjustment{},
		Owners:    api.NewOwningPlugins(),
	}
	req.Adjust.AddHooks(&api.Hooks{Prestart: []*api.Hook{{Path: "/a"}, {Path: "/b"}}})
	require.NoError(t, req.Owners.ClaimHooks("c1", "50-other"))
	require.NoError(t, f.p.ValidateContainerAdjustment(context.Background(), req))

	var audits []*logrus.Entry
	for _, e := range f.logs.AllEntries() {
		if strings.HasPrefix(e.Message, "audit:") {
			audits = append(audits, e)
		}
	}
	require.Len(t, audits, 1)
	assert.Equal(t, logrus.Fields{"pod": "web", "namespace": "default", "container": "app", "rule": "oci-hooks",
		"plugin": "50-other", "count": 2, "items": "/a, /b"}, normalize(audits[0].Data))
	assert.Equal(t, 1.0, f.decisions(t, "oci-hooks", outcomeAudited))
	assert.Equal(t, 1.0, f.decisions(t, "sysctls", outcomePass))
}

// A pod asking device-injector for a device while it is not connected is
// refused with the reason where the rule enforces, logged where it audits,
// and let through where it is off.
func TestValidateAnnotatedPlugins(t *testing.T) {
	f := newFixture(t, `validator: {annotation-plugins: {cdi-devices.nri-suite.io: 10-device-injector}}
rules: {annotated-plugins: {namespaces: {staging: audit, kube-system: "off"}}}
`)
	annotated := map[string]string{"cdi-devices.nri-suite.io/container.app": "vendor.com/gpu=0"}
	for _, tc := range []struct {
		namespace   string
		annotations map[string]string
		plugins     []string
		wantErr     string
		wantAudit   bool
	}{
		{namespace: "default", annotations: annotated, wantErr: "security validator refused container default/web/app: " +
			"rule annotated-plugins: plugin 10-device-injector is not connected, and the pod's annotations ask it to act on this container " +
			"(validator.annotation-plugins): refused rather than created without it: cdi-devices.nri-suite.io/container.app"},
		{namespace: "default", annotations: annotated, plugins: []string{"10-device-injector"}},
		{namespace: "default"},
		{namespace: "staging", annotations: annotated, wantAudit: true},
		{namespace: "kube-system", annotations: annotated},
	} {
		t.Run(fmt.Sprintf("%s/%v/%v", tc.namespace, len(tc.annotations), tc.plugins), func(t *testing.T) {
			f.logs.Reset()
			req := &api.ValidateContainerAdjustmentRequest{Pod: pod(tc.namespace, "web", tc.annotations),
				Container: &api.Container{Id: "c1", Name: "app"}, Adjust: &api.ContainerAdjustment{}, Owners: api.NewOwningPlugins()}
			for _, id := range tc.plugins {
				idx, name, _ := strings.Cut(id, "-")
				req.AddPlugin(name, idx)
			}
			err := f.p.ValidateContainerAdjustment(context.Background(), req)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			var audits []string
			for _, e := range f.logs.AllEntries() {
				if strings.HasPrefix(e.Message, "audit:") {
					audits = append(audits, fmt.Sprint(e.Data["rule"], " ", e.Data["plugin"], " ", e.Data["items"]))
				}
			}
			if tc.wantAudit {
				assert.Equal(t, []string{"annotated-plugins 10-device-injector cdi-devices.nri-suite.io/container.app"}, audits)
			} else {
				assert.Empty(t, audits)
			}
		})
	}
	assert.Equal(t, 1.0, f.decisions(t, "annotated-plugins", outcomeRefused))
	assert.Equal(t, 1.0, f.decisions(t, "annotated-plugins", outcomeAudited))
}

// normalize renders string-typed field values (config.Rule) as strings.
func normalize(fields logrus.Fields) logrus.Fields {
	out := logrus.Fields{}
	for k, v := range fields {
		if _, isInt := v.(int); !isInt {
			v = fmt.Sprint(v)
		}
		out[k] = v
	}
	return out
}

// The table's boundaries; how a version is compared is
// plugin.RuntimeAtLeast's test.
func TestRecentNRI(t *testing.T) {
	assert.True(t, recentNRI("containerd", "v2.2.0"))
	assert.False(t, recentNRI("containerd", "v2.1.9"))
	assert.False(t, recentNRI("cri-o", "1.34.0"), "CRI-O v1.34.0 drops seccomp and calls no validators")
	assert.True(t, recentNRI("cri-o", "1.35.0"))
}

// A runtime whose NRI predates validation refuses a plugin that subscribes
// to it: the plugin leaves validation out there, and where told to.
func TestEventsLeaveValidationOutWhereUnsupported(t *testing.T) {
	implemented := api.MustParseEventMask("CreateContainer,ValidateContainerAdjustment")
	for _, tc := range []struct {
		runtime, version string
		noValidator      bool
		want             bool // subscribes to validation
	}{
		{runtime: "containerd", version: "v2.4.2", want: true},
		{runtime: "cri-o", version: "1.34.0", want: false},
		{runtime: "cri-o", version: "1.35.0", want: true},
		{runtime: "containerd", version: "v2.4.2", noValidator: true, want: false},
	} {
		t.Run(fmt.Sprintf("%s %s no-validator=%v", tc.runtime, tc.version, tc.noValidator), func(t *testing.T) {
			p, err := New(plugin.Deps{Name: "security", Log: logrus.NewEntry(logrus.New()), Registry: prometheus.NewRegistry(),
				MetricsNamespace: "nri_suite_security"}, Options{Proc: "/proc", NoValidator: tc.noValidator})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, p.Close()) })
			p.SetRuntime(tc.runtime, tc.version)
			events := p.Events(implemented)
			assert.Equal(t, tc.want, events.IsSet(api.Event_VALIDATE_CONTAINER_ADJUSTMENT))
			assert.True(t, events.IsSet(api.Event_CREATE_CONTAINER), "creation is always handled")
		})
	}
}

// FuzzSeccompAnnotation feeds annotation values through the whole path, the
// choice and the store's lookup: a bad one is refused naming the
// annotation, a good one gets a policy, nothing panics.
func FuzzSeccompAnnotation(f *testing.F) {
	for _, seed := range []string{"deny-mkdir.json", "broken.json", "../deny-mkdir.json", "/etc/passwd", "", " ",
		"a/../../b.json", "deny-mkdir.json\n", ".hidden.json", "nope.json"} {
		f.Add(seed)
	}
	fx := newFixture(f, "seccomp: {profile-dir: \"{{profiles}}\"}\n")
	f.Fuzz(func(t *testing.T, value string) {
		annotations := map[string]string{"seccomp.nri-suite.io/container.app": value}
		adjust, _, err := fx.p.CreateContainer(context.Background(), pod("default", "fuzz", annotations), unconfined)
		if err != nil {
			assert.Contains(t, err.Error(), "annotation seccomp.nri-suite.io/container.app=")
			return
		}
		assert.NotNil(t, adjust.GetLinux().GetSeccompPolicy(), "an accepted name gives a policy")
	})
}
