package seccomp

import (
	"fmt"
	"path"
	"strings"

	"github.com/nri-suite/nri-suite/common/quote"
)

// maxNameLen bounds a profile name; names come from annotations.
const maxNameLen = 255

// validateName accepts exactly the names the loader can give a file: a clean relative
// slash path of [A-Za-z0-9._/-] without "..", whose segments are not hidden files.
func validateName(name string) error {
	reason := nameProblem(name)
	if reason == "" {
		return nil
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidName, quote.Value(name), reason)
}

func nameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > maxNameLen:
		return fmt.Sprintf("longer than %d characters", maxNameLen)
	case strings.HasPrefix(name, "/"):
		return "an absolute path, expected a path relative to the profile directory"
	case strings.Contains(name, ".."):
		return `contains "..", expected a path inside the profile directory`
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/-", r)) {
			return fmt.Sprintf("contains %q, expected only A-Z a-z 0-9 . _ / -", r)
		}
	}
	if path.Clean(name) != name {
		return "not a clean path (empty, '.' or trailing segments)"
	}
	for seg := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(seg, ".") {
			return "has a segment starting with '.', hidden files are not loaded"
		}
	}
	return ""
}
