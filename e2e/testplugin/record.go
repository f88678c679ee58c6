package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/encoding/protojson"
)

// recordContainer writes the NRI view of a container being created, as the
// runtime passed it to this plugin (with the adjustments of plugins of lower
// index), to dir/<namespace>_<pod>_<container>.json: what a test checks
// about what a runtime tells its plugins. It is written before the plugin
// answers, so it is whole once the creation returns.
func recordContainer(dir string, pod *api.PodSandbox, ctr *api.Container) error {
	data, err := protojson.MarshalOptions{Multiline: true}.Marshal(&api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return fmt.Errorf("recording container %s: %w", ctr.GetName(), err)
	}
	name := fmt.Sprintf("%s_%s_%s.json", pod.GetNamespace(), pod.GetName(), ctr.GetName())
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("recording container %s: %w", ctr.GetName(), err)
	}
	return nil
}
