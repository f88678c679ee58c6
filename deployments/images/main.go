// Command images writes one multi-platform OCI image per plugin, without a
// container engine (make images):
//
//	go run ./deployments/images --out DIR --tag TAG \
//	    --platform linux/amd64=BINDIR --platform linux/arm64=BINDIR2
//
// Each platform's image is a single layer holding the plugin's static
// binary from that platform's directory under /usr/local/bin
// (sidecar-order's also the helper and nri-suite-copy, which puts the
// helper on the host), with the binary as entrypoint; an image index lists
// them by platform. Every image is written twice: as an OCI image layout,
// DIR/nri-<plugin>/, which `crane push` takes, and as that layout in one
// file, DIR/nri-<plugin>.tar, an OCI archive that `ctr images import`,
// `skopeo copy oci-archive:` and `podman load` take (docs/install.md). The
// output is reproducible: the same binaries give the same bytes (sorted
// entries, zero file times, root ownership, the commit's time as the
// creation time), so a digest identifies a build.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// imageFiles are the binaries (in each platform's directory) each plugin's
// image holds, the entrypoint first.
var imageFiles = map[string][]string{
	"device-injector": {"nri-device-injector"},
	"sidecar-order":   {"nri-sidecar-order", "nri-sidecar-helper", "nri-suite-copy"},
	"topology-aware":  {"nri-topology-aware"},
	"security":        {"nri-security"},
	"stats":           {"nri-stats"},
}

// platformsFlag collects --platform os/arch=dir.
type platformsFlag []platformBinaries

func (f *platformsFlag) String() string { return fmt.Sprint(*f) }

func (f *platformsFlag) Set(value string) error {
	p, err := parsePlatform(value)
	if err != nil {
		return err
	}
	*f = append(*f, p)
	return nil
}

// parsePlatform parses os/arch=dir. The plugins run on Linux nodes only,
// and a variant would need a GOARM or GOAMD64 the Makefile does not set.
func parsePlatform(value string) (platformBinaries, error) {
	platform, dir, ok := strings.Cut(value, "=")
	if !ok || dir == "" {
		return platformBinaries{}, fmt.Errorf("%q: expected os/arch=directory, like linux/arm64=_out/images/bin-linux-arm64", value)
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return platformBinaries{}, fmt.Errorf("%q: %w", value, err)
	}
	if p.OS != "linux" || p.Architecture == "" || p.Variant != "" || p.OSVersion != "" {
		return platformBinaries{}, fmt.Errorf("%q: platform %s is not linux/<GOARCH> without a variant", value, platform)
	}
	return platformBinaries{Platform: *p, Dir: dir}, nil
}

func main() {
	var opts buildOptions
	flag.Var((*platformsFlag)(&opts.Platforms), "platform", "os/arch=directory of that platform's static binaries (CGO_ENABLED=0); repeated, one per platform")
	flag.StringVar(&opts.Registry, "registry", "ghcr.io/nri-suite", "registry and path prefix of the image references")
	flag.StringVar(&opts.Tag, "tag", "", "image tag (required)")
	flag.StringVar(&opts.Source, "source", "https://github.com/nri-suite/nri-suite", "URL of the source, the images' org.opencontainers.image.source")
	out := flag.String("out", "", "directory the layouts nri-<plugin>/ and archives nri-<plugin>.tar are written to")
	flag.Parse()
	if len(opts.Platforms) == 0 || opts.Tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "images: --platform, --tag and --out are required")
		os.Exit(2)
	}
	if err := run(*out, opts); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out string, opts buildOptions) error {
	var err error
	if opts.Build, err = readBuild(opts.Platforms, opts.Tag); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for plugin, files := range imageFiles {
		ref, digest, err := writeImage(out, plugin, files, opts)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s %s\n", filepath.Join(out, "nri-"+plugin), ref, digest)
	}
	return nil
}
