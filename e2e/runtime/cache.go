package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The images tools/install.sh builds; pods in tests and demos use BusyboxImage.
const (
	BusyboxImage = "localhost/nri-suite/busybox:latest"
	PauseImage   = "localhost/nri-suite/pause:latest"
)

// DefaultCacheDir is where tools/install.sh puts binaries and images unless
// $NRI_SUITE_CACHE says otherwise.
const DefaultCacheDir = "/var/cache/nri-suite"

// installHint tells a developer how to fill the cache.
const installHint = "run `bash e2e/runtime/tools/install.sh`"

// Cache is the directory of pinned binaries (bin/) and image archives
// (images/) shared by every sandbox on the machine.
type Cache struct {
	Root string
}

// Image is an OCI archive and the reference it is tagged with.
type Image struct {
	Ref     string
	Archive string
}

// DefaultCache returns the cache at $NRI_SUITE_CACHE, or DefaultCacheDir.
func DefaultCache() Cache {
	if dir := os.Getenv("NRI_SUITE_CACHE"); dir != "" {
		return Cache{Root: dir}
	}
	return Cache{Root: DefaultCacheDir}
}

// Bin returns the path of a cached binary; an absolute name (a binary that
// comes from the distribution, like conmon) is returned as it is.
func (c Cache) Bin(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(c.Root, "bin", name)
}

// Images returns the archives every sandbox loads into its runtime.
func (c Cache) Images() []Image {
	return []Image{
		{Ref: BusyboxImage, Archive: filepath.Join(c.Root, "images", "busybox.tar")},
		{Ref: PauseImage, Archive: filepath.Join(c.Root, "images", "pause.tar")},
	}
}

// sandboxBinaries are needed whatever the runtime: the kubelet on top and
// crictl, through which the sandbox talks CRI.
var sandboxBinaries = []string{"kubelet", "crictl"}

// ErrNotRoot and ErrCacheIncomplete say why a sandbox cannot run here.
var (
	ErrNotRoot         = errors.New("needs root; run as root or in CI")
	ErrCacheIncomplete = errors.New("runtime binaries missing")
)

// CheckPrereqs returns nil when a sandbox with rt can run on this machine,
// or an error wrapping ErrNotRoot or ErrCacheIncomplete that says what is
// missing and how to get it.
func CheckPrereqs(rt Runtime, c Cache) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	var missing []string
	for _, name := range append(rt.Binaries(), sandboxBinaries...) {
		if !isExecutable(c.Bin(name)) {
			missing = append(missing, c.Bin(name))
		}
	}
	for _, img := range c.Images() {
		if _, err := os.Stat(img.Archive); err != nil {
			missing = append(missing, img.Archive)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w for %s (%s): %s", ErrCacheIncomplete, rt.Name(), strings.Join(missing, ", "), installHint)
	}
	return nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
