package kubepod

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Parse decodes a kubelet-style Pod manifest (YAML or JSON), strictly: an
// unknown field is an error that names it, so a typo in a test manifest
// cannot silently drop a setting. It applies the API defaults the kubelet
// applies to static pods (see ApplyDefaults).
func Parse(data []byte) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		return nil, fmt.Errorf("decoding pod manifest: %w", err)
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" {
		return nil, fmt.Errorf("decoding pod manifest: apiVersion %q kind %q: expected apiVersion \"v1\" kind \"Pod\"",
			pod.APIVersion, pod.Kind)
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("decoding pod manifest: metadata.name is empty: expected a pod name")
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("decoding pod %q: spec.containers is empty: expected at least one container", pod.Name)
	}
	seen := map[string]bool{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == "" {
				return nil, fmt.Errorf("decoding pod %q: a container has no name: expected every container to be named", pod.Name)
			}
			if seen[c.Name] {
				return nil, fmt.Errorf("decoding pod %q: container name %q is used twice: expected unique names", pod.Name, c.Name)
			}
			seen[c.Name] = true
		}
	}
	if pod.Spec.Resources != nil {
		return nil, fmt.Errorf("decoding pod %q: spec.resources (pod-level resources) is set: expected container-level resources only", pod.Name)
	}
	ApplyDefaults(pod)
	return pod, nil
}

// LoadFile reads and parses a pod manifest file.
func LoadFile(path string) (*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pod manifest: %w", err)
	}
	pod, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return pod, nil
}
