package plugin

import (
	"strings"

	"golang.org/x/mod/semver"
)

// RuntimeAtLeast reports whether the runtime, as NRI names it at
// registration ("containerd", "cri-o"), is at least the version the table
// gives for it: the first release whose NRI has a behaviour a plugin relies
// on. A runtime missing from the table (the test harness, future ones) has
// it; one listed with "" has no release known to have it. A version that is
// not semver has it not.
func RuntimeAtLeast(name, version string, minimum map[string]string) bool {
	least, known := minimum[strings.ToLower(name)]
	if !known {
		return true
	}
	if !strings.HasPrefix(version, "v") {
		version = "v" + version
	}
	return least != "" && semver.IsValid(version) && semver.Compare(version, least) >= 0
}
