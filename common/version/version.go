// Package version is the one source of a binary's version: what the Go
// toolchain stamped into it at build time (the main module's version, the
// VCS revision, the Go version), printed by every binary's --version and
// served by every plugin as nri_suite_build_info. Nothing is set by linker
// flags, so that `go build` and `make` give the same answer.
package version

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Info is what one binary was built from.
type Info struct {
	// Version is the main module's version: a release tag, or the
	// pseudo-version Go derives from the checkout (+dirty when it had
	// changes), or "(devel)" for a build without VCS information.
	Version string
	// Revision is the VCS commit, with "-dirty" when the checkout had
	// changes; "unknown" when the build recorded none.
	Revision string
	// GoVersion is the toolchain that built it (go1.26.0).
	GoVersion string
	// Time is the commit's time; zero when the build recorded none.
	Time time.Time
}

// Unknown stands for what the build did not record.
const Unknown = "unknown"

// Get returns the running binary's Info.
var Get = sync.OnceValue(func() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: Unknown, Revision: Unknown, GoVersion: Unknown}
	}
	return fromBuildInfo(info)
})

// ReadFile returns the Info of the Go executable at path, of any platform:
// what `make images` labels an image with.
func ReadFile(path string) (Info, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Info{}, err
	}
	return fromBuildInfo(info), nil
}

func fromBuildInfo(info *debug.BuildInfo) Info {
	v := Info{Version: info.Main.Version, Revision: Unknown, GoVersion: info.GoVersion}
	if v.Version == "" {
		v.Version = Unknown
	}
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "vcs.time":
			// Go writes RFC 3339; anything else is left unknown.
			v.Time, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	if modified && v.Revision != Unknown {
		v.Revision += "-dirty"
	}
	return v
}

// String is the line --version prints after the binary's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Line is what `name --version` prints.
func Line(name string) string { return name + " " + Get().String() }
