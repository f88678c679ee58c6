package nriplugin

import "github.com/nri-suite/nri-suite/common/plugin"

// minRecentNRI is, per runtime as NRI names it, the first version whose NRI
// (v0.10 or later) applies a plugin's seccomp policy and calls validators.
// CRI-O v1.34.0 vendors an NRI (v0.9.1-0.20250219) without either: the
// seccomp adjustment is dropped silently, and a plugin subscribing to
// validation is refused.
var minRecentNRI = map[string]string{
	"containerd": "v2.2.0",
	"cri-o":      "v1.35.0",
}

// recentNRI reports whether the runtime's NRI applies seccomp policies and
// calls validators. Runtimes not in the table (the test harness, future
// ones) are trusted to, since they must speak a recent NRI to reach this
// plugin.
func recentNRI(name, version string) bool {
	return plugin.RuntimeAtLeast(name, version, minRecentNRI)
}
