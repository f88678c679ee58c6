package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nri-suite/nri-suite/deployments"
)

// CheckPod rejects what the sandbox cannot run: a pod without a name or
// containers, a pod network (there is no CNI), and image pulls (images are
// local only and the registry is unreachable).
func CheckPod(pod *corev1.Pod) error {
	if pod.Kind != "" && pod.Kind != "Pod" {
		return fmt.Errorf("pod manifest: kind is %q, expected Pod", pod.Kind)
	}
	if pod.Name == "" {
		return errors.New("pod manifest: metadata.name is empty, expected a name")
	}
	if len(pod.Spec.Containers) == 0 {
		return fmt.Errorf("pod %s: spec.containers is empty, expected at least one container", pod.Name)
	}
	if !pod.Spec.HostNetwork {
		return fmt.Errorf("pod %s: spec.hostNetwork is false, expected true (the sandbox has no CNI)", pod.Name)
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		if c.ImagePullPolicy != corev1.PullNever && c.ImagePullPolicy != corev1.PullIfNotPresent {
			return fmt.Errorf("pod %s: container %s: imagePullPolicy is %q, expected Never or IfNotPresent (images are local)",
				pod.Name, c.Name, c.ImagePullPolicy)
		}
	}
	return nil
}

// podRefuser is a Runtime that cannot run some pods on this host.
type podRefuser interface {
	// CannotRun says why pod cannot run, "" when it can.
	CannotRun(pod *corev1.Pod) string
}

// CannotRun says why the sandbox's runtime cannot run pod on this host ("" when
// it can): a test skips with that reason, a demo leaves the pod out.
func (s *Sandbox) CannotRun(pod *corev1.Pod) string {
	if r, ok := s.rt.(podRefuser); ok {
		return r.CannotRun(pod)
	}
	return ""
}

// PodName is the name the kubelet gives the pod WritePod wrote from a
// manifest named manifestName: a static pod's has the node name appended; a
// cluster's pod keeps its name.
func (s *Sandbox) PodName(manifestName string) string {
	if s.cluster != nil {
		return manifestName
	}
	return manifestName + "-" + s.opts.NodeName
}

// manifestPath is where the static pod name's manifest goes; an error
// without a kubelet (Options.NoKubelet), where nobody would read it.
func (s *Sandbox) manifestPath(name string) (string, error) {
	if s.kubelet == nil {
		return "", fmt.Errorf("static pod %s: the sandbox runs without a kubelet (Options.NoKubelet): run pods through CRI instead", name)
	}
	return filepath.Join(s.kubelet.staticPods, name+".yaml"), nil
}

// WritePod gives the kubelet a pod: standalone, its manifest goes into the
// static pod directory, appearing atomically (hidden temp file, then
// rename) so that the kubelet never reads half of it; in a cluster it is
// created through the API server. With Options.TolerateMissingPlugins the
// pod carries that annotation (pod itself is left as it is).
func (s *Sandbox) WritePod(pod *corev1.Pod) error {
	manifest := pod.DeepCopy()
	manifest.Kind, manifest.APIVersion = "Pod", "v1"
	if _, set := manifest.Annotations[deployments.TolerateMissingPlugins]; s.opts.TolerateMissingPlugins && !set {
		if manifest.Annotations == nil {
			manifest.Annotations = map[string]string{}
		}
		manifest.Annotations[deployments.TolerateMissingPlugins] = "true"
	}
	if s.cluster != nil {
		return s.cluster.createPod(manifest)
	}
	if err := CheckPod(pod); err != nil {
		return err
	}
	path, err := s.manifestPath(pod.Name)
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("encoding pod %s: %w", pod.Name, err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+pod.Name+".yaml.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing pod %s: %w", pod.Name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing pod %s: %w", pod.Name, err)
	}
	return nil
}

// RemovePod takes a pod WritePod gave away from the kubelet (its manifest,
// or through the API server), waits until the kubelet has stopped its
// containers, removes its sandboxes through CRI (instead of waiting for the
// kubelet's garbage collection) and returns once none of its containers is
// left.
func (s *Sandbox) RemovePod(ctx context.Context, name string) error {
	if s.cluster != nil {
		if err := s.cluster.deletePod(ctx, name); err != nil {
			return err
		}
	} else {
		path, err := s.manifestPath(name)
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("removing manifest of pod %s: %w", name, err)
		}
	}
	podName := s.PodName(name)
	err := s.pollCRI(ctx, "the kubelet to stop pod "+podName, func(cs []Container, ps []PodSandbox) bool {
		for _, c := range cs {
			if c.Pod == podName && c.State == ContainerRunning {
				return false
			}
		}
		for _, p := range ps {
			if p.Name == podName && p.State == "SANDBOX_READY" {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	// The kubelet removes the pod's containers meanwhile; CRI-O fails a
	// RemovePodSandbox that races with that ("no such id"), so the removal
	// repeats until nothing of the pod is left.
	var removeErr error
	err = s.pollCRI(ctx, "the containers of pod "+podName+" to be gone", func(cs []Container, ps []PodSandbox) bool {
		gone := true
		for _, c := range cs {
			if c.Pod == podName {
				gone = false
			}
		}
		for _, p := range ps {
			if p.Name == podName {
				gone = false
				if err := s.cri.RemovePodSandbox(ctx, p.ID); err != nil {
					removeErr = err
				}
			}
		}
		return gone
	})
	if err != nil && removeErr != nil {
		return fmt.Errorf("%w; last removal error: %w", err, removeErr)
	}
	return err
}

// pollCRI lists containers and pod sandboxes until done accepts them or ctx ends.
func (s *Sandbox) pollCRI(ctx context.Context, what string, done func([]Container, []PodSandbox) bool) error {
	var lastErr error
	for {
		cs, err := s.cri.Containers(ctx)
		if err == nil {
			var ps []PodSandbox
			if ps, err = s.cri.PodSandboxes(ctx); err == nil && done(cs, ps) {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitContainer waits until the container named container of the pod
// WritePod wrote as name runs, and returns it (the latest attempt).
func (s *Sandbox) WaitContainer(ctx context.Context, name, container string) (Container, error) {
	if _, err := s.manifestPath(name); err != nil {
		return Container{}, err
	}
	podName := s.PodName(name)
	var found Container
	var seen []string
	err := s.pollCRI(ctx, "container "+container+" of pod "+podName+" to run", func(cs []Container, _ []PodSandbox) bool {
		seen = seen[:0]
		for _, c := range cs {
			if c.Pod != podName || c.Name != container {
				continue
			}
			seen = append(seen, fmt.Sprintf("attempt %d %s", c.Attempt, c.State))
			if c.State == ContainerRunning && (found.ID == "" || c.Attempt > found.Attempt) {
				found = c
			}
		}
		return found.ID != ""
	})
	if err != nil {
		return Container{}, fmt.Errorf("%w; seen: [%s]; last kubelet log lines:\n%s",
			err, strings.Join(seen, ", "), tailFile(s.KubeletLog(), 15))
	}
	return found, nil
}

// ReadFile returns the content of path inside a running container.
func (s *Sandbox) ReadFile(ctx context.Context, id, path string) (string, error) {
	return s.cri.Exec(ctx, id, "cat", path)
}

// Environ returns the environment of a container's init process, as the
// runtime (and every NRI plugin) left it.
func (s *Sandbox) Environ(ctx context.Context, id string) (map[string]string, error) {
	raw, err := s.ReadFile(ctx, id, "/proc/1/environ")
	if err != nil {
		return nil, err
	}
	return ParseEnviron(raw), nil
}

// ProcStatus returns the fields of /proc/1/status inside a container
// (Cpus_allowed_list, Mems_allowed_list, ...).
func (s *Sandbox) ProcStatus(ctx context.Context, id string) (map[string]string, error) {
	raw, err := s.ReadFile(ctx, id, "/proc/1/status")
	if err != nil {
		return nil, err
	}
	return ParseProcStatus(raw), nil
}

// ParseEnviron splits a NUL-separated environment (/proc/PID/environ) into
// a map; entries without "=" are kept with an empty value.
func ParseEnviron(raw string) map[string]string {
	env := map[string]string{}
	for _, kv := range bytes.Split([]byte(raw), []byte{0}) {
		if len(kv) == 0 {
			continue
		}
		k, v, _ := strings.Cut(string(kv), "=")
		env[k] = v
	}
	return env
}

// ParseProcStatus splits /proc/PID/status ("Key:\tvalue" lines) into a map.
func ParseProcStatus(raw string) map[string]string {
	status := map[string]string{}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	return status
}

// CgroupFile names one cgroup interface file as a container sees it, on a
// cgroup v1 host (per-controller mounts) and on a v2 host.
type CgroupFile struct {
	V1Controller string
	V1           string
	V2           string
}

// The cgroup files the sandbox's reports read.
var (
	CPUSetCPUs  = CgroupFile{V1Controller: "cpuset", V1: "cpuset.cpus", V2: "cpuset.cpus.effective"}
	MemoryLimit = CgroupFile{V1Controller: "memory", V1: "memory.limit_in_bytes", V2: "memory.max"}
)

// ReadCgroup reads a cgroup file of the container's own cgroup from inside
// the container, trying the v1 layout first.
func (s *Sandbox) ReadCgroup(ctx context.Context, id string, f CgroupFile) (string, error) {
	out, err := s.ReadFile(ctx, id, filepath.Join("/sys/fs/cgroup", f.V1Controller, f.V1))
	if err != nil {
		var v2Err error
		if out, v2Err = s.ReadFile(ctx, id, filepath.Join("/sys/fs/cgroup", f.V2)); v2Err != nil {
			return "", fmt.Errorf("reading cgroup file %s (v1) or %s (v2) in container %s: %w", f.V1, f.V2, id, errors.Join(err, v2Err))
		}
	}
	return strings.TrimSpace(out), nil
}
