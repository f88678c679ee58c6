package nriplugin

import (
	"strings"

	"golang.org/x/mod/semver"
)

// minSeccompAdjust is, per runtime as NRI names it, the first version whose
// NRI applies a plugin's seccomp policy. CRI-O v1.34.0 vendors an NRI
// (v0.9.1-0.20250219) without the field: the adjustment is dropped silently.
var minSeccompAdjust = map[string]string{
	"containerd": "v2.2.0",
	"cri-o":      "v1.35.0",
}

// seccompAdjustable reports whether the runtime applies NRI seccomp
// policies. Runtimes not in the table (the test harness, future ones) are
// trusted to, since they must speak a recent NRI to reach this plugin.
func seccompAdjustable(name, version string) bool {
	minimum, known := minSeccompAdjust[strings.ToLower(name)]
	if !known {
		return true
	}
	if !strings.HasPrefix(version, "v") {
		version = "v" + version
	}
	return semver.IsValid(version) && semver.Compare(version, minimum) >= 0
}
