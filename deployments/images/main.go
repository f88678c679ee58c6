// Command images writes one OCI image archive per plugin, without a
// container engine: `go run ./deployments/images --bin-dir DIR --out DIR`
// (make images). Each image is a single layer holding the plugin's static
// binary under /usr/local/bin (sidecar-order's also the helper and
// nri-suite-copy, which puts the helper on the host), with the binary as
// entrypoint. Archives are reproducible: the same binaries give the same
// bytes (sorted entries, zero times, root ownership, fixed gzip header), so
// a digest identifies a build. `ctr images import` takes them as they are;
// `crane push` takes the OCI layout they hold, unpacked (it reads a single
// file only as a docker-style tarball).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// imageFiles are the binaries (in --bin-dir) each plugin's image holds,
// the entrypoint first.
var imageFiles = map[string][]string{
	"device-injector": {"nri-device-injector"},
	"sidecar-order":   {"nri-sidecar-order", "nri-sidecar-helper", "nri-suite-copy"},
	"topology-aware":  {"nri-topology-aware"},
	"security":        {"nri-security"},
	"stats":           {"nri-stats"},
}

func main() {
	var opts buildOptions
	flag.StringVar(&opts.BinDir, "bin-dir", "", "directory of the static binaries (CGO_ENABLED=0)")
	flag.StringVar(&opts.Registry, "registry", "ghcr.io/nri-suite", "registry and path prefix of the image references")
	flag.StringVar(&opts.Tag, "tag", "", "image tag (required)")
	flag.StringVar(&opts.Arch, "arch", runtime.GOARCH, "image architecture, that of the binaries")
	out := flag.String("out", "", "directory the archives nri-<plugin>.tar are written to")
	flag.Parse()
	if opts.BinDir == "" || opts.Tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "images: --bin-dir, --tag and --out are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for plugin, files := range imageFiles {
		path := filepath.Join(*out, "nri-"+plugin+".tar")
		ref, digest, err := writeImage(path, plugin, files, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(1)
		}
		fmt.Printf("%s %s %s\n", path, ref, digest)
	}
}
