package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// reporter reads what the plugins did to the containers of a cluster's
// pods: inside the containers (exec through the API server), in the
// records the plugins publish in the node's shared state directory, and
// from the stats plugin (through a port-forward, statsport.go). It runs on
// the node, where the shared directory is.
type reporter struct {
	client         kubernetes.Interface
	config         *rest.Config
	sharedDir      string
	suiteNamespace string // where the suite's DaemonSets run
}

// newReporter reaches the cluster of kubeconfig.
func newReporter(kubeconfig, sharedDir, suiteNamespace string) (*reporter, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("making a client of the cluster: %w", err)
	}
	return &reporter{client: client, config: config, sharedDir: sharedDir, suiteNamespace: suiteNamespace}, nil
}

// pod gets a pod of the cluster.
func (r *reporter) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := r.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting pod %s/%s: %w", namespace, name, err)
	}
	return pod, nil
}

// target is one container of a pod, as the report sees it.
type target struct {
	pod     *corev1.Pod
	name    string
	role    string // "", "init" or "native sidecar"
	status  corev1.ContainerStatus
	id      string            // the runtime's container id; "" before it is created
	inside  map[string]string // /proc/1/status inside, read once (see procStatus)
	running bool
}

// probe reads one kind of effect an NRI plugin can have on a container.
// A plugin that brings a new kind of effect adds its probe here, so that
// `make run` shows it. Probes that read inside the container or the
// records of a live one run only while it runs.
type probe struct {
	name        string
	runningOnly bool
	read        func(ctx context.Context, r *reporter, c *target) (string, error)
}

var probes = []probe{
	{name: "state", read: containerState},
	{name: "pid 1", runningOnly: true, read: pid1Command},
	{name: "cpus", runningOnly: true, read: cpusInside},
	{name: "placement", runningOnly: true, read: placement},
	{name: "devices", runningOnly: true, read: devices},
	{name: "seccomp", runningOnly: true, read: seccompMode},
	{name: "usage", runningOnly: true, read: usage},
	{name: "sidecar-order", read: helperLog},
}

// print prints the report on every pod.
func (r *reporter) print(ctx context.Context, out io.Writer, pods []corev1.Pod) error {
	fmt.Fprintln(out, "workload:")
	for i := range pods {
		if err := r.printPod(ctx, out, &pods[i]); err != nil {
			return err
		}
	}
	return nil
}

// printPod prints, per container of pod, what every probe reads; a probe
// that reads nothing (its plugin does not run, or did nothing) prints no
// line. A probe that fails prints its error: the report is for a person.
func (r *reporter) printPod(ctx context.Context, out io.Writer, pod *corev1.Pod) error {
	fmt.Fprintf(out, "  pod %s/%s (%s)\n", pod.Namespace, pod.Name, r.podSummary(ctx, pod))
	for _, c := range targets(pod) {
		fmt.Fprintf(out, "    container %s", c.name)
		if c.role != "" {
			fmt.Fprintf(out, " (%s)", c.role)
		}
		if c.id != "" {
			fmt.Fprintf(out, " %.13s", c.id)
		}
		fmt.Fprintln(out)
		for _, p := range probes {
			if p.runningOnly && !c.running {
				continue
			}
			value, err := p.read(ctx, r, c)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("reporting on container %s of pod %s/%s: %w", c.name, pod.Namespace, pod.Name, ctx.Err())
				}
				value = "error: " + err.Error()
			}
			if value == "" {
				continue
			}
			fmt.Fprintf(out, "      %-15s %s\n", p.name+":", value)
		}
	}
	return nil
}

// podSummary is what the API says of the pod as a whole: its owner (with
// a Job's outcome), QoS class, phase and address.
func (r *reporter) podSummary(ctx context.Context, pod *corev1.Pod) string {
	var parts []string
	for _, ref := range pod.OwnerReferences {
		owner := ref.Kind + " " + ref.Name
		if ref.Kind == "Job" {
			if job, err := r.client.BatchV1().Jobs(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
				if cond := jobCondition(job); cond != "" {
					owner += ": " + string(cond)
				}
			}
		}
		parts = append(parts, owner)
	}
	parts = append(parts, string(pod.Status.QOSClass), string(pod.Status.Phase))
	if why := unschedulable(pod); why != "" {
		parts = append(parts, "not scheduled: "+why)
	}
	if pod.Status.PodIP != "" {
		parts = append(parts, "IP "+pod.Status.PodIP)
	}
	return strings.Join(parts, ", ")
}

// unschedulable is the scheduler's message on a pod it could not place
// (too few CPUs left, say); "" for a scheduled pod.
func unschedulable(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSpace(c.Reason + " " + c.Message)
		}
	}
	return ""
}

// targets are the pod's containers in start order: init containers (native
// sidecars among them), then the others.
func targets(pod *corev1.Pod) []*target {
	statuses := map[string]corev1.ContainerStatus{}
	for _, st := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		statuses[st.Name] = st
	}
	var out []*target
	add := func(c corev1.Container, role string) {
		st := statuses[c.Name]
		out = append(out, &target{pod: pod, name: c.Name, role: role, status: st,
			id: containerID(st.ContainerID), running: st.State.Running != nil})
	}
	for _, c := range pod.Spec.InitContainers {
		role := "init"
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			role = "native sidecar"
		}
		add(c, role)
	}
	for _, c := range pod.Spec.Containers {
		add(c, "")
	}
	return out
}

// containerID strips the runtime's scheme from a status's container id
// ("containerd://ID", "cri-o://ID"): the plugins key their records by ID.
func containerID(statusID string) string {
	if _, id, found := strings.Cut(statusID, "://"); found {
		return id
	}
	return statusID
}

// containerState shows the container's state as the kubelet reports it.
func containerState(_ context.Context, _ *reporter, c *target) (string, error) {
	return formatState(c.status), nil
}

// formatState shows a container status's state, exit code and times.
func formatState(st corev1.ContainerStatus) string {
	var s string
	switch {
	case st.State.Running != nil:
		s = "running since " + clock(st.State.Running.StartedAt)
	case st.State.Terminated != nil:
		t := st.State.Terminated
		s = fmt.Sprintf("exited %d (%s), ran %s to %s", t.ExitCode, t.Reason, clock(t.StartedAt), clock(t.FinishedAt))
	case st.State.Waiting != nil:
		s = strings.TrimSpace("waiting: " + st.State.Waiting.Reason + " " + st.State.Waiting.Message)
	default:
		s = "not created yet"
	}
	if st.RestartCount > 0 {
		s += fmt.Sprintf(", %d restarts", st.RestartCount)
	}
	return s
}

func clock(t metav1.Time) string { return t.UTC().Format(time.TimeOnly) }

// exec runs argv in the container through the API server and returns its
// standard output.
func (r *reporter) exec(ctx context.Context, c *target, argv ...string) (string, error) {
	req := r.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.pod.Namespace).Name(c.pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Container: c.name, Command: argv, Stdout: true, Stderr: true},
		scheme.ParameterCodec)
	executor, err := remotecommand.NewWebSocketExecutor(r.config, "GET", req.URL().String())
	if err != nil {
		return "", fmt.Errorf("running %q in container %s: %w", argv, c.name, err)
	}
	var stdout, stderr bytes.Buffer
	if err := executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return "", fmt.Errorf("running %q in container %s: %w: %s", argv, c.name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// procStatus returns the fields of /proc/1/status inside the container,
// read once per report.
func (r *reporter) procStatus(ctx context.Context, c *target) (map[string]string, error) {
	if c.inside == nil {
		raw, err := r.exec(ctx, c, "cat", "/proc/1/status")
		if err != nil {
			return nil, err
		}
		c.inside = sandbox.ParseProcStatus(raw)
	}
	return c.inside, nil
}

// maxCommandLen keeps a shown command line on one line.
const maxCommandLen = 90

// pid1Command shows the command line of the container's first process:
// sidecar-order's helper runs there in a sidecar, and has exec'd the
// original command in a main.
func pid1Command(ctx context.Context, r *reporter, c *target) (string, error) {
	raw, err := r.exec(ctx, c, "cat", "/proc/1/cmdline")
	if err != nil {
		return "", err
	}
	cmd := strings.Join(strings.Split(strings.TrimRight(raw, "\x00"), "\x00"), " ")
	if len(cmd) > maxCommandLen {
		cmd = cmd[:maxCommandLen-3] + "..."
	}
	return cmd, nil
}

// cpusInside shows the CPUs and memory nodes the container's first
// process may use, read inside it.
func cpusInside(ctx context.Context, r *reporter, c *target) (string, error) {
	status, err := r.procStatus(ctx, c)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, memory nodes %s (/proc/1/status)", status["Cpus_allowed_list"], status["Mems_allowed_list"]), nil
}

// seccompModes names the Seccomp field of /proc/PID/status.
var seccompModes = map[string]string{"0": "disabled", "1": "strict", "2": "filter"}

// seccompMode shows whether the container's process runs under a seccomp
// filter, read inside it.
func seccompMode(ctx context.Context, r *reporter, c *target) (string, error) {
	status, err := r.procStatus(ctx, c)
	if err != nil {
		return "", err
	}
	mode, ok := status["Seccomp"]
	if !ok {
		return "", fmt.Errorf("no Seccomp field in /proc/1/status")
	}
	if name, ok := seccompModes[mode]; ok {
		return fmt.Sprintf("%s (Seccomp: %s)", name, mode), nil
	}
	return "Seccomp: " + mode, nil
}

// placementWait bounds the wait for a placement record: topology-aware
// writes its records behind its NRI handlers, so one may lag its container.
const placementWait = 5 * time.Second

// placement shows the pool, CPUs, memory nodes and reason that
// topology-aware published for the container (a shared container's cpusets
// are in its pool's record); nothing when topology-aware does not run.
func placement(ctx context.Context, r *reporter, c *target) (string, error) {
	if running, err := r.pluginRunning("topology-aware"); err != nil || !running {
		return "", err
	}
	placements, err := state.PlacementRecords(r.sharedDir)
	if err != nil {
		return "", err
	}
	pools, err := state.PoolRecords(r.sharedDir)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, placementWait)
	defer cancel()
	for {
		rec, found, err := placements.Read(c.id)
		if err != nil {
			return "", err
		}
		if found {
			all, err := pools.List()
			if err != nil {
				return "", err
			}
			cpus, mems, err := rec.Resolve(all)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s pool, cpus %s, memory nodes %s (%s)", rec.Pool, cpus, mems, rec.Reason), nil
		}
		select {
		case <-ctx.Done():
			return "not published by topology-aware", nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pluginRunning reports whether a plugin named name has published its
// status (as every plugin's runner does) in the shared dir.
func (r *reporter) pluginRunning(name string) (bool, error) {
	statuses, err := state.PluginStatuses(r.sharedDir)
	if err != nil {
		return false, err
	}
	all, err := statuses.List()
	if err != nil {
		return false, err
	}
	for _, st := range all {
		if st.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// devices shows the devices device-injector published for the container,
// where they sit, and their health; nothing when it injected none.
func devices(_ context.Context, r *reporter, c *target) (string, error) {
	records, err := state.ContainerDeviceRecords(r.sharedDir)
	if err != nil {
		return "", err
	}
	rec, found, err := records.Read(c.id)
	if err != nil || !found {
		return "", err
	}
	healthRecords, err := state.ContainerHealthRecords(r.sharedDir)
	if err != nil {
		return "", err
	}
	health := map[string]state.Health{}
	if h, found, err := healthRecords.Read(c.id); err != nil {
		return "", err
	} else if found {
		for _, res := range h.Resources {
			health[res.ResourceID] = res.Health
		}
	}
	var shown []string
	for _, d := range rec.Devices {
		h := health[d.Name]
		if h == "" {
			h = state.HealthUnknown
		}
		numa := "no NUMA node" // virtual devices, and every device on single-node machines
		if d.NUMANode >= 0 {
			numa = fmt.Sprintf("NUMA node %d", d.NUMANode)
		}
		shown = append(shown, fmt.Sprintf("%s at %s (%s, %s)", d.Name, d.Path, numa, h))
	}
	return strings.Join(shown, "; "), nil
}

// statsReport is the part of the stats plugin's /stats/pods JSON the report
// shows.
type statsReport struct {
	Pods []struct {
		Containers []struct {
			ID    string `json:"id"`
			Usage *struct {
				CPU *struct {
					UsageSeconds float64 `json:"usageSeconds"`
				} `json:"cpu"`
				Memory *struct {
					WorkingSet uint64 `json:"workingSetBytes"`
				} `json:"memory"`
			} `json:"usage"`
		} `json:"containers"`
	} `json:"pods"`
}

// usage shows the CPU time and memory working set the stats plugin on the
// pod's node reports for the container; nothing when none runs there.
func usage(ctx context.Context, r *reporter, c *target) (string, error) {
	stats, port, err := r.statsPod(ctx, c.pod.Spec.NodeName)
	if err != nil || stats == nil {
		return "", err
	}
	body, err := r.statsGet(ctx, stats, port, "/stats/pods")
	if err != nil {
		return "", fmt.Errorf("asking the stats plugin (pod %s) for /stats/pods: %w", stats.Name, err)
	}
	return formatUsage(body, c.id)
}

// formatUsage shows a container's usage from a /stats/pods document.
func formatUsage(body []byte, id string) (string, error) {
	var report statsReport
	if err := json.Unmarshal(body, &report); err != nil {
		return "", fmt.Errorf("decoding /stats/pods: %w", err)
	}
	for _, pod := range report.Pods {
		for _, ctr := range pod.Containers {
			if ctr.ID != id || ctr.Usage == nil || ctr.Usage.CPU == nil || ctr.Usage.Memory == nil {
				continue
			}
			return fmt.Sprintf("cpu %.3fs, working set %.1f MiB (stats plugin)",
				ctr.Usage.CPU.UsageSeconds, float64(ctr.Usage.Memory.WorkingSet)/(1<<20)), nil
		}
	}
	return "not reported by the stats plugin", nil
}

// statsPod finds the stats plugin's running pod on node and the port of
// its stats listener (the chart's container port "stats"); nil without one.
func (r *reporter) statsPod(ctx context.Context, node string) (*corev1.Pod, string, error) {
	pods, err := r.client.CoreV1().Pods(r.suiteNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nri-stats", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, "", fmt.Errorf("finding the stats plugin on node %s: %w", node, err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		for _, c := range pod.Spec.Containers {
			for _, port := range c.Ports {
				if port.Name == "stats" {
					return &pod, strconv.Itoa(int(port.ContainerPort)), nil
				}
			}
		}
	}
	return nil, "", nil
}

// maxLogBytes bounds how much of a container's log helperLog reads.
const maxLogBytes = 1 << 20

// helperLog shows what sidecar-order's helper logged in the container
// (readiness, and how it stopped a sidecar after the mains); nothing for
// containers it is not in front of.
func helperLog(ctx context.Context, r *reporter, c *target) (string, error) {
	if c.id == "" {
		return "", nil
	}
	limit := int64(maxLogBytes)
	stream, err := r.client.CoreV1().Pods(c.pod.Namespace).GetLogs(c.pod.Name,
		&corev1.PodLogOptions{Container: c.name, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the log of container %s: %w", c.name, err)
	}
	defer stream.Close()
	lines, err := helperLines(stream, c.name)
	return strings.Join(lines, "; "), err
}

// helperLines returns what sidecar-order's helper logged for container,
// without its prefix.
func helperLines(log io.Reader, container string) ([]string, error) {
	prefix := "nri-sidecar-helper: " + container + ": "
	var lines []string
	scanner := bufio.NewScanner(log)
	for scanner.Scan() {
		if line, ok := strings.CutPrefix(scanner.Text(), prefix); ok {
			lines = append(lines, line)
		}
	}
	if err := scanner.Err(); err != nil {
		return lines, fmt.Errorf("reading the log of container %s: %w", container, err)
	}
	return lines, nil
}
