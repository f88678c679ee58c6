package simulate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/workloads/golden")

const workloadDir = "../testdata/workloads"

// The topology fixtures, by CPU count.
const (
	fixture12  = "smt-2s-12c-interleaved"
	fixture80  = "snc-2s-4n-80c"
	fixture256 = "nps4-2s-12n-256c-cpuless"
)

func fixtureDir(name string) string {
	return filepath.Join("..", "..", "..", "common", "topology", "testdata", name)
}

// goldenCase is a workload run on a fixture with a configuration; check
// asserts what the workload is about, beyond the invariants every report
// must satisfy (checkReport).
type goldenCase struct {
	workload, fixture, config string
	check                     func(t *testing.T, topo *topology.Topology, r *Report)
}

func (c goldenCase) name() string { return c.workload + "." + c.fixture }

func (c goldenCase) args() []string {
	return []string{
		"--sysfs", filepath.Join(fixtureDir(c.fixture), "sysfs"),
		"--config", filepath.Join(workloadDir, c.config+".yaml"),
		"--workload", filepath.Join(workloadDir, c.workload+".yaml"),
	}
}

func (c goldenCase) golden() string {
	return filepath.Join(workloadDir, "golden", c.name()+".json")
}

var goldenCases = []goldenCase{
	{"basics", fixture12, "config-reserved", checkBasics(true)},
	{"basics", fixture80, "config-reserved", checkBasics(false)},
	{"basics", fixture256, "config-reserved", checkBasics(false)},
	{"devices", fixture80, "config-single-numa", checkDevices},
	{"numa-nodes", fixture256, "config-full-cores", checkNUMANodes},
	{"pod-scope", fixture80, "config-pod-scope", checkPodScope},
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name(), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, c.args()...)
			require.Equal(t, ExitOK, code, "stderr: %s", stderr)
			require.Empty(t, stderr)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(c.golden()), 0o755))
				require.NoError(t, os.WriteFile(c.golden(), []byte(stdout), 0o644))
			}
			want, err := os.ReadFile(c.golden())
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), stdout, "output differs from %s (run with -update after checking the difference)", c.golden())

			report := decodeReport(t, stdout)
			topo, err := sysfs.Discover(filepath.Join(fixtureDir(c.fixture), "sysfs"))
			require.NoError(t, err)
			checkReport(t, topo, report)
			c.check(t, topo, report)
		})
	}
}

// TestDeterministic runs every golden case again in one process: the same
// input must give the same bytes.
func TestDeterministic(t *testing.T) {
	for _, c := range goldenCases {
		first, _, code := runCLI(t, c.args()...)
		require.Equal(t, ExitOK, code)
		second, _, _ := runCLI(t, c.args()...)
		assert.Equal(t, first, second, c.name())
	}
}

// TestTopologyDescriptionMatchesSysfs runs a workload on a fixture's
// description (whose devices are rendered into a temporary sysfs tree, which
// must be gone afterwards) and on its sysfs tree: only the source differs.
func TestTopologyDescriptionMatchesSysfs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := goldenCase{workload: "devices", fixture: fixture80, config: "config-single-numa"}
	fromSysfs, _, code := runCLI(t, c.args()...)
	require.Equal(t, ExitOK, code)
	args := c.args()
	args[0], args[1] = "--topology", filepath.Join(fixtureDir(c.fixture), "description.yaml")
	fromDescription, stderr, code := runCLI(t, args...)
	require.Equal(t, ExitOK, code, stderr)

	a, b := decodeReport(t, fromSysfs), decodeReport(t, fromDescription)
	assert.True(t, strings.HasPrefix(b.Machine.Source, "topology "), b.Machine.Source)
	a.Machine.Source, b.Machine.Source = "", ""
	assert.Equal(t, a, b)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the rendered sysfs tree must be removed")
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func decodeReport(t *testing.T, out string) *Report {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var r Report
	require.NoError(t, dec.Decode(&r))
	return &r
}

func parse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	require.NoError(t, err, "cpuset %q", s)
	return set
}

// checkReport asserts what must hold of every report, whatever the
// workload: the policy's rules as seen from outside.
func checkReport(t *testing.T, topo *topology.Topology, r *Report) {
	t.Helper()
	var previous []ContainerPlacement
	for _, s := range r.Steps {
		shared := parse(t, s.SharedCPUs)
		ids := map[string]bool{}
		var granted cpuset.CPUSet
		sharedContainers := 0
		for _, c := range s.Containers {
			what := fmt.Sprintf("step %d (%s): %s/%s/%s", s.Step, s.Kind, c.Namespace, c.Pod, c.Container)
			assert.False(t, ids[c.ID], "%s: listed twice", what)
			ids[c.ID] = true
			cpus, mems := parse(t, c.CPUs), parse(t, c.Mems)
			assert.False(t, cpus.IsEmpty(), "%s: no CPUs", what)
			assert.Equal(t, topo.NodesOfCPUs(cpus), nonNil(c.NUMANodes), "%s: numaNodes are the nodes of its CPUs", what)
			assert.True(t, cpuset.New(c.NUMANodes...).IsSubsetOf(mems), "%s: mems %s lack the nodes of its CPUs %v", what, c.Mems, c.NUMANodes)
			switch c.Pool {
			case "exclusive", "isolated":
				assert.True(t, cpus.Intersection(granted).IsEmpty(), "%s: exclusive CPUs %s overlap another grant", what, c.CPUs)
				assert.True(t, cpus.Intersection(shared).IsEmpty(), "%s: exclusive CPUs %s are in the shared pool %s", what, c.CPUs, s.SharedCPUs)
				granted = granted.Union(cpus)
				if c.Pool == "isolated" {
					assert.True(t, cpus.IsSubsetOf(topo.Isolated()), "%s: isolated CPUs %s not kernel-isolated", what, c.CPUs)
				} else {
					assert.True(t, cpus.Intersection(topo.Isolated()).IsEmpty(), "%s: exclusive CPUs %s include isolated ones", what, c.CPUs)
				}
			case "shared":
				sharedContainers++
				assert.Equal(t, s.SharedCPUs, c.CPUs, "%s: a shared container runs on the shared pool", what)
			case "reserved":
				assert.True(t, cpus.Intersection(granted).IsEmpty(), "%s: reserved CPUs granted", what)
			default:
				t.Errorf("%s: unknown pool %q", what, c.Pool)
			}
			wasThere := slices.ContainsFunc(previous, func(p ContainerPlacement) bool { return p.ID == c.ID })
			switch c.Change {
			case changeCreated:
				assert.False(t, wasThere, "%s: created but already running", what)
			case "":
				i := slices.IndexFunc(previous, func(p ContainerPlacement) bool { return p.ID == c.ID })
				if assert.GreaterOrEqual(t, i, 0, "%s: unchanged but new", what) {
					assert.Equal(t, previous[i].CPUs, c.CPUs, "%s: unchanged but moved", what)
					assert.Equal(t, previous[i].Mems, c.Mems, "%s: unchanged but moved", what)
				}
			default:
				assert.True(t, wasThere, "%s: %s but not running before", what, c.Change)
			}
		}
		if sharedContainers > 0 {
			assert.False(t, shared.IsEmpty(), "step %d: the shared pool is empty under %d shared containers", s.Step, sharedContainers)
		}
		for _, rej := range s.Rejected {
			assert.NotEmpty(t, rej.Error)
			if s.Kind == StepResize {
				// A refused resize leaves the container as it was.
				i := slices.IndexFunc(previous, func(p ContainerPlacement) bool { return p.ID == rej.ID })
				if ids[rej.ID] && assert.GreaterOrEqual(t, i, 0) {
					assert.Empty(t, find(t, s, rej.Namespace+"/"+rej.Pod+"/"+rej.Container).Change, "step %d: refused resize changed %s", s.Step, rej.Container)
				}
				continue
			}
			assert.False(t, ids[rej.ID], "step %d: refused container %s/%s/%s runs", s.Step, rej.Namespace, rej.Pod, rej.Container)
		}
		for _, rel := range s.Released {
			assert.False(t, ids[rel.ID], "step %d: released container %s runs", s.Step, rel.Container)
			if rel.Pool == "exclusive" {
				assert.True(t, parse(t, rel.CPUs).IsSubsetOf(shared), "step %d: released CPUs %s did not return to the shared pool %s", s.Step, rel.CPUs, s.SharedCPUs)
			}
		}
		if s.Kind == StepRestart {
			require.NotNil(t, s.Restart, "step %d", s.Step)
			assert.Empty(t, s.Restart.Moved, "step %d: a restart moved containers", s.Step)
			assert.Empty(t, s.Restart.Replaced, "step %d", s.Step)
			assert.Len(t, s.Restart.Kept, len(previous), "step %d: every running container is kept", s.Step)
			assert.Equal(t, stripChanges(previous), stripChanges(s.Containers), "step %d: a restart changed placements", s.Step)
		}
		previous = s.Containers
	}
	assert.Equal(t, stripChanges(previous), stripChanges(r.Final.Containers), "final state is the last step's")
	// The usage rows account for exactly the exclusive and isolated grants.
	var grantedMilli int64
	var grants int
	for _, u := range r.Final.Usage {
		if u.Pool == "exclusive" || u.Pool == "isolated" {
			grantedMilli += u.GrantedMilliCPU
		}
	}
	for _, c := range r.Final.Containers {
		if c.Pool == "exclusive" || c.Pool == "isolated" {
			grants += parse(t, c.CPUs).Size()
		}
	}
	assert.Equal(t, int64(grants)*1000, grantedMilli, "usage counts every granted CPU")
}

func stripChanges(list []ContainerPlacement) []ContainerPlacement {
	out := slices.Clone(list)
	for i := range out {
		out[i].Change = ""
	}
	return out
}

func nonNil(nodes []int) []int {
	if nodes == nil {
		return []int{}
	}
	return nodes
}

// find returns the container ns/pod/name in the step's running containers.
func find(t *testing.T, s StepReport, name string) ContainerPlacement {
	t.Helper()
	for _, c := range s.Containers {
		if c.Namespace+"/"+c.Pod+"/"+c.Container == name {
			return c
		}
	}
	t.Fatalf("step %d: %s is not running", s.Step, name)
	return ContainerPlacement{}
}

func rejected(t *testing.T, s StepReport, name, contains string) {
	t.Helper()
	for _, r := range s.Rejected {
		if r.Namespace+"/"+r.Pod+"/"+r.Container == name {
			assert.Contains(t, r.Error, contains, "step %d: %s", s.Step, name)
			return
		}
	}
	t.Errorf("step %d: %s was not refused", s.Step, name)
}

// checkBasics: see testdata/workloads/basics.yaml.
func checkBasics(hasIsolated bool) func(*testing.T, *topology.Topology, *Report) {
	return func(t *testing.T, topo *topology.Topology, r *Report) {
		require.Len(t, r.Steps, 8)
		proxy := find(t, r.Steps[0], "kube-system/kube-proxy/proxy")
		assert.Equal(t, "reserved", proxy.Pool)
		assert.Equal(t, 2, parse(t, proxy.CPUs).Size(), "reserved-cpu-count: 2")

		web := r.Steps[1]
		for _, name := range []string{"shop/web/proxy", "shop/web/app"} {
			assert.Equal(t, "shared", find(t, web, name).Pool, name)
		}
		require.Len(t, web.Exited, 1, "the init container ran to completion")
		assert.Equal(t, "setup", web.Exited[0].Container)

		db := find(t, r.Steps[2], "shop/db/db")
		assert.Equal(t, "exclusive", db.Pool)
		assert.Equal(t, 2, parse(t, db.CPUs).Size())
		assert.Len(t, db.NUMANodes, 1, "2 CPUs fit on one node")
		assert.Equal(t, "shared", find(t, r.Steps[2], "shop/db/metrics").Pool, "fractional Guaranteed is shared")
		assert.Equal(t, changeUpdated, find(t, r.Steps[2], "shop/web/app").Change, "the grant shrank the shared pool")

		if hasIsolated {
			feed := find(t, r.Steps[3], "trading/rt/feed")
			assert.Equal(t, "isolated", feed.Pool)
			assert.Equal(t, 1, parse(t, feed.CPUs).Size())
		} else {
			rejected(t, r.Steps[3], "trading/rt/feed", "isolated")
		}
		rejected(t, r.Steps[4], "batch/huge/crunch", "insufficient CPUs")

		resized := find(t, r.Steps[5], "shop/db/db")
		assert.Equal(t, changeResized, resized.Change)
		assert.Equal(t, 4, parse(t, resized.CPUs).Size())
		assert.True(t, parse(t, db.CPUs).IsSubsetOf(parse(t, resized.CPUs)), "growing keeps the CPUs it had")

		del := r.Steps[7]
		require.Len(t, del.Released, 2)
		assert.Equal(t, resized.CPUs, del.Released[0].CPUs)
		assert.True(t, parse(t, resized.CPUs).IsSubsetOf(parse(t, find(t, del, "shop/web/app").CPUs)),
			"the shared containers get the released CPUs")
	}
}

// checkDevices: see testdata/workloads/devices.yaml (fixture80: node n
// holds cpus 10n..10n+9 and 40+10n..40+10n+9).
func checkDevices(t *testing.T, topo *topology.Topology, r *Report) {
	require.Len(t, r.Steps, 10)
	onNode := func(s StepReport, name string, node, n int) {
		t.Helper()
		c := find(t, s, name)
		assert.Equal(t, "exclusive", c.Pool, name)
		assert.True(t, parse(t, c.CPUs).IsSubsetOf(topo.CPUsOfNode(node)), "%s: CPUs %s not on node %d", name, c.CPUs, node)
		assert.Equal(t, n, parse(t, c.CPUs).Size(), name)
		assert.Equal(t, []int{node}, c.Affinity, name)
		assert.Equal(t, cpuset.New(node).String(), c.Mems, name)
	}
	onNode(r.Steps[0], "ml/infer/model", 3, 4)
	onNode(r.Steps[1], "ml/ingest/reader", 2, 2)
	onNode(r.Steps[2], "ml/accel/kernel", 1, 2)
	rejected(t, r.Steps[3], "ml/split/both", "topology affinity")
	onNode(r.Steps[4], "ml/train/worker", 3, 14)
	rejected(t, r.Steps[5], "ml/late/worker", "single-numa-node")
	assert.Equal(t, stripChanges(r.Steps[4].Containers), stripChanges(r.Steps[5].Containers), "a refusal moves nothing")
	onNode(r.Steps[9], "ml/late/worker", 3, 4)
}

// checkPodScope: see testdata/workloads/pod-scope.yaml.
func checkPodScope(t *testing.T, topo *topology.Topology, r *Report) {
	require.Len(t, r.Steps, 4)
	web := find(t, r.Steps[1], "shop/web/app")
	for _, name := range []string{"trading/pair/feed", "trading/pair/engine"} {
		c := find(t, r.Steps[1], name)
		assert.Equal(t, []int{1}, c.NUMANodes, name)
		assert.True(t, parse(t, c.CPUs).IsSubsetOf(topo.CPUsOfNode(1)), "%s: CPUs %s not on node 1", name, c.CPUs)
	}
	assert.Equal(t, 1, parse(t, web.CPUs).Intersection(topo.CPUsOfNode(1)).Size(), "the shared pool keeps node 1's one CPU the pod leaves")
	for _, name := range []string{"trading/wide/small", "trading/wide/large"} {
		rejected(t, r.Steps[2], name, "pod trading/wide (topology manager scope pod: 21 CPUs")
	}
	pricer := find(t, r.Steps[3], "trading/quote/pricer")
	assert.Equal(t, []int{0}, pricer.NUMANodes)
}

// checkNUMANodes: see testdata/workloads/numa-nodes.yaml.
func checkNUMANodes(t *testing.T, topo *topology.Topology, r *Report) {
	require.Len(t, r.Steps, 8)
	engine := find(t, r.Steps[0], "data/analytics/engine")
	require.Len(t, engine.NUMANodes, 1)
	assert.Equal(t, topo.CPUsOfNode(engine.NUMANodes[0]).String(), engine.CPUs, "32 CPUs take a whole node")

	mip := find(t, r.Steps[1], "data/solver/mip")
	require.Len(t, mip.NUMANodes, 2)
	assert.Equal(t, topo.CPUsOfNode(mip.NUMANodes[0]).Union(topo.CPUsOfNode(mip.NUMANodes[1])).String(), mip.CPUs, "64 CPUs take two whole nodes")

	stream := find(t, r.Steps[2], "data/stream/kernel")
	cpuLess := parse(t, stream.Mems).Difference(cpuset.New(stream.NUMANodes...))
	assert.False(t, cpuLess.IsEmpty(), "include-cpuless adds a CPU-less node to mems %s", stream.Mems)
	assert.True(t, cpuLess.IsSubsetOf(cpuset.New(topo.CPULessNodes()...)))
	assert.Equal(t, map[string]int64{"2MB": 512 << 20}, stream.HugePages, "hugepages accounted")

	rejected(t, r.Steps[3], "data/odd/app", "full-pcpus-only")

	shrunk := find(t, r.Steps[4], "data/analytics/engine")
	assert.Equal(t, 16, parse(t, shrunk.CPUs).Size())
	assert.True(t, parse(t, shrunk.CPUs).IsSubsetOf(parse(t, engine.CPUs)), "shrinking keeps a subset")

	for _, reserved := range []int{0, 128} {
		assert.False(t, parse(t, r.Steps[5].SharedCPUs).Contains(reserved), "strict-reservation keeps CPU %d out of the shared pool", reserved)
	}
	del := r.Steps[7]
	assert.True(t, parse(t, mip.CPUs).IsSubsetOf(parse(t, find(t, del, "data/api/server").CPUs)), "the api server gets the solver's CPUs")
	assert.Equal(t, changeUpdated, find(t, del, "data/api/server").Change)
}
