// Command nri-sidecar-helper runs in front of the containers of a pod that
// the sidecar-order plugin orders: it starts main containers after their
// sidecars are ready and stops sidecars after their mains. The plugin mounts
// it into the containers; build it static:
//
//	CGO_ENABLED=0 go build -ldflags '-s -w' -o nri-sidecar-helper ./plugins/sidecar-order/cmd/sidecar-helper
//
// See package helper and plugins/sidecar-order/README.md.
package main

import (
	"fmt"
	"os"

	"github.com/nri-suite/nri-suite/common/version"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/internal/helper"
)

func main() {
	// Only as the whole command line: the helper's own flags come before a
	// container's command, which may take a --version of its own.
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version.Line("nri-sidecar-helper"))
		return
	}
	os.Exit(helper.Main(os.Args[1:]))
}
