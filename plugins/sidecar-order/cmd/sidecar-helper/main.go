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
	"os"

	"github.com/nri-suite/nri-suite/plugins/sidecar-order/helper"
)

func main() { os.Exit(helper.Main(os.Args[1:])) }
