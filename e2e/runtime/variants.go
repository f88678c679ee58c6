package runtime

import (
	"slices"
	"testing"
)

// Variant is one way to run a plugin's real-node scenario: the runtime,
// and who launches the plugins the scenario starts.
type Variant struct {
	Runtime string
	Launch  Launch
}

// Name names the variant's subtest: the runtime, "-preregistered" added
// when the runtime launches the plugins.
func (v Variant) Name() string {
	if v.Launch == LaunchByRuntime {
		return v.Runtime + "-preregistered"
	}
	return v.Runtime
}

// Options are the sandbox options of the variant; a scenario adds its own.
func (v Variant) Options() Options { return Options{Runtime: v.Runtime, Launch: v.Launch} }

// Variants are the variants of a real-node scenario on runtimes (every
// runtime, RuntimeNames, when none is given): each runtime with external
// plugins, then containerd launching the plugins itself from the layout
// `make install` produces. CRI-O launching them is left out to keep within
// CI's time budget: every variant is one more full sandbox run per plugin.
func Variants(runtimes ...string) []Variant {
	if len(runtimes) == 0 {
		runtimes = RuntimeNames()
	}
	var out []Variant
	for _, rt := range runtimes {
		out = append(out, Variant{Runtime: rt, Launch: LaunchExternal})
	}
	if slices.Contains(runtimes, "containerd") {
		out = append(out, Variant{Runtime: "containerd", Launch: LaunchByRuntime})
	}
	return out
}

// RunVariants runs scenario once per variant, as a subtest named after it.
func RunVariants(t *testing.T, variants []Variant, scenario func(t *testing.T, v Variant)) {
	t.Helper()
	for _, v := range variants {
		t.Run(v.Name(), func(t *testing.T) { scenario(t, v) })
	}
}
