package simulate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology/description"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

func TestUsageErrors(t *testing.T) {
	sysfsDir := filepath.Join(fixtureDir(fixture12), "sysfs")
	desc := filepath.Join(fixtureDir(fixture12), "description.yaml")
	workload := filepath.Join(workloadDir, "basics.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"both machines", []string{"--sysfs", sysfsDir, "--topology", desc, "--workload", workload}, "exactly one of --sysfs DIR or --topology FILE"},
		{"no machine", []string{"--workload", workload}, "exactly one of --sysfs DIR or --topology FILE"},
		{"no workload", []string{"--sysfs", sysfsDir}, "--workload FILE is required"},
		{"unknown flag", []string{"--sysfs", sysfsDir, "--workload", workload, "--steps", "3"}, "flag provided but not defined: -steps"},
		{"stray argument", []string{"--sysfs", sysfsDir, "--workload", workload, "extra"}, `unexpected argument "extra"`},
		{"flag without value", []string{"--sysfs"}, "flag needs an argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			assert.Equal(t, ExitUsage, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

func TestHelp(t *testing.T) {
	stdout, stderr, code := runCLI(t, "-h")
	assert.Equal(t, ExitOK, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "usage: nri-topology-aware simulate --sysfs DIR | --topology FILE")
}

// TestFailures covers input that is well-formed on the command line but
// wrong: each fails with exit code 1, errors naming what is wrong and
// where, one a line, and no report.
func TestFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	sysfs12 := filepath.Join(fixtureDir(fixture12), "sysfs")
	pod := func(name string, extra string) string {
		return "    pod: {apiVersion: v1, kind: Pod, metadata: {name: " + name + "}, spec: {containers: [{name: c, image: x, resources: {limits: {cpu: '1', memory: 1Gi}}}]}}\n" + extra
	}
	// A machine without devices, as a description.
	topo, err := sysfs.Discover(sysfs12)
	require.NoError(t, err)
	plain, err := description.FromTopology(topo).Marshal()
	require.NoError(t, err)
	plainMachine := write("plain.yaml", string(plain))
	write("apps.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  template:\n    spec: {containers: [{name: c, image: x}]}\n")

	for _, tc := range []struct {
		name    string
		machine []string
		config  string // file content; "" for none
		steps   string
		want    [][]string // per line of stderr
	}{
		{"missing workload file", nil, "", "", [][]string{{"read workload", "missing.yaml"}}},
		{"missing sysfs tree", []string{"--sysfs", filepath.Join(dir, "no-sysfs")}, "", "- restart:\n", [][]string{{"--sysfs", "no-sysfs"}}},
		{"missing description", []string{"--topology", filepath.Join(dir, "no-topology.yaml")}, "", "- restart:\n", [][]string{{"--topology", "no-topology.yaml"}}},
		{"missing config", nil, "<missing>", "- restart:\n", [][]string{{"--config", "missing-config.yaml"}}},
		{"unknown config key", nil, "reserved-cpuz: 2\n", "- restart:\n", [][]string{{"config.yaml", `unknown key "reserved-cpuz"`}}},
		{"config outside the machine", nil, "reserved-cpus: \"200\"\n", "- restart:\n", [][]string{{"config.yaml", "200"}}},
		{"unknown step kind", nil, "", "- scale: {pod: a}\n", [][]string{{"workload.yaml:2:3: step 1", `unknown step kind "scale"`}}},
		{"malformed pod", nil, "", "- create:\n    pod: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n", [][]string{{"workload.yaml:3:10: step 1 (create)", "create.pod", "spec.containers is empty"}}},
		{"every problem of the workload file", nil, "", "- scale: {}\n- restart:\n- delete: {pod: ''}\n- create: {file: x.yaml, pod: {}}\n", [][]string{
			{"workload.yaml:2:3: step 1", `unknown step kind "scale"`},
			{"workload.yaml:4:17: step 3 (delete)", "delete.pod", "empty string"},
			{"workload.yaml:5:11: step 4 (create)", "exactly one of file"},
		}},
		{"resize of an unknown pod", nil, "", "- resize: {pod: ghost, container: c, resources: {limits: {cpu: '2'}}}\n", [][]string{{"workload.yaml:2:3: step 1 (resize)", "pod default/ghost does not exist"}}},
		{"resize of an unknown container", nil, "", "- create:\n" + pod("p", "") + "- resize: {pod: p, container: d, resources: {limits: {cpu: '2'}}}\n", [][]string{{"workload.yaml:4:3: step 2 (resize)", `no container "d"`, "expected one of c"}}},
		{"delete of an unknown pod", nil, "", "- delete: {pod: ghost, namespace: x}\n", [][]string{{"step 1", "pod x/ghost does not exist"}}},
		{"delete twice", nil, "", "- create:\n" + pod("p", "") + "- delete: {pod: p}\n- delete: {pod: p}\n", [][]string{{"workload.yaml:5:3: step 3", "pod default/p does not exist"}}},
		{"create twice", nil, "", "- create:\n" + pod("p", "") + "- create:\n" + pod("p", ""), [][]string{{"workload.yaml:5:10: step 2", "pod default/p already exists (created by step 1)"}}},
		{"a controller twice", nil, "", "- create: {file: apps.yaml}\n- create: {file: apps.yaml}\n", [][]string{{"apps.yaml:1:1: step 2 (create)", "Deployment default/web already exists (created by step 1)"}}},
		{"delete of an unknown controller", nil, "", "- create: {file: apps.yaml}\n- delete: {statefulset: web}\n", [][]string{{"workload.yaml:3:3: step 2 (delete)", "StatefulSet default/web does not exist"}}},
		{"device on no node", nil, "", "- create:\n" + pod("p", "    devices: {c: [{numa-node: 7}]}\n"), [][]string{{"step 1", "create.devices.c[0]", "numa-node 7", "nodes 0-1"}}},
		{"device not in sysfs", nil, "", "- create:\n" + pod("p", "    devices: {c: [{char: '195:9'}]}\n"), [][]string{{"step 1", "create.devices.c[0]", "195:9", "not found"}}},
		{"device on a machine without devices", []string{"--topology", plainMachine}, "", "- create:\n" + pod("p", "    devices: {c: [{char: '240:0'}]}\n"), [][]string{{"step 1", "char 240:0", "has no devices"}}},
		{"every problem of the run", nil, "", "- create:\n" + pod("p", "    devices: {c: [{numa-node: 7}]}\n") + "- delete: {pod: q}\n- resize: {pod: p, container: x, resources: {limits: {cpu: '2'}}}\n", [][]string{
			{"workload.yaml:2:3: step 1 (create)", "numa-node 7"},
			{"workload.yaml:5:3: step 2 (delete)", "pod default/q does not exist"},
			{"workload.yaml:6:3: step 3 (resize)", `no container "x"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			machine := tc.machine
			if machine == nil {
				machine = []string{"--sysfs", sysfs12}
			}
			args := append([]string{}, machine...)
			workload := filepath.Join(dir, "missing.yaml")
			if tc.steps != "" {
				workload = write("workload.yaml", "steps:\n"+tc.steps)
			}
			args = append(args, "--workload", workload)
			switch tc.config {
			case "":
			case "<missing>":
				args = append(args, "--config", filepath.Join(dir, "missing-config.yaml"))
			default:
				args = append(args, "--config", write("config.yaml", tc.config))
			}
			stdout, stderr, code := runCLI(t, args...)
			assert.Equal(t, ExitFailure, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			require.Len(t, lines, len(tc.want), "one problem a line: %s", stderr)
			for i, want := range tc.want {
				for _, w := range want {
					assert.Contains(t, lines[i], w)
				}
			}
		})
	}
}

// TestRefusalsAreResults: what the policy or the API server refuses is
// reported, with the run succeeding; the state is unchanged by a refusal.
func TestRefusalsAreResults(t *testing.T) {
	dir := t.TempDir()
	workload := filepath.Join(dir, "workload.yaml")
	require.NoError(t, os.WriteFile(workload, []byte(`steps:
- create:
    pod:
      apiVersion: v1
      kind: Pod
      metadata:
        name: p
        annotations: {cpu.nri-suite.io: exclusive-please}
      spec:
        containers: [{name: c, image: x, resources: {limits: {cpu: "1", memory: 1Gi}}}]
- create:
    pod:
      apiVersion: v1
      kind: Pod
      metadata: {name: q}
      spec:
        initContainers: [{name: init, image: x, resources: {limits: {cpu: "64", memory: 1Gi}}}]
        containers: [{name: c, image: x, resources: {limits: {cpu: "1", memory: 1Gi}}}]
- create:
    pod:
      apiVersion: v1
      kind: Pod
      metadata: {name: g}
      spec:
        containers: [{name: c, image: x, resources: {limits: {cpu: "2", memory: 1Gi, hugepages-16Gi: 16Gi}}}]
- create:
    pod:
      apiVersion: v1
      kind: Pod
      metadata: {name: r}
      spec:
        containers: [{name: c, image: x, resources: {limits: {cpu: "2", memory: 1Gi}}}]
- resize: {pod: r, container: c, resources: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "2", memory: 1Gi}}}
- resize: {pod: r, container: c, resources: {limits: {cpu: "40", memory: 1Gi}}}
- resize: {pod: q, container: c, resources: {limits: {cpu: "2", memory: 1Gi}}}
`), 0o600))
	stdout, stderr, code := runCLI(t, "--sysfs", filepath.Join(fixtureDir(fixture12), "sysfs"), "--workload", workload)
	require.Equal(t, ExitOK, code, stderr)
	r := decodeReport(t, stdout)
	require.Len(t, r.Steps, 7)
	rejected(t, r.Steps[0], "default/p/c", `"exclusive-please"`)
	rejected(t, r.Steps[1], "default/q/init", "64")
	rejected(t, r.Steps[1], "default/q/c", "init container init was refused")
	rejected(t, r.Steps[2], "default/g/c", "hugepages-16Gi")
	rejected(t, r.Steps[4], "default/r/c", "QoS class from Guaranteed to Burstable")
	rejected(t, r.Steps[5], "default/r/c", "insufficient CPUs")
	rejected(t, r.Steps[6], "default/q/c", "creation was refused")
	for i := 4; i < 7; i++ {
		assert.Equal(t, r.Running[3], r.Running[i], "step %d: a refused resize keeps the old placement", i+1)
	}
	assert.Equal(t, 7, r.Final.Refusals)
	topo, err := sysfs.Discover(filepath.Join(fixtureDir(fixture12), "sysfs"))
	require.NoError(t, err)
	checkReport(t, topo, r)
}

// TestSummary: a line per step and per container changed, the use of
// every NUMA node at the peak and at the end, and the warnings.
func TestSummary(t *testing.T) {
	c := goldenCases[len(goldenCases)-1] // controllers: warnings, a peak
	stdout, stderr, code := runCLI(t, append(c.args(), "--summary")...)
	require.Equal(t, ExitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	assert.True(t, strings.HasPrefix(lines[0], "machine: sysfs "), lines[0])
	assert.Contains(t, stdout, "step 1 ("+filepath.Join(workloadDir, "controllers.yaml")+":7:3) create Deployment shop/web, StatefulSet shop/db: 5 running")
	assert.Contains(t, stdout, "  created  shop/db-0/db: exclusive cpus ")
	assert.Contains(t, stdout, "  WARNING  the shared pool is overcommitted: 7 containers request 17.5 CPUs on 6 CPUs")
	assert.Contains(t, stdout, "  restart: 10 kept, 0 moved")
	assert.Contains(t, stdout, "  followed 7 shared containers to the shared pool")

	r := decodeReport(t, mustRun(t, c.args()...))
	peak := "at the peak, after step " + strconv.Itoa(r.Final.Peak.Step) + " ("
	require.Contains(t, stdout, peak)
	// The tables: a row per node, and the sums. At the peak (db-1 resized
	// to 3 CPUs, one of them on node 1): 5 CPUs granted, 5 in the shared
	// pool, 19 requested of the shared and reserved pools.
	table := stdout[strings.Index(stdout, peak):]
	rows := strings.Split(table, "\n")[1:5]
	assert.Equal(t, []string{"node", "CPUs", "exclusive", "shared", "pool", "requested", "free", "CPUs", "memory", "free", "memory"}, strings.Fields(rows[0]))
	for i, want := range [][]string{{"0", "6", "4", "2", "8.5", "0"}, {"1", "6", "1", "3", "10.5", "5"}, {"all", "12", "5", "5", "19", "5"}} {
		assert.Equal(t, want, strings.Fields(rows[i+1])[:len(want)], "row %d", i+1)
	}
	assert.Contains(t, stdout, "\nat the end, after step 7: shared cpus ")
	assert.Contains(t, stdout, "warnings:\n  the shared pool was most overcommitted after step 3 ")
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "containers: reserved 1, shared 3; 0 refused during the run"), lines[len(lines)-1])
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, args...)
	require.Equal(t, ExitOK, code, stderr)
	return stdout
}
