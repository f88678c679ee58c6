// Command nri-suite-copy copies files into a directory, each by a rename of a
// complete copy: `nri-suite-copy SRC... DIR`. The sidecar-order image runs it
// in an init container to put nri-sidecar-helper on the host, where the
// runtime bind-mounts it into containers from. The rename keeps the old
// file's inode for the containers that have it mounted already, and no
// container ever mounts a half-written helper. The images have no shell and
// no cp: this is the whole tool.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nri-suite/nri-suite/common/version"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version.Line("nri-suite-copy"))
		return
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: nri-suite-copy SRC... DIR")
		os.Exit(2)
	}
	dir := os.Args[len(os.Args)-1]
	for _, src := range os.Args[1 : len(os.Args)-1] {
		if err := copyInto(src, dir); err != nil {
			fmt.Fprintln(os.Stderr, "nri-suite-copy:", err)
			os.Exit(1)
		}
	}
}

// copyInto copies src to dir/<base of src> with src's permission bits.
func copyInto(src, dir string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("copying %s: mode %s: expected a regular file", src, info.Mode())
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(src)+".*")
	if err != nil {
		return fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	defer os.Remove(tmp.Name()) // after the rename: gone already
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copying %s into %s: %w", src, dir, err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}
