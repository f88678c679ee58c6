package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/state"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// workloadContainer is one running container of the demo workload.
type workloadContainer struct {
	pod  *corev1.Pod
	spec corev1.Container
	cri  sandbox.Container
}

// startWorkload hands the pods to the kubelet one at a time, in order,
// waiting until every container of a pod runs before the next: placements
// then do not depend on how the kubelet interleaves the creations, and the
// report reads the same on every run.
func startWorkload(ctx context.Context, sb *sandbox.Sandbox, pods []*corev1.Pod) ([]workloadContainer, error) {
	var workload []workloadContainer
	for _, pod := range pods {
		if err := sb.WritePod(pod); err != nil {
			return nil, err
		}
		for _, spec := range pod.Spec.Containers {
			c, err := sb.WaitContainer(ctx, pod.Name, spec.Name)
			if err != nil {
				return nil, err
			}
			workload = append(workload, workloadContainer{pod: pod, spec: spec, cri: c})
		}
	}
	return workload, nil
}

// probe reads one kind of effect an NRI plugin can have on a container,
// from inside the container where possible. A plugin that brings a new kind
// of effect adds its probe here, so that `make run` shows it.
type probe struct {
	name string
	read func(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error)
}

var probes = []probe{
	{name: "cgroup", read: cgroupPath},
	{name: "pid 1", read: pid1Command},
	{name: "env added", read: envAdded},
	{name: "cpuset", read: cpusetInside},
	{name: "placement", read: placement},
	{name: "devices", read: devices},
	{name: "seccomp", read: seccompMode},
	{name: "usage", read: usage},
	{name: "memory limit", read: memoryLimit},
}

// printReport prints, per container, what every probe reads; a probe that
// reads nothing (its plugin does not run) prints no line. A probe that fails
// prints its error: the report is for a person to read.
func printReport(ctx context.Context, out io.Writer, sb *sandbox.Sandbox, workload []workloadContainer) error {
	fmt.Fprintln(out, "workload:")
	lastPod := ""
	for _, c := range workload {
		if c.cri.Pod != lastPod {
			fmt.Fprintf(out, "  pod %s/%s\n", c.cri.Namespace, c.cri.Pod)
			lastPod = c.cri.Pod
		}
		fmt.Fprintf(out, "    container %s (%.13s)\n", c.cri.Name, c.cri.ID)
		for _, p := range probes {
			value, err := p.read(ctx, sb, c)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("reporting on container %s: %w", c.cri.Name, ctx.Err())
				}
				value = "error: " + err.Error()
			}
			if value == "" {
				continue
			}
			fmt.Fprintf(out, "      %-13s %s\n", p.name+":", value)
		}
	}
	return nil
}

// cgroupPath shows where the container's cgroup is, below the kubelet's
// cgroup root: the QoS class is visible in it.
func cgroupPath(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	info, err := sb.CRI().Inspect(ctx, c.cri.ID)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(info.CgroupsPath, sb.CgroupRoot()+"/"), nil
}

// runtimeEnv are the variables the runtime itself sets when the image does
// not (HOME from the user's passwd entry, HOSTNAME).
var runtimeEnv = []string{"HOME", "HOSTNAME"}

// envAdded lists the variables in the container's environment that neither
// the manifest, the image nor the runtime set: what NRI plugins added.
func envAdded(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	env, err := sb.Environ(ctx, c.cri.ID)
	if err != nil {
		return "", err
	}
	imageEnv, err := sb.CRI().ImageEnv(ctx, c.spec.Image)
	if err != nil {
		return "", err
	}
	known := map[string]bool{}
	for _, name := range runtimeEnv {
		known[name] = true
	}
	for _, e := range c.spec.Env {
		known[e.Name] = true
	}
	for _, kv := range imageEnv {
		name, _, _ := strings.Cut(kv, "=")
		known[name] = true
	}
	var added []string
	for name, value := range env {
		if !known[name] {
			added = append(added, name+"="+value)
		}
	}
	if len(added) == 0 {
		return "none", nil
	}
	slices.Sort(added)
	return strings.Join(added, " "), nil
}

// cpusetInside shows the container's cpuset cgroup and the CPUs its init process
// may run on.
func cpusetInside(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	cpus, err := sb.ReadCgroup(ctx, c.cri.ID, sandbox.CPUSetCPUs)
	if err != nil {
		return "", err
	}
	status, err := sb.ProcStatus(ctx, c.cri.ID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (Cpus_allowed_list %s, Mems_allowed_list %s)", cpus, status["Cpus_allowed_list"], status["Mems_allowed_list"]), nil
}

// memoryLimit shows the container's memory cgroup limit.
func memoryLimit(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	raw, err := sb.ReadCgroup(ctx, c.cri.ID, sandbox.MemoryLimit)
	if err != nil {
		return "", err
	}
	return formatMemoryLimit(raw), nil
}

// formatMemoryLimit shows a cgroup memory limit in MiB; v2's "max" and v1's
// page-rounded maximum mean no limit.
func formatMemoryLimit(raw string) string {
	if raw == "max" {
		return "unlimited"
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return raw
	}
	if n >= 1<<62 {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}

// placementWait bounds the wait for a placement record: topology-aware
// writes its records behind its NRI handlers, so one may lag its container.
const placementWait = 5 * time.Second

// placement shows the pool, CPUs, memory nodes and reason that
// topology-aware published for the container (a shared container's cpusets
// are in its pool's record); nothing when topology-aware does not run.
func placement(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	if running, err := pluginRunning(sb, "topology-aware"); err != nil || !running {
		return "", err
	}
	placements, err := state.PlacementRecords(sb.SharedDir())
	if err != nil {
		return "", err
	}
	pools, err := state.PoolRecords(sb.SharedDir())
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, placementWait)
	defer cancel()
	for {
		rec, found, err := placements.Read(c.cri.ID)
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
			return fmt.Sprintf("%s pool, cpus %s, mems %s (%s)", rec.Pool, cpus, mems, rec.Reason), nil
		}
		select {
		case <-ctx.Done():
			return "not published by topology-aware", nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pluginRunning reports whether a plugin named name has published its
// status (as every plugin's runner does) in the sandbox's shared dir.
func pluginRunning(sb *sandbox.Sandbox, name string) (bool, error) {
	statuses, err := state.PluginStatuses(sb.SharedDir())
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
func devices(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	records, err := state.ContainerDeviceRecords(sb.SharedDir())
	if err != nil {
		return "", err
	}
	rec, found, err := records.Read(c.cri.ID)
	if err != nil || !found {
		return "", err
	}
	healthRecords, err := state.ContainerHealthRecords(sb.SharedDir())
	if err != nil {
		return "", err
	}
	health := map[string]state.Health{}
	if h, found, err := healthRecords.Read(c.cri.ID); err != nil {
		return "", err
	} else if found {
		for _, r := range h.Resources {
			health[r.ResourceID] = r.Health
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

// seccompModes names the Seccomp field of /proc/PID/status.
var seccompModes = map[string]string{"0": "disabled", "1": "strict", "2": "filter"}

// seccompMode shows whether the container's process runs under a seccomp
// filter, read inside it.
func seccompMode(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	status, err := sb.ProcStatus(ctx, c.cri.ID)
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

// statsListening starts the line the stats plugin logs when its own
// listener (/stats/pods, /metrics/cadvisor) serves.
const statsListening = "stats endpoints listening"

// usage shows the CPU time and memory working set the stats plugin reports
// for the container; nothing when the stats plugin does not run.
func usage(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	p := sb.PluginNamed("stats")
	if p == nil {
		return "", nil
	}
	addr := p.LoggedAddr(statsListening)
	if addr == "" {
		return "", fmt.Errorf("the stats plugin has not logged its stats address")
	}
	body, err := sandbox.HTTPGet(ctx, "http://"+addr+"/stats/pods")
	if err != nil {
		return "", err
	}
	var report statsReport
	if err := json.Unmarshal(body, &report); err != nil {
		return "", fmt.Errorf("decoding /stats/pods: %w", err)
	}
	for _, pod := range report.Pods {
		for _, ctr := range pod.Containers {
			if ctr.ID != c.cri.ID || ctr.Usage == nil || ctr.Usage.CPU == nil || ctr.Usage.Memory == nil {
				continue
			}
			return fmt.Sprintf("cpu %.3fs, working set %.1f MiB (stats plugin)",
				ctr.Usage.CPU.UsageSeconds, float64(ctr.Usage.Memory.WorkingSet)/(1<<20)), nil
		}
	}
	return "not reported by the stats plugin", nil
}

// maxCommandLen keeps a shown command line on one line.
const maxCommandLen = 90

// pid1Command shows the command line of the container's first process:
// sidecar-order's helper runs there in a sidecar, and has exec'd the
// original command in a main.
func pid1Command(ctx context.Context, sb *sandbox.Sandbox, c workloadContainer) (string, error) {
	raw, err := sb.ReadFile(ctx, c.cri.ID, "/proc/1/cmdline")
	if err != nil {
		return "", err
	}
	cmd := strings.Join(strings.Split(strings.TrimRight(raw, "\x00"), "\x00"), " ")
	if len(cmd) > maxCommandLen {
		cmd = cmd[:maxCommandLen-3] + "..."
	}
	return cmd, nil
}
