package plugin

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/nri-suite/nri-suite/common/quote"
)

// SystemDirs are the directories that no flag or config key naming a file or
// directory may be, as given or once its symlinks are resolved: the root,
// the top-level directories of the file system hierarchy and their usual
// second levels. A plugin keeps its files in a directory of its own, which
// may be below one of them (/run/nri-suite, /var/lib/nri-suite/x); pointed
// at one of these itself, it would list, write or remove what belongs to
// the system.
var SystemDirs = []string{
	"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
	"/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
	"/usr", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/sbin", "/usr/share",
	"/var", "/var/lib", "/var/log", "/var/run", "/var/tmp",
}

// CheckPath checks the value of the flag or config key key that names a
// file or a directory the plugin reads, writes or removes files in: an
// absolute, clean path that is not one of SystemDirs. Callers skip it for
// an empty value where empty means "none".
func CheckPath(key, value string) error {
	if err := CheckAbsPath(key, value); err != nil {
		return err
	}
	if slices.Contains(SystemDirs, value) {
		return fmt.Errorf("%s: %q is a system directory: expected a file or directory of the plugin's own, such as %s",
			key, value, filepath.Join(value, "nri-suite"))
	}
	// A path that does not exist yet has no symlinks to resolve.
	if resolved, err := filepath.EvalSymlinks(value); err == nil && slices.Contains(SystemDirs, resolved) {
		return fmt.Errorf("%s: %q resolves to the system directory %s: expected a file or directory of the plugin's own",
			key, value, resolved)
	}
	return nil
}

// CheckAbsPath is CheckPath for the paths that are system directories by
// nature, where the kernel mounts what the plugin reads (--sysfs-root /sys,
// --proc /proc, --cgroup-root /sys/fs/cgroup): absolute and clean only.
func CheckAbsPath(key, value string) error {
	if value == "" {
		return fmt.Errorf("%s: empty: expected an absolute path", key)
	}
	if !filepath.IsAbs(value) {
		return fmt.Errorf("%s: %s: expected an absolute path", key, quote.Value(value))
	}
	if clean := filepath.Clean(value); clean != value {
		return fmt.Errorf("%s: %s: expected a clean absolute path, such as %s", key, quote.Value(value), quote.Bare(clean))
	}
	return nil
}
