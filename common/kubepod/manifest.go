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
	ApplyDefaults(pod)
	if err := validatePodResources(pod); err != nil {
		return nil, fmt.Errorf("decoding pod %q: %w", pod.Name, err)
	}
	return pod, nil
}

// validatePodResources checks pod-level resources (KEP-2837) as the API
// server does, after defaulting: only CPU, memory and hugepages; no request
// above its limit; no container limit above the pod's, and the containers'
// requests together within the pod's.
func validatePodResources(pod *v1.Pod) error {
	res := pod.Spec.Resources
	if res == nil {
		return nil
	}
	for _, l := range []v1.ResourceList{res.Requests, res.Limits} {
		for name := range l {
			if !isSupportedPodLevelResource(name) {
				return fmt.Errorf("spec.resources: resource %q: expected cpu, memory or hugepages-<size> at pod level", name)
			}
		}
	}
	for name, req := range res.Requests {
		if lim, ok := res.Limits[name]; ok && req.Cmp(lim) > 0 {
			return fmt.Errorf("spec.resources: %s request %s is above its limit %s: expected a request no larger than the limit", name, req.String(), lim.String())
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for name, lim := range c.Resources.Limits {
				if podLim, ok := res.Limits[name]; ok && lim.Cmp(podLim) > 0 {
					return fmt.Errorf("container %q: %s limit %s is above the pod-level limit %s: expected at most the pod's", c.Name, name, lim.String(), podLim.String())
				}
			}
		}
	}
	containers := AggregateContainerResources(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests })
	for name, sum := range containers {
		if podReq, ok := res.Requests[name]; ok && sum.Cmp(podReq) > 0 {
			return fmt.Errorf("spec.resources: the containers request %s of %s together, above the pod-level request %s: expected at most the pod's", sum.String(), name, podReq.String())
		}
	}
	return nil
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
