// Command sysfs-capture copies the topology-relevant part of a machine's
// sysfs into a fixture directory, so that tests and the simulator can run on
// that machine's topology elsewhere.
//
// It copies every file topology discovery reads (found by running discovery
// on the source), and for device locality the /sys/dev/{char,block} and
// /sys/bus/pci/devices symlinks, kept relative as the kernel makes them, with
// the numa_node, local_cpulist and dev files of the devices they point to and
// of every directory above them.
//
//	sysfs-capture -out testdata/my-machine/sysfs [-sysfs /sys] [-describe]
//
// The -out directory must be absent or empty. With -describe it also prints
// the captured topology as a YAML description.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/common/version"
)

func main() {
	src := flag.String("sysfs", sysfs.DefaultRoot, "sysfs root to capture")
	out := flag.String("out", "", "fixture directory to write (created if absent)")
	describe := flag.Bool("describe", false, "print the captured topology as a YAML description")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Line("sysfs-capture"))
		return
	}
	if err := run(*src, *out, *describe); err != nil {
		fmt.Fprintln(os.Stderr, "sysfs-capture:", err)
		os.Exit(1)
	}
}

func run(src, out string, describe bool) error {
	if out == "" {
		return errors.New("-out is required: the fixture directory to write")
	}
	if err := capture(src, out); err != nil {
		return err
	}
	if !describe {
		return nil
	}
	t, err := sysfs.Discover(out)
	if err != nil {
		return err
	}
	yaml, err := description.FromTopology(t).Marshal()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(yaml)
	return err
}

// deviceLinks are the directories of symlinks into the device hierarchy
// that device locality resolves.
var deviceLinks = []string{"dev/char", "dev/block", "bus/pci/devices"}

// deviceFiles are the files of a device directory that locality reads; dev
// also keeps a device's directory from being empty, which git would drop.
var deviceFiles = []string{"numa_node", "local_cpulist", "dev"}

// capture copies the files discovery and device locality read from src to
// dst, which must be absent or empty so that a capture never mixes machines.
func capture(src, dst string) error {
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return fmt.Errorf("capture into %s: directory is not empty", dst)
	}
	var read []string
	if _, err := sysfs.Discover(src, sysfs.OnRead(func(rel string) { read = append(read, rel) })); err != nil {
		return fmt.Errorf("capture %s: %w", src, err)
	}
	for _, rel := range read {
		if err := copyFile(src, dst, filepath.FromSlash(rel)); err != nil {
			return fmt.Errorf("capture %s: %w", src, err)
		}
	}
	for _, dir := range deviceLinks {
		if err := captureLinks(src, dst, filepath.FromSlash(dir)); err != nil {
			return fmt.Errorf("capture %s: %w", src, err)
		}
	}
	return nil
}

// captureLinks recreates the symlinks of a directory and copies the device
// files along each link's target and its parents, up to the devices
// directory.
func captureLinks(src, dst, dir string) error {
	entries, err := os.ReadDir(filepath.Join(src, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list devices: %w", err)
	}
	top := filepath.Join(src, "devices")
	for _, e := range entries {
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(filepath.Join(src, link))
		if err != nil {
			return fmt.Errorf("read device link: %w", err)
		}
		if filepath.IsAbs(target) {
			return fmt.Errorf("device link %s points to %s, expected a relative target as the kernel makes", filepath.Join(src, link), target)
		}
		if err := os.MkdirAll(filepath.Join(dst, dir), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, filepath.Join(dst, link)); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		device := filepath.Join(src, dir, target)
		for d := device; strings.HasPrefix(d, top+string(filepath.Separator)); d = filepath.Dir(d) {
			rel, err := filepath.Rel(src, d)
			if err != nil {
				return err
			}
			for _, name := range deviceFiles {
				if err := copyFile(src, dst, filepath.Join(rel, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

// copyFile copies src/rel to dst/rel, creating directories. Sysfs reports
// every attribute file as 4096 bytes long, so it reads rather than streams
// by size.
func copyFile(src, dst, rel string) error {
	data, err := os.ReadFile(filepath.Join(src, rel))
	if err != nil {
		return err
	}
	target := filepath.Join(dst, rel)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, data, 0o644)
}
