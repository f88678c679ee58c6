package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/plugins/sidecar-order/helper/helpertest"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			assert.Equal(t, "containerd", o.runtime)
			assert.Equal(t, "e2e/runtime/testdata/demo", o.workload)
			assert.False(t, o.once)
			assert.Empty(t, o.plugins)
		}},
		{name: "plugins and configs", args: []string{"--plugin", "bin/nri-a", "--plugin", "bin/nri-b", "--plugin-config", "a=a.yaml", "--once"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, []string{"bin/nri-a", "bin/nri-b"}, o.plugins)
				assert.Equal(t, map[string]string{"a": "a.yaml"}, o.configs)
				assert.True(t, o.once)
			}},
		{name: "config without file", args: []string{"--plugin-config", "a="}, wantErr: `flag --plugin-config "a=": expected NAME=FILE`},
		{name: "config without name", args: []string{"--plugin-config", "a.yaml"}, wantErr: `expected NAME=FILE`},
		{name: "stray argument", args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
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

func TestPluginSpecs(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "stats.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("interval: 1s\n"), 0o644))

	specs, err := pluginSpecs(options{
		plugins: []string{"/b/nri-stats", "/b/nri-e2e-test", "/b/nri-device-injector", "/b/custom"},
		configs: map[string]string{"stats": conf},
	})
	require.NoError(t, err)
	got := map[string]string{}
	for _, s := range specs {
		got[s.Name] = s.Idx
	}
	assert.Equal(t, map[string]string{"stats": "90", "e2e-test": "50", "device-injector": "10", "custom": "51"}, got)
	assert.Equal(t, "interval: 1s\n", string(specs[0].Config))
	args := map[string][]string{}
	for _, s := range specs {
		args[s.Name] = s.Args
	}
	assert.Equal(t, map[string][]string{"stats": {"--stats-addr", "127.0.0.1:0"}, "e2e-test": nil, "device-injector": nil, "custom": nil},
		args, "only stats has own flags here: its stats listener on a free port")
	specs, err = pluginSpecs(options{plugins: []string{"/b/nri-topology-aware"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"--state-dir", sandbox.PluginDir + "/state"}, specs[0].Args, "topology-aware's checkpoint stays in the run dir")

	_, err = pluginSpecs(options{plugins: []string{"/a/nri-x", "/b/nri-x"}})
	assert.ErrorContains(t, err, "plugin x given twice")
	_, err = pluginSpecs(options{plugins: []string{"/a/nri-x"}, configs: map[string]string{"y": conf}})
	assert.ErrorContains(t, err, "no --plugin named y")
	_, err = pluginSpecs(options{plugins: []string{"/a/nri-x"}, configs: map[string]string{"x": filepath.Join(dir, "missing")}})
	assert.ErrorContains(t, err, "reading configuration of plugin x")
}

func TestFormatMemoryLimit(t *testing.T) {
	tests := map[string]string{
		"max":                 "unlimited",
		"9223372036854771712": "unlimited",
		"67108864":            "67108864 bytes (64.0 MiB)",
		"garbage":             "garbage",
	}
	for raw, want := range tests {
		assert.Equal(t, want, formatMemoryLimit(raw), "formatMemoryLimit(%q)", raw)
	}
}

var runDirLine = regexp.MustCompile(`run dir (\S+),`)

// buildPlugin builds a plugin of the suite for the sandbox to connect.
func buildPlugin(t *testing.T, pkg, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := sandbox.BuildPlugin(ctx, pkg, t.TempDir(), name)
	require.NoError(t, err)
	return bin
}

// buildTestPlugin builds the test-only plugin.
func buildTestPlugin(t *testing.T) string {
	t.Helper()
	return buildPlugin(t, "./e2e/testplugin", "nri-e2e-test")
}

// What the report says of a container's CPUs: read inside it, and as
// topology-aware published them.
var (
	cpusetLine    = regexp.MustCompile(`(?m)^cpuset:\s+\S+ \(Cpus_allowed_list (\S+), Mems_allowed_list (\S+)\)$`)
	placementLine = regexp.MustCompile(`(?m)^placement:\s+(\w+) pool, cpus (\S+), mems (\S+) \(.+\)$`)
)

// `make run --once` with the suite's plugins and the test plugin: the report
// shows, for every demo container, the env the test plugin added, the cgroup
// values read inside, the placement topology-aware published, which
// matches the cpuset inside (the Guaranteed container's CPU is its own),
// the seccomp filter security applied, the demo device device-injector
// gave the app, the usage the stats plugin reports, and sidecar-order's
// helper in front of the sidecar. Nothing is left after, not even in the host's shared state.
func TestRunOnce(t *testing.T) {
	sandbox.RequirePrereqs(t, "containerd")
	plugins := []string{buildTestPlugin(t)}
	for _, name := range []string{"device-injector", "sidecar-order", "topology-aware", "security", "stats"} {
		plugins = append(plugins, buildPlugin(t, "./plugins/"+name, "nri-"+name))
		if name == "sidecar-order" { // it finds its helper next to itself
			helpertest.Build(t, filepath.Dir(plugins[len(plugins)-1]))
		}
	}
	hostStateDir := filepath.Join(state.DefaultDir, "topology-aware")
	_, err := os.Stat(hostStateDir)
	hostStateDirExisted := err == nil
	var out bytes.Buffer
	err = run(sandbox.TestContext(t), options{
		runtime: "containerd", baseDir: "/run", workload: "../../testdata/demo",
		plugins: plugins, configs: map[string]string{}, once: true,
		waitTimeout: 2 * time.Minute, logLevel: "info",
	}, &out)
	t.Log(out.String())
	require.NoError(t, err)

	report := out.String()
	m := runDirLine.FindStringSubmatch(report)
	require.NotNil(t, m, "the report names the run dir")
	assert.Empty(t, sandbox.LeftoversIn(m[1]))
	if !hostStateDirExisted {
		assert.NoDirExists(t, hostStateDir, "topology-aware's state stays in the run dir")
	}

	pods, err := sandbox.LoadPods("../../testdata/demo")
	require.NoError(t, err)
	cpusOf := map[string]cpuset.CPUSet{} // container -> CPUs inside it
	pools := map[string]string{}         // container -> published pool
	for _, pod := range pods {
		for _, c := range pod.Spec.Containers {
			section := containerSection(report, c.Name)
			require.NotEmpty(t, section, "report on container %s", c.Name)
			assert.Regexp(t, `(?m)^env added:\s+.*NRI_SUITE_E2E=e2e-test`, section)
			assert.Regexp(t, `(?m)^seccomp:\s+filter \(Seccomp: 2\)$`, section, "kubelet's default Unconfined became the runtime default")
			assert.Regexp(t, `(?m)^usage:\s+cpu \d+\.\d{3}s, working set \d+\.\d MiB \(stats plugin\)$`, section)
			if c.Name == "log-shipper" {
				assert.Regexp(t, `(?m)^pid 1:\s+/\.nri-sidecar-order/helper --role sidecar --container log-shipper -- sh -c `, section)
			} else {
				assert.Regexp(t, `(?m)^pid 1:\s+sh -c `, section, "a main's helper execs the original command, as PID 1")
			}
			if c.Name == "app" {
				assert.Regexp(t, `(?m)^env added:\s+NRI_SUITE_DEMO_DEVICE=null `, section)
				assert.Regexp(t, `(?m)^devices:\s+`+regexp.QuoteMeta(demoDevice)+` at /dev/demo-null \(no NUMA node, (Healthy|Unknown)\)$`, section)
			} else {
				assert.NotContains(t, section, "devices:")
			}
			assert.Regexp(t, `cgroup:\s+kubepods/`, section)
			if limit := c.Resources.Limits.Memory().Value(); limit > 0 {
				assert.Regexp(t, `(?m)^memory limit:\s+`+regexp.QuoteMeta(formatMemoryLimit(strconv.FormatInt(limit, 10)))+"$", section)
			} else {
				assert.Regexp(t, `(?m)^memory limit:\s+unlimited$`, section)
			}
			inside := cpusetLine.FindStringSubmatch(section)
			published := placementLine.FindStringSubmatch(section)
			require.NotNil(t, inside, "cpuset line of container %s", c.Name)
			require.NotNil(t, published, "placement line of container %s", c.Name)
			cpus := mustCPUSet(t, inside[1])
			assert.Equal(t, cpus.String(), mustCPUSet(t, published[2]).String(), "published CPUs and Cpus_allowed_list of %s", c.Name)
			assert.Equal(t, mustCPUSet(t, inside[2]).String(), mustCPUSet(t, published[3]).String(), "published mems and Mems_allowed_list of %s", c.Name)
			cpusOf[c.Name], pools[c.Name] = cpus, published[1]
		}
	}
	assert.Equal(t, map[string]string{"worker": "shared", "db": "exclusive", "app": "shared", "log-shipper": "shared"}, pools)
	assert.Equal(t, 1, cpusOf["db"].Size(), "the Guaranteed 1-CPU container's CPUs")
	for _, name := range []string{"worker", "app", "log-shipper"} {
		assert.True(t, cpusOf[name].Intersection(cpusOf["db"]).IsEmpty(), "%s runs on %s, which overlaps the exclusive %s", name, cpusOf[name], cpusOf["db"])
	}
}

func mustCPUSet(t *testing.T, list string) cpuset.CPUSet {
	t.Helper()
	s, err := cpuset.Parse(list)
	require.NoError(t, err)
	return s
}

// containerSection returns the report's lines on one container.
func containerSection(report, container string) string {
	var section []string
	in := false
	for _, line := range strings.Split(report, "\n") {
		switch {
		case strings.HasPrefix(line, "    container "):
			in = strings.HasPrefix(line, "    container "+container+" ")
		case !strings.HasPrefix(line, "      "):
			in = false
		case in:
			section = append(section, strings.TrimSpace(line))
		}
	}
	return strings.Join(section, "\n")
}

// startCommand builds and starts nri-sandbox as `make run` does, with extra
// args, and returns once it serves, with its run dir.
func startCommand(t *testing.T, args ...string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	plugin := buildTestPlugin(t)
	bin := filepath.Join(t.TempDir(), "nri-sandbox")
	ctx := sandbox.TestContext(t)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	cmd := exec.Command(bin, append([]string{"--workload", "../../testdata/demo", "--plugin", plugin}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = testLogWriter{t}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	runDir := ""
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "nri-sandbox ended before serving")
			t.Log(line)
			if m := runDirLine.FindStringSubmatch(line); m != nil {
				runDir = m[1]
			}
			if strings.HasPrefix(line, "serving;") {
				require.NotEmpty(t, runDir, "the run dir was printed")
				go func() {
					for range lines { // keep draining until the command ends
					}
				}()
				return cmd, runDir, exited
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

// SIGTERM ends `make run` with a clean teardown and exit status 0.
func TestSIGTERMTearsDown(t *testing.T) {
	sandbox.RequirePrereqs(t, "containerd")
	cmd, runDir, exited := startCommand(t)
	require.NotEmpty(t, sandbox.LeftoversIn(runDir), "the serving sandbox is seen")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("nri-sandbox did not exit after SIGTERM")
	}
	assert.Empty(t, sandbox.LeftoversIn(runDir))
}

// A sandbox whose owner was SIGKILLed leaves shims and containers (the
// daemons die with their parent); the next sweep removes all of it and puts
// the sysctls back. It must not share the host with another package's tests
// (the Makefile runs these packages with -p 1): a sandbox waiting for the host
// lock would take it at the SIGKILL and sweep first.
func TestSweepAfterSIGKILL(t *testing.T) {
	for _, rt := range sandbox.RuntimeNames() {
		t.Run(rt, func(t *testing.T) {
			sandbox.RequirePrereqs(t, rt)
			sysctls := readSysctls(t)
			hugetlb := hugetlbHierarchy(t)
			cmd, runDir, exited := startCommand(t, "--runtime", rt)
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-exited
			left := sandbox.LeftoversIn(runDir)
			assert.NotEmpty(t, left, "a killed owner leaves its containers behind")
			t.Logf("left by the killed sandbox: %q", left)

			log := logrus.New()
			log.SetOutput(testLogWriter{t})
			require.NoError(t, sandbox.SweepStale(sandbox.TestContext(t), "/run", log))
			assert.Empty(t, sandbox.LeftoversIn(runDir))
			assert.Equal(t, sysctls, readSysctls(t))
			assert.Equal(t, hugetlb, hugetlbHierarchy(t), "hugetlb's hierarchy (CRI-O's sandbox mounts a v1 one)")
		})
	}
}

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
