package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want Info
	}{
		{"release", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c804cd0"}, {Key: "vcs.modified", Value: "false"}}},
			Info{"v0.3.0", "c804cd0", "go1.26.0"}},
		{"dirty checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20251202081400-c804cd08f3ae+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c804cd08f3ae"}, {Key: "vcs.modified", Value: "true"}}},
			Info{"v0.0.0-20251202081400-c804cd08f3ae+dirty", "c804cd08f3ae-dirty", "go1.26.0"}},
		{"no VCS", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			Info{"(devel)", Unknown, "go1.26.0"}},
		{"nothing recorded", debug.BuildInfo{GoVersion: "go1.26.0"}, Info{Unknown, Unknown, "go1.26.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := tc.info
			assert.Equal(t, tc.want, fromBuildInfo(&info))
		})
	}
}

func TestGet(t *testing.T) {
	// A test binary records its toolchain, whatever else it lacks.
	assert.Equal(t, runtime.Version(), Get().GoVersion)
	assert.Regexp(t, `^nri-x \S+ \(revision \S+, go\S+\)$`, Line("nri-x"))
}
