package deployments

import (
	"bytes"
	"fmt"
	"regexp"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/containerd/nri/plugins/default-validator/builtin"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// missingSecurity is how NRI's default validator refuses a container while
// security is not connected.
const missingSecurity = `validator "00-default-validator" rejected container adjustment, reason: ` +
	`validation error: required plugin "security" not present`

// containerdValidator is the default_validator table of the shipped
// containerd drop-in, decoded strictly: containerd ignores a key it does not
// know, so a misspelt one would leave the node open without a word.
func containerdValidator(t *testing.T) *builtin.DefaultValidatorConfig {
	t.Helper()
	var dropIn struct {
		Plugins map[string]struct {
			DefaultValidator map[string]any `toml:"default_validator"`
		} `toml:"plugins"`
	}
	require.NoError(t, toml.Unmarshal([]byte(containerdDropIn), &dropIn))
	table := dropIn.Plugins["io.containerd.nri.v1.nri"].DefaultValidator
	require.NotEmpty(t, table, "the drop-in has [plugins.'io.containerd.nri.v1.nri'.default_validator]")
	data, err := toml.Marshal(table)
	require.NoError(t, err)
	var cfg builtin.DefaultValidatorConfig
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&cfg), "default_validator:\n%s", data)
	return &cfg
}

func TestContainerdDropInRequiresSecurity(t *testing.T) {
	cfg := containerdValidator(t)
	assert.Equal(t, builtin.DefaultValidatorConfig{
		Enable:                    true,
		RequiredPlugins:           []string{"security"},
		TolerateMissingAnnotation: TolerateMissingPlugins,
	}, *cfg, "validation of required plugins only: security validates the rest")
}

// tolerating is a one-container ("app") pod with annotations.
func tolerating(name string, annotations map[string]string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n  uid: uid-%s\n  annotations:\n", name, name)
	for k, v := range annotations {
		s += fmt.Sprintf("    %s: %q\n", k, v)
	}
	return s + "spec:\n  containers:\n  - name: app\n    image: busybox\n"
}

// TestContainerdDropInFailsClosed runs NRI's adaptation with the default
// validator configured as the shipped drop-in says, the real security
// plugin and pods that do or do not tolerate its absence: containerd's
// code path for every container it creates.
func TestContainerdDropInFailsClosed(t *testing.T) {
	rt := harness.New(t, harness.WithBuiltin(builtin.GetDefaultValidator(containerdValidator(t))))
	create := func(t *testing.T, manifest string) error {
		t.Helper()
		p := rt.NewPod(t, harness.ParsePod(t, manifest))
		require.NoError(t, rt.RunPodSandbox(p))
		return rt.CreateContainer(p.Container("app"))
	}
	tolerated := map[string]map[string]string{
		"pod-wide":      {TolerateMissingPlugins: "true"},
		"pod-key":       {TolerateMissingPlugins + "/pod": "true"},
		"container-key": {TolerateMissingPlugins + "/container.app": "true"},
		"other-false":   {TolerateMissingPlugins: "true", TolerateMissingPlugins + "/container.other": "false"},
	}
	refused := map[string]map[string]string{
		"none":             nil,
		"false":            {TolerateMissingPlugins: "false"},
		"container-false":  {TolerateMissingPlugins: "true", TolerateMissingPlugins + "/container.app": "false"},
		"other-container":  {TolerateMissingPlugins + "/container.sidecar": "true"},
		"other-annotation": {"tolerate-missing-plugins.example.com": "true"},
	}

	t.Run("security absent", func(t *testing.T) {
		for name, annotations := range tolerated {
			assert.NoError(t, create(t, tolerating("absent-"+name, annotations)), name)
		}
		for name, annotations := range refused {
			assert.ErrorContains(t, create(t, tolerating("absent-"+name, annotations)), missingSecurity, name)
		}
		err := create(t, tolerating("absent-bad", map[string]string{TolerateMissingPlugins + "/pod": "yes"}))
		assert.ErrorContains(t, err, `invalid `+TolerateMissingPlugins+` annotation "yes"`, "a bad value is refused, naming the key")
	})

	security := rt.StartPlugin(t, harness.BuildPlugin(t, "./plugins/security"), "40", "security")
	t.Run("security connected", func(t *testing.T) {
		// Security lets through what it need not refuse, and refuses the
		// tolerate annotation outside static pods and the namespaces its
		// configuration allows: it is what would let a pod start without it.
		for name, annotations := range refused {
			err := create(t, tolerating("connected-"+name, annotations))
			if len(k8s.TolerateMissingPluginsKeys(annotations)) == 0 {
				assert.NoError(t, err, name)
			} else {
				assert.ErrorContains(t, err, "security rule tolerate-missing-plugins refused container", name)
			}
		}
	})

	// NRI drops a plugin whose connection closed only after the next
	// request; the first container after the crash may still count it as
	// present, and is then refused on the closed connection: by security's
	// CreateContainer (its failure policy, fail_request) or, where NRI saw
	// the close in between, by its validator.
	security.Kill(t)
	t.Run("security crashed", func(t *testing.T) {
		err := create(t, tolerating("crashed", nil))
		require.Error(t, err)
		assert.Regexp(t, regexp.QuoteMeta(missingSecurity)+
			`|validator plugin 40-security failed: ttrpc: closed|plugin 40-security failed to handle CreateContainer request: ttrpc: closed`, err.Error())
		assert.ErrorContains(t, create(t, tolerating("crashed-again", nil)), missingSecurity)
		assert.NoError(t, create(t, tolerating("crashed-tolerated", tolerated["pod-wide"])))
	})

	// A plugin that stops answering is disconnected when its request times
	// out; the container in flight is refused there, as security's failure
	// policy asks (fail_request, NRI v0.12.5; before, security's own
	// validator refused it, asked after the timeout on the closed connection).
	security.Restart(t)
	require.NoError(t, syscall.Kill(security.PID(), syscall.SIGSTOP))
	t.Run("security hangs", func(t *testing.T) {
		assert.ErrorContains(t, create(t, tolerating("hung", nil)), `plugin 40-security failed to handle CreateContainer request`)
		assert.ErrorContains(t, create(t, tolerating("after-hung", nil)), missingSecurity)
	})
	security.Kill(t)
}
