package version

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want Info
	}{
		{"release", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c804cd0"}, {Key: "vcs.modified", Value: "false"},
				{Key: "vcs.time", Value: "2025-12-02T08:14:00Z"}}},
			Info{"v0.3.0", "c804cd0", "go1.26.0", time.Date(2025, 12, 2, 8, 14, 0, 0, time.UTC)}},
		{"dirty checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20251202081400-c804cd08f3ae+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c804cd08f3ae"}, {Key: "vcs.modified", Value: "true"}}},
			Info{"v0.0.0-20251202081400-c804cd08f3ae+dirty", "c804cd08f3ae-dirty", "go1.26.0", time.Time{}}},
		{"malformed time", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "c804cd0"}, {Key: "vcs.time", Value: "yesterday"}}},
			Info{"v0.3.0", "c804cd0", "go1.26.0", time.Time{}}},
		{"no VCS", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			Info{"(devel)", Unknown, "go1.26.0", time.Time{}}},
		{"nothing recorded", debug.BuildInfo{GoVersion: "go1.26.0"}, Info{Unknown, Unknown, "go1.26.0", time.Time{}}},
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

func TestReadFile(t *testing.T) {
	// The test binary is a Go executable that records its toolchain.
	exe, err := os.Executable()
	require.NoError(t, err)
	info, err := ReadFile(exe)
	require.NoError(t, err)
	assert.Equal(t, runtime.Version(), info.GoVersion)

	notGo := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755))
	_, err = ReadFile(notGo)
	assert.ErrorContains(t, err, notGo)
}
