package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-suite/nri-suite/deployments"
)

// CRI talks to a runtime's CRI endpoint through crictl: what the sandbox
// needs to watch the kubelet's work, and raw CRI calls for cases the kubelet
// cannot express.
type CRI struct {
	crictl string
	config string // private crictl.yaml, so that /etc/crictl.yaml never applies
	// netns is the runtime's network namespace (a cluster's), where its
	// streaming server (exec, attach) listens on loopback; "" the sandbox's.
	netns string
	dir   string // where JSON request files are written
	// kubeletOwned: a kubelet runs on this endpoint. Its housekeeping
	// (every 2 s) stops and removes every pod sandbox it did not create,
	// "orphaned" ones, so a pod made here would die at a random moment.
	kubeletOwned bool
	// tolerate: pod configs get deployments.TolerateMissingPlugins
	// (Options.TolerateMissingPlugins).
	tolerate bool
}

// errKubeletOwnsPods is RunPodSandbox's refusal on a node with a kubelet.
var errKubeletOwnsPods = errors.New("the sandbox runs a kubelet, which stops every pod it did not create " +
	"at its next housekeeping (every 2 s): start the sandbox with Options.NoKubelet to run pods through CRI")

// newCRI writes a crictl config for endpoint into dir; kubeletOwned says
// that a kubelet manages the pods on that endpoint, tolerate that pods
// tolerate missing plugins.
func newCRI(crictl, endpoint, dir, netns string, kubeletOwned, tolerate bool) (*CRI, error) {
	config := filepath.Join(dir, "crictl.yaml")
	body := fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n", endpoint, endpoint)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return nil, fmt.Errorf("writing crictl config: %w", err)
	}
	return &CRI{crictl: crictl, config: config, dir: dir, netns: netns, kubeletOwned: kubeletOwned, tolerate: tolerate}, nil
}

// Crictl runs crictl with args against the sandbox's runtime and returns its
// standard output.
func (c *CRI) Crictl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := command{netns: c.netns, argv: append([]string{c.crictl, "--config", c.config}, args...)}
	return runTool(ctx, nil, cmd.fullArgv()...)
}

// Container is a CRI container as crictl lists it, with the kubelet's labels
// decoded.
type Container struct {
	ID           string
	PodSandboxID string
	Name         string // container name
	Pod          string // pod name as the kubelet reports it (static pods: name-node)
	Namespace    string
	PodUID       string
	State        string // CONTAINER_RUNNING, CONTAINER_EXITED, ...
	Attempt      uint32
	Labels       map[string]string
	Annotations  map[string]string
}

// The labels the kubelet puts on every container and pod sandbox.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// ContainerRunning is the CRI state of a running container.
const ContainerRunning = "CONTAINER_RUNNING"

type crictlContainers struct {
	Containers []struct {
		ID           string `json:"id"`
		PodSandboxID string `json:"podSandboxId"`
		Metadata     struct {
			Name    string `json:"name"`
			Attempt uint32 `json:"attempt"`
		} `json:"metadata"`
		State       string            `json:"state"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"containers"`
}

// Containers lists every container, in any state.
func (c *CRI) Containers(ctx context.Context) ([]Container, error) {
	out, err := c.Crictl(ctx, "ps", "-a", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	return parseContainers(out)
}

func parseContainers(out []byte) ([]Container, error) {
	var list crictlContainers
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("decoding crictl ps output: %w", err)
	}
	containers := make([]Container, 0, len(list.Containers))
	for _, c := range list.Containers {
		containers = append(containers, Container{
			ID:           c.ID,
			PodSandboxID: c.PodSandboxID,
			Name:         c.Metadata.Name,
			Pod:          c.Labels[LabelPodName],
			Namespace:    c.Labels[LabelPodNamespace],
			PodUID:       c.Labels[LabelPodUID],
			State:        c.State,
			Attempt:      c.Metadata.Attempt,
			Labels:       c.Labels,
			Annotations:  c.Annotations,
		})
	}
	return containers, nil
}

// PodSandbox is a CRI pod sandbox as crictl lists it.
type PodSandbox struct {
	ID          string
	Name        string
	Namespace   string
	UID         string
	State       string // SANDBOX_READY or SANDBOX_NOTREADY
	Labels      map[string]string
	Annotations map[string]string
}

type crictlPods struct {
	Items []struct {
		ID       string `json:"id"`
		Metadata struct {
			Name      string `json:"name"`
			UID       string `json:"uid"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		State       string            `json:"state"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"items"`
}

// PodSandboxes lists every pod sandbox, in any state.
func (c *CRI) PodSandboxes(ctx context.Context) ([]PodSandbox, error) {
	out, err := c.Crictl(ctx, "pods", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var list crictlPods
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("decoding crictl pods output: %w", err)
	}
	pods := make([]PodSandbox, 0, len(list.Items))
	for _, p := range list.Items {
		pods = append(pods, PodSandbox{
			ID: p.ID, Name: p.Metadata.Name, Namespace: p.Metadata.Namespace, UID: p.Metadata.UID,
			State: p.State, Labels: p.Labels, Annotations: p.Annotations,
		})
	}
	return pods, nil
}

// ContainerInfo is what the runtime reports about a container beyond its
// CRI status: the host PID of its init process and its OCI spec.
type ContainerInfo struct {
	PID         int
	CgroupsPath string              // linux.cgroupsPath of the OCI spec
	BlockIO     *rspec.LinuxBlockIO // linux.resources.blockIO of the OCI spec
	Env         []string
	Labels      map[string]string
	Annotations map[string]string
}

type crictlInspect struct {
	Status struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"status"`
	Info struct {
		PID         int `json:"pid"`
		RuntimeSpec struct {
			Process struct {
				Env []string `json:"env"`
			} `json:"process"`
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
				Resources   struct {
					BlockIO *rspec.LinuxBlockIO `json:"blockIO"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

// Inspect returns the runtime's view of a container.
func (c *CRI) Inspect(ctx context.Context, id string) (*ContainerInfo, error) {
	out, err := c.Crictl(ctx, "inspect", "-o", "json", id)
	if err != nil {
		return nil, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	var in crictlInspect
	if err := json.Unmarshal(out, &in); err != nil {
		return nil, fmt.Errorf("decoding crictl inspect output of %s: %w", id, err)
	}
	return &ContainerInfo{
		PID:         in.Info.PID,
		CgroupsPath: in.Info.RuntimeSpec.Linux.CgroupsPath,
		BlockIO:     in.Info.RuntimeSpec.Linux.Resources.BlockIO,
		Env:         in.Info.RuntimeSpec.Process.Env,
		Labels:      in.Status.Labels,
		Annotations: in.Status.Annotations,
	}, nil
}

// Exec runs argv inside a running container and returns its standard output.
func (c *CRI) Exec(ctx context.Context, id string, argv ...string) (string, error) {
	out, err := c.Crictl(ctx, append([]string{"exec", id}, argv...)...)
	if err != nil {
		return string(out), fmt.Errorf("executing %q in container %s: %w", strings.Join(argv, " "), id, err)
	}
	return string(out), nil
}

// RunPodSandbox creates and starts a pod sandbox from a CRI
// PodSandboxConfig (any value that encodes to its JSON form), annotated as
// Options.TolerateMissingPlugins says. It refuses on a node with a kubelet,
// which would remove the pod (Options.NoKubelet).
func (c *CRI) RunPodSandbox(ctx context.Context, config any) (string, error) {
	return c.RunPodSandboxOn(ctx, config, "")
}

// RunPodSandboxOn runs a pod sandbox with the runtime handler of a
// RuntimeClass ("" for the runtime's default, AltRuntimeHandler for the
// sandbox's second one).
func (c *CRI) RunPodSandboxOn(ctx context.Context, config any, handler string) (string, error) {
	if c.kubeletOwned {
		return "", fmt.Errorf("running pod sandbox through CRI: %w", errKubeletOwnsPods)
	}
	path, err := c.writePodConfig(config)
	if err != nil {
		return "", err
	}
	args := []string{"runp", path}
	if handler != "" {
		args = []string{"runp", "--runtime", handler, path}
	}
	out, err := c.Crictl(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("running pod sandbox: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// CreateContainer creates a container from a CRI ContainerConfig in a pod
// sandbox made with podConfig, and returns its id.
func (c *CRI) CreateContainer(ctx context.Context, podID string, config, podConfig any) (string, error) {
	ctrPath, err := c.writeRequest("container", config)
	if err != nil {
		return "", err
	}
	podPath, err := c.writePodConfig(podConfig)
	if err != nil {
		return "", err
	}
	out, err := c.Crictl(ctx, "create", podID, ctrPath, podPath)
	if err != nil {
		return "", fmt.Errorf("creating container in pod sandbox %s: %w", podID, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartContainer starts a created container.
func (c *CRI) StartContainer(ctx context.Context, id string) error {
	if _, err := c.Crictl(ctx, "start", id); err != nil {
		return fmt.Errorf("starting container %s: %w", id, err)
	}
	return nil
}

// RemovePodSandbox stops and removes a pod sandbox and its containers.
func (c *CRI) RemovePodSandbox(ctx context.Context, id string) error {
	if _, err := c.Crictl(ctx, "stopp", id); err != nil {
		return fmt.Errorf("stopping pod sandbox %s: %w", id, err)
	}
	if _, err := c.Crictl(ctx, "rmp", "-f", id); err != nil {
		return fmt.Errorf("removing pod sandbox %s: %w", id, err)
	}
	return nil
}

// writePodConfig stores a PodSandboxConfig with writeRequest, annotated to
// tolerate missing plugins when the sandbox says so.
func (c *CRI) writePodConfig(config any) (string, error) {
	if c.tolerate {
		var err error
		if config, err = withAnnotation(config, deployments.TolerateMissingPlugins, "true"); err != nil {
			return "", fmt.Errorf("annotating pod config: %w", err)
		}
	}
	return c.writeRequest("pod", config)
}

// withAnnotation returns config (any value that encodes to a CRI config's
// JSON form) as a JSON object whose annotations hold key, set to value
// unless config sets it already.
func withAnnotation(config any, key, value string) (map[string]any, error) {
	data, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	var object map[string]any
	if err := json.Unmarshal(data, &object); err != nil {
		return nil, fmt.Errorf("config %s: expected a JSON object: %w", data, err)
	}
	annotations, _ := object["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	if _, ok := annotations[key]; !ok {
		annotations[key] = value
	}
	object["annotations"] = annotations
	return object, nil
}

// writeRequest stores a CRI request as JSON for crictl to read.
func (c *CRI) writeRequest(kind string, v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding %s config: %w", kind, err)
	}
	f, err := os.CreateTemp(c.dir, kind+"-*.json")
	if err != nil {
		return "", fmt.Errorf("writing %s config: %w", kind, err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("writing %s config: %w", kind, err)
	}
	return f.Name(), nil
}

// criReady returns nil once the runtime at endpoint answers CRI and reports
// RuntimeReady. NetworkReady stays false without CNI, which host-network
// pods do not need.
func criReady(ctx context.Context, crictl, endpoint string) error {
	out, err := runTool(ctx, nil, crictl, "--runtime-endpoint", endpoint, "--timeout", "2s", "info")
	if err != nil {
		return err
	}
	var info struct {
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status bool   `json:"status"`
				Reason string `json:"reason"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("decoding crictl info output: %w", err)
	}
	for _, c := range info.Status.Conditions {
		if c.Type == "RuntimeReady" {
			if c.Status {
				return nil
			}
			return fmt.Errorf("runtime not ready: %s", c.Reason)
		}
	}
	return fmt.Errorf("runtime reports no RuntimeReady condition")
}
