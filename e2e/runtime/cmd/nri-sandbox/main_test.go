package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			assert.Equal(t, options{runtime: "containerd", baseDir: "/run", images: "_out/images", chart: suite.ChartDir,
				workload: "e2e/runtime/testdata/demo", waitTimeout: 5 * time.Minute, logLevel: "info"}, o)
		}},
		{name: "make run's", args: []string{"--images", "i", "--kubeconfig-link", "_out/kubeconfig", "--kubectl-script", "bin/kubectl", "--once"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, "i", o.images)
				assert.Equal(t, "_out/kubeconfig", o.kubeconfigLink)
				assert.Equal(t, "bin/kubectl", o.kubectlScript)
				assert.True(t, o.once)
			}},
		{name: "stray argument", args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]`},
		{name: "unknown flag", args: []string{"--plugin", "bin/nri-stats"}, wantErr: "flag provided but not defined: -plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, o)
		})
	}
}

func TestParseReportFlags(t *testing.T) {
	o, err := parseReportFlags([]string{"--kubeconfig", "k", "--pod", "kube-system/coredns"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, reportOptions{kubeconfig: "k", namespace: "kube-system", pod: "coredns",
		sharedDir: state.DefaultDir, suiteNamespace: suite.Release}, o)
	o, err = parseReportFlags([]string{"--kubeconfig", "k", "--pod", "db"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "default", o.namespace, "a bare name is in namespace default")

	for args, wantErr := range map[string]string{
		"--pod db":                     "flag --kubeconfig is empty",
		"--kubeconfig k":               `flag --pod: "": expected NAMESPACE/NAME or NAME`,
		"--kubeconfig k --pod /db":     `flag --pod: "/db"`,
		"--kubeconfig k --pod ns/":     `flag --pod: "ns/"`,
		"--kubeconfig k --pod a/b/c":   `flag --pod: "a/b/c"`,
		"--kubeconfig k --pod db more": `unexpected arguments ["more"]`,
	} {
		_, err := parseReportFlags(strings.Fields(args), io.Discard)
		assert.ErrorContains(t, err, wantErr, "args %q", args)
	}
}

const podManifest = `apiVersion: v1
kind: Pod
metadata:
  name: db
spec:
  containers:
    - name: db
      image: x
`

func TestDecodeManifest(t *testing.T) {
	m, err := decodeManifest([]byte(podManifest))
	require.NoError(t, err)
	assert.Equal(t, "Pod", m.kind)
	assert.Equal(t, "default/db", m.namespace+"/"+m.name, "namespace default when unset")
	assert.Nil(t, m.selector, "a Pod is got by name")
	assert.Equal(t, "db", m.pod.Spec.Containers[0].Name)

	m, err = decodeManifest([]byte(`apiVersion: batch/v1
kind: Job
metadata: {name: batch, namespace: jobs}
spec:
  template:
    metadata: {annotations: {a: b}}
    spec: {restartPolicy: Never, containers: [{name: worker, image: x}]}
`))
	require.NoError(t, err)
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/job-name": "batch"}}, m.selector)
	assert.Equal(t, "b", m.pod.Annotations["a"], "the pod is the template's")
	assert.Equal(t, "jobs", m.namespace)

	m, err = decodeManifest([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: x}]}
`))
	require.NoError(t, err)
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, m.selector)

	for _, tt := range []struct{ manifest, wantErr string }{
		{strings.Replace(podManifest, "kind: Pod", "kind: Service", 1), `apiVersion "v1" kind "Service": expected a v1 Pod, an apps/v1 Deployment or a batch/v1 Job`},
		{podManifest + "  hostNetwrok: true\n", `decoding Pod: error unmarshaling JSON: while decoding JSON: json: unknown field "hostNetwrok"`},
		{strings.Replace(podManifest, "name: db\nspec", "labels: {}\nspec", 1), "Pod: metadata.name is empty"},
		{"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n", "Job j: no containers"},
		{"{", "decoding manifest"},
	} {
		_, err := decodeManifest([]byte(tt.manifest))
		assert.ErrorContains(t, err, tt.wantErr, "manifest %q", tt.manifest)
	}
}

// The demo shows every plugin at work on what a cluster runs: a Deployment
// (Burstable) with the demo device and an ordered sidecar, a Guaranteed pod
// for an exclusive CPU, and a Job (BestEffort) whose native sidecar
// sidecar-order stops after the main; all from local images only.
func TestDemoWorkload(t *testing.T) {
	workload, err := loadWorkload("../../testdata/demo")
	require.NoError(t, err)
	classes := map[string]corev1.PodQOSClass{}
	for _, m := range workload {
		classes[m.kind+" "+m.name] = kubepod.QOSClass(m.pod)
		for _, c := range append(m.pod.Spec.InitContainers, m.pod.Spec.Containers...) {
			assert.Equal(t, sandbox.BusyboxImage, c.Image, "%s: container %s", m.describe(), c.Name)
			assert.Equal(t, corev1.PullNever, c.ImagePullPolicy, "%s: container %s", m.describe(), c.Name)
		}
	}
	assert.Equal(t, map[string]corev1.PodQOSClass{"Job batch": corev1.PodQOSBestEffort, "Pod db": corev1.PodQOSGuaranteed,
		"Deployment web": corev1.PodQOSBurstable}, classes)

	job := workload[0]
	require.Equal(t, "Job", job.kind, "in file name order")
	require.Len(t, job.pod.Spec.InitContainers, 1)
	sidecar := job.pod.Spec.InitContainers[0]
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *sidecar.RestartPolicy, "a native sidecar")
	assert.Equal(t, sidecar.Name, job.pod.Annotations["sidecar-order.nri-suite.io/sidecars"])
	assert.Equal(t, corev1.RestartPolicyNever, job.pod.Spec.RestartPolicy, "the pod completes")

	_, err = loadWorkload(t.TempDir())
	assert.ErrorContains(t, err, "no *.yaml in")
}

func TestKubectlScript(t *testing.T) {
	assert.Equal(t, "#!/bin/sh\n# Written by nri-sandbox (make run): kubectl of its cluster, while it serves.\n"+
		`exec '/c/bin/kubectl' --kubeconfig '/it'\''s/kubeconfig' "$@"`+"\n",
		kubectlScript("/c/bin/kubectl", "/it's/kubeconfig"))
	out, err := exec.Command("sh", "-c", "echo "+shellQuote(`a 'b' $c "d"`)).Output()
	require.NoError(t, err)
	assert.Equal(t, `a 'b' $c "d"`+"\n", string(out))
}

func TestFormatState(t *testing.T) {
	at := func(s string) metav1.Time {
		tm, err := time.Parse(time.RFC3339, "2026-01-02T"+s+"Z")
		require.NoError(t, err)
		return metav1.NewTime(tm)
	}
	tests := map[string]corev1.ContainerStatus{
		"running since 10:00:01": {State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at("10:00:01")}}},
		"exited 0 (Completed), ran 10:00:01 to 10:00:03, 2 restarts": {RestartCount: 2, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: at("10:00:01"), FinishedAt: at("10:00:03")}}},
		"waiting: CreateContainerError refused": {State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerError", Message: "refused"}}},
		"waiting: PodInitializing": {State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}},
		"not created yet":          {},
	}
	for want, st := range tests {
		assert.Equal(t, want, formatState(st))
	}
}

func TestTargets(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "app"}},
		},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", ContainerID: "containerd://abc",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "cri-o://def"}},
		},
	}
	var got []string
	for _, c := range targets(pod) {
		got = append(got, strings.Join([]string{c.name, c.role, c.id, map[bool]string{true: "running"}[c.running]}, "|"))
	}
	assert.Equal(t, []string{"setup|init||", "proxy|native sidecar|abc|running", "app||def|"}, got)
}

func TestUnschedulable(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}}
	assert.Equal(t, "Unschedulable 0/1 nodes are available: 1 Insufficient cpu.", unschedulable(pod))
	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	assert.Equal(t, "", unschedulable(pod))
}

func TestHelperLines(t *testing.T) {
	log := "nri-sidecar-helper: proxy: ready (process)\n" +
		"the sidecar's own output\n" +
		"nri-sidecar-helper: other: not this container's\n" +
		"nri-sidecar-helper: proxy: every main container has exited; stopping in order\n"
	lines, err := helperLines(strings.NewReader(log), "proxy")
	require.NoError(t, err)
	assert.Equal(t, []string{"ready (process)", "every main container has exited; stopping in order"}, lines)
}

func TestFormatUsage(t *testing.T) {
	body := []byte(`{"pods":[{"containers":[{"id":"other"},{"id":"abc","usage":{"cpu":{"usageSeconds":1.5},"memory":{"workingSetBytes":1048576}}}]}]}`)
	got, err := formatUsage(body, "abc")
	require.NoError(t, err)
	assert.Equal(t, "cpu 1.500s, working set 1.0 MiB (stats plugin)", got)
	got, err = formatUsage(body, "other")
	require.NoError(t, err)
	assert.Equal(t, "not reported by the stats plugin", got, "a container without usage yet")
	_, err = formatUsage([]byte("<html>"), "abc")
	assert.ErrorContains(t, err, "decoding /stats/pods")
}

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../../.."

// images are the plugin images, built once for the package's tests.
var images struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if images.dir != "" {
		os.RemoveAll(images.dir)
	}
	os.Exit(code)
}

// imagesDir runs `make images` once and returns the directory it wrote.
func imagesDir(t *testing.T) string {
	t.Helper()
	images.once.Do(func() {
		if images.dir, images.err = os.MkdirTemp("", "nri-suite-images-"); images.err == nil {
			_, images.err = suite.BuildImages(sandbox.TestContext(t), repoRoot, images.dir)
		}
	})
	require.NoError(t, images.err)
	return images.dir
}

var runDirLine = regexp.MustCompile(`run dir (\S+),`)

// What the report says of a container's CPUs: read inside it, and as
// topology-aware published them.
var (
	cpusLine      = regexp.MustCompile(`(?m)^cpus:\s+(\S+), memory nodes (\S+) \(/proc/1/status\)$`)
	placementLine = regexp.MustCompile(`(?m)^placement:\s+(\w+) pool, cpus (\S+), memory nodes (\S+) \(.+\)$`)
)

// checkReport checks what the report of `make run` says of each plugin's
// effect on the demo's pods: the demo device device-injector gave the app;
// sidecar-order's helper in front of web's sidecar and, in the Job, the
// native sidecar stopped by its helper after the main, so that the Job
// completed; the placements topology-aware published, matching the CPUs
// inside, with the Guaranteed pod's CPU its own; the seccomp filter
// security applied; the usage the stats plugin reports.
func checkReport(t *testing.T, report string) {
	t.Helper()
	pods := parseReport(report)
	web, db, batch := podNamed(t, pods, "default/web-"), podNamed(t, pods, "default/db"), podNamed(t, pods, "default/batch-")
	assert.Contains(t, web[""], "Burstable, Running")
	assert.Contains(t, db[""], "Guaranteed, Running")
	assert.Contains(t, batch[""], "Job batch: Complete, BestEffort, Succeeded")

	cpusOf := map[string]cpuset.CPUSet{} // running container -> CPUs inside it
	pools := map[string]string{}         // running container -> published pool
	for pod, containers := range map[string]map[string]string{"web": web, "db": db} {
		for name, section := range containers {
			if name == "" {
				continue
			}
			name = pod + "/" + name
			assert.Regexp(t, `(?m)^state:\s+running since `, section, name)
			assert.Regexp(t, `(?m)^seccomp:\s+filter \(Seccomp: 2\)$`, section, "%s: the kubelet's default Unconfined became the runtime default", name)
			assert.Regexp(t, `(?m)^usage:\s+cpu \d+\.\d{3}s, working set \d+\.\d MiB \(stats plugin\)$`, section, name)
			inside := cpusLine.FindStringSubmatch(section)
			published := placementLine.FindStringSubmatch(section)
			require.NotNil(t, inside, "cpus line of %s", name)
			require.NotNil(t, published, "placement line of %s", name)
			cpus := mustCPUSet(t, inside[1])
			assert.Equal(t, cpus.String(), mustCPUSet(t, published[2]).String(), "published CPUs and Cpus_allowed_list of %s", name)
			assert.Equal(t, mustCPUSet(t, inside[2]).String(), mustCPUSet(t, published[3]).String(), "published memory nodes and Mems_allowed_list of %s", name)
			cpusOf[name], pools[name] = cpus, published[1]
		}
	}
	assert.Equal(t, map[string]string{"web/app": "shared", "web/log-shipper": "shared", "db/db": "exclusive"}, pools)
	assert.Equal(t, 1, cpusOf["db/db"].Size(), "the Guaranteed 1-CPU container's CPUs")
	for _, name := range []string{"web/app", "web/log-shipper"} {
		assert.True(t, cpusOf[name].Intersection(cpusOf["db/db"]).IsEmpty(), "%s runs on %s, which overlaps the exclusive %s", name, cpusOf[name], cpusOf["db/db"])
	}

	assert.Regexp(t, `(?m)^devices:\s+`+regexp.QuoteMeta(demoDevice)+` at /dev/demo-null \(no NUMA node, (Healthy|Unknown)\)$`, web["app"])
	assert.NotContains(t, web["log-shipper"], "devices:")
	assert.Regexp(t, `(?m)^pid 1:\s+sh -c `, web["app"], "a main's helper execs the original command, as PID 1")
	assert.Regexp(t, `(?m)^pid 1:\s+/\.nri-sidecar-order/helper --role sidecar --container log-shipper -- sh -c `, web["log-shipper"])
	assert.Regexp(t, `(?m)^sidecar-order:\s+ready \(process\)$`, web["log-shipper"])

	assert.Regexp(t, `(?m)^state:\s+exited 0 \(Completed\)`, batch["worker"])
	shipper := batch["log-shipper (native sidecar)"]
	assert.Regexp(t, `(?m)^state:\s+exited 0 \(Completed\)`, shipper)
	assert.Regexp(t, `(?m)^sidecar-order:\s+ready \(process\); .*sending SIGTERM to the sidecar`, shipper,
		"the helper stopped the native sidecar once the main had exited")
}

func mustCPUSet(t *testing.T, list string) cpuset.CPUSet {
	t.Helper()
	s, err := cpuset.Parse(list)
	require.NoError(t, err)
	return s
}

// parseReport splits the report into pods ("namespace/name") and their
// containers ("name", or "name (role)"), each the section's lines trimmed;
// a pod's "" is its header's summary.
func parseReport(report string) map[string]map[string]string {
	pods := map[string]map[string]string{}
	var pod map[string]string
	container := ""
	for _, line := range strings.Split(report, "\n") {
		switch {
		case strings.HasPrefix(line, "  pod "):
			name, summary, _ := strings.Cut(strings.TrimPrefix(line, "  pod "), " ")
			pod = map[string]string{"": summary}
			pods[name] = pod
		case pod != nil && strings.HasPrefix(line, "    container "):
			container = containerKey(strings.TrimPrefix(line, "    container "))
		case pod != nil && strings.HasPrefix(line, "      "):
			pod[container] += strings.TrimSpace(line) + "\n"
		default:
			pod = nil
		}
	}
	return pods
}

// headerID is the container id at the end of a container's header.
var headerID = regexp.MustCompile(` [0-9a-f]{13}$`)

// containerKey drops the container id from a container's header.
func containerKey(header string) string { return headerID.ReplaceAllString(header, "") }

// podNamed returns the one pod of the report whose name starts with prefix.
func podNamed(t *testing.T, pods map[string]map[string]string, prefix string) map[string]string {
	t.Helper()
	var found map[string]string
	for name, pod := range pods {
		if strings.HasPrefix(name, prefix) {
			require.Nil(t, found, "one pod named %s*", prefix)
			found = pod
		}
	}
	require.NotNil(t, found, "a pod named %s* in the report", prefix)
	return found
}

// buildCommand builds nri-sandbox as `make run` runs it.
func buildCommand(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nri-sandbox")
	build := exec.CommandContext(sandbox.TestContext(t), "go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

// startCommand starts nri-sandbox with args (after the demo's, which they
// may override) and returns once it serves,
// with its run dir and what it printed until then (the report).
func startCommand(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, runDir, printed string, exited <-chan error) {
	t.Helper()
	ctx := sandbox.TestContext(t)
	cmd = exec.Command(bin, append([]string{"--images", imagesDir(t), "--chart", filepath.Join(repoRoot, suite.ChartDir),
		"--workload", "../../testdata/demo", "--wait", "8m"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = testLogWriter{t}
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	lines := make(chan string)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
		done <- cmd.Wait()
	}()
	var out strings.Builder
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "nri-sandbox ended before serving")
			t.Log(line)
			out.WriteString(line + "\n")
			if m := runDirLine.FindStringSubmatch(line); m != nil {
				runDir = m[1]
			}
			if strings.HasPrefix(line, "serving;") {
				require.NotEmpty(t, runDir, "the run dir was printed")
				go func() {
					for range lines { // keep draining until the command ends
					}
				}()
				return cmd, runDir, out.String(), done
			}
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatal("nri-sandbox did not start serving in time")
		}
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// `make run`: the suite installed with the chart, the demo applied through
// the API, and a report of each plugin's effect on the demo's pods
// (checkReport). While it serves, the kubectl script it wrote reaches the
// cluster from the host, and `nri-sandbox report` reports on one pod;
// SIGTERM then ends it with a clean teardown and exit status 0: nothing is
// left, not even in the host's shared state, and the script and the
// kubeconfig link are gone with the cluster.
func TestServe(t *testing.T) {
	sandbox.RequireClusterPrereqs(t, "containerd")
	_, err := os.Stat(state.DefaultDir)
	sharedDirExisted := err == nil
	bin := buildCommand(t)
	access := t.TempDir()
	kubeconfig, kubectl := filepath.Join(access, "kubeconfig"), filepath.Join(access, "kubectl")
	cmd, runDir, report, exited := startCommand(t, bin, "--kubeconfig-link", kubeconfig, "--kubectl-script", kubectl)
	require.NotEmpty(t, sandbox.LeftoversIn(runDir), "the serving sandbox is seen")
	assert.Contains(t, report, "kubectl     "+kubectl+" get pods -A", "the usage names the kubectl script")
	checkReport(t, report)

	ctx := sandbox.TestContext(t)
	out, err := exec.CommandContext(ctx, kubectl, "get", "pod", "db", "-o", "jsonpath={.status.phase}").CombinedOutput()
	require.NoError(t, err, "the kubectl script: %s", out)
	assert.Equal(t, "Running", string(out))
	out, err = exec.CommandContext(ctx, bin, "report", "--kubeconfig", kubeconfig, "--pod", "default/db").CombinedOutput()
	require.NoError(t, err, "nri-sandbox report: %s", out)
	t.Logf("nri-sandbox report:\n%s", out)
	db := parseReport("workload:\n" + string(out))["default/db"]
	require.NotNil(t, db, "the report is on pod default/db")
	assert.Regexp(t, `(?m)^placement:\s+exclusive pool, cpus \d+, `, db["db"])
	assert.Regexp(t, `(?m)^seccomp:\s+filter `, db["db"])
	out, err = exec.CommandContext(ctx, bin, "report", "--kubeconfig", kubeconfig, "--pod", "default/nope").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), `getting pod default/nope: pods "nope" not found`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("nri-sandbox did not exit after SIGTERM")
	}
	assert.Empty(t, sandbox.LeftoversIn(runDir))
	if !sharedDirExisted {
		assert.NoDirExists(t, state.DefaultDir, "the plugins' shared state goes with the sandbox")
	}
	assert.NoFileExists(t, kubeconfig, "the kubeconfig link goes with the cluster")
	assert.NoFileExists(t, kubectl, "the kubectl script goes with the cluster")
}

// A sandbox whose owner was SIGKILLed leaves shims, containers and the
// cluster's network namespace (the daemons die with their parent); the
// next sweep removes all of it and puts the sysctls back. It must not
// share the host with another package's tests (the Makefile runs these
// packages with -p 1): a sandbox waiting for the host lock would take it at
// the SIGKILL and sweep first.
func TestSweepAfterSIGKILL(t *testing.T) {
	parent, bin := t, ""
	for _, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) {
			sandbox.RequireClusterPrereqs(t, rt)
			if bin == "" {
				bin = buildCommand(parent) // for every runtime's subtest
			}
			log := logrus.New()
			log.SetOutput(testLogWriter{t})
			// The host's own values, not those of another sandbox on the
			// host: SweepStale returns once none is alive.
			require.NoError(t, sandbox.SweepStale(sandbox.TestContext(t), "/run", log))
			sysctls := readSysctls(t)
			hugetlb := hugetlbHierarchy(t)
			// One pod is enough to leave behind; the demo's would only cost time.
			workload := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(workload, "idle.yaml"), []byte(idlePod), 0o644))
			cmd, runDir, _, exited := startCommand(t, bin, "--runtime", rt, "--workload", workload)
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-exited
			left := sandbox.LeftoversIn(runDir)
			assert.NotEmpty(t, left, "a killed owner leaves its containers behind")
			t.Logf("left by the killed sandbox: %q", left)

			require.NoError(t, sandbox.SweepStale(sandbox.TestContext(t), "/run", log))
			assert.Empty(t, sandbox.LeftoversIn(runDir))
			assert.Equal(t, sysctls, readSysctls(t))
			assert.Equal(t, hugetlb, hugetlbHierarchy(t), "hugetlb's hierarchy (CRI-O's sandbox mounts a v1 one)")
		})
	}
}

// idlePod is the workload of TestSweepAfterSIGKILL.
const idlePod = `apiVersion: v1
kind: Pod
metadata: {name: idle, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: idle
      image: localhost/nri-suite/busybox:latest
      imagePullPolicy: Never
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"]
`

// hugetlbHierarchy returns hugetlb's hierarchy id in /proc/cgroups; 0
// while it is on the v2 side.
func hugetlbHierarchy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/cgroups")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) == 4 && fields[0] == "hugetlb" {
			return fields[1]
		}
	}
	return ""
}

func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"} {
		data, err := os.ReadFile(filepath.Join("/proc/sys", name))
		require.NoError(t, err)
		out[name] = strings.TrimSpace(string(data))
	}
	return out
}
