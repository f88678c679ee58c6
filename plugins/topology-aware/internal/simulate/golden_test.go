package simulate

import (
	"bufio"
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
	"github.com/nri-suite/nri-suite/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden files of testdata/workloads/golden")

const workloadDir = "../../testdata/workloads"

// The topology fixtures, by CPU count.
const (
	fixture12  = "smt-2s-12c-interleaved"
	fixture80  = "snc-2s-4n-80c"
	fixture256 = "nps4-2s-12n-256c-cpuless"
)

func fixtureDir(name string) string {
	return filepath.Join("..", "..", "..", "..", "common", "topology", "testdata", name)
}

// goldenCase is a workload run on a fixture with a configuration; check
// asserts what the workload is about, beyond the invariants every report
// must satisfy (checkReport).
type goldenCase struct {
	workload, fixture, config string
	check                     func(t *testing.T, topo *topology.Topology, r *report)
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
	return filepath.Join(workloadDir, "golden", c.name()+".jsonl")
}

var goldenCases = []goldenCase{
	{"basics", fixture12, "config-reserved", checkBasics(true)},
	{"basics", fixture80, "config-reserved", checkBasics(false)},
	{"basics", fixture256, "config-reserved", checkBasics(false)},
	{"devices", fixture80, "config-single-numa", checkDevices},
	{"numa-nodes", fixture256, "config-full-cores", checkNUMANodes},
	{"pod-scope", fixture80, "config-pod-scope", checkPodScope},
	{"controllers", fixture12, "config-reserved", checkControllers},
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

			r := decodeReport(t, stdout)
			topo, err := sysfs.Discover(filepath.Join(fixtureDir(c.fixture), "sysfs"))
			require.NoError(t, err)
			checkReport(t, topo, r)
			c.check(t, topo, r)
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
	assert.Empty(t, left, "the rendered sysfs tree and the plugin's state must be removed")
}

func runCLI(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// report is a run's stream of records, with every running container after
// each step as the changes rebuild it.
type report struct {
	Machine MachineInfo
	Steps   []StepReport
	Failure *Failure
	Final   State
	// Running are the running containers after each step, in creation
	// order, as replaying the steps' changes gives them.
	Running [][]ContainerPlacement
}

// decodeReport reads the stream strictly: one record a line, exactly one
// field set, the machine first and the final state last.
func decodeReport(t testing.TB, out string) *report {
	t.Helper()
	var r report
	scanner := bufio.NewScanner(strings.NewReader(out))
	scanner.Buffer(nil, 64<<20)
	line := 0
	finals := 0
	for scanner.Scan() {
		line++
		dec := json.NewDecoder(bytes.NewReader(scanner.Bytes()))
		dec.DisallowUnknownFields()
		var rec Record
		require.NoError(t, dec.Decode(&rec), "line %d", line)
		set := 0
		for _, isSet := range []bool{rec.Machine != nil, rec.Step != nil, rec.Error != nil, rec.Final != nil} {
			if isSet {
				set++
			}
		}
		require.Equal(t, 1, set, "line %d: exactly one field: %s", line, scanner.Text())
		switch {
		case rec.Machine != nil:
			require.Equal(t, 1, line, "the machine comes first")
			r.Machine = *rec.Machine
		case rec.Step != nil:
			require.Zero(t, finals, "line %d: a step after the final state", line)
			r.Steps = append(r.Steps, *rec.Step)
		case rec.Error != nil:
			r.Failure = rec.Error
		case rec.Final != nil:
			finals++
			r.Final = *rec.Final
		}
	}
	require.NoError(t, scanner.Err())
	require.Equal(t, 1, finals, "one final state, last")
	r.Running = replay(t, r.Steps)
	return &r
}

// replay rebuilds the running containers after every step from the
// steps' changes: containers created, resized, updated or replaced are
// listed with their placement, and the shared containers that only follow
// the shared pool (counted in Followed) take its CPUs and memory nodes.
func replay(t testing.TB, steps []StepReport) [][]ContainerPlacement {
	t.Helper()
	var out [][]ContainerPlacement
	var live []ContainerPlacement
	var shared [2]string
	for _, s := range steps {
		gone := map[string]bool{}
		for _, c := range s.Released {
			gone[c.ID] = true
		}
		live = slices.DeleteFunc(live, func(c ContainerPlacement) bool { return gone[c.ID] })
		listed := map[string]bool{}
		for _, c := range s.Changed {
			listed[c.ID] = true
			i := slices.IndexFunc(live, func(l ContainerPlacement) bool { return l.ID == c.ID })
			if c.Change == changeCreated {
				assert.Less(t, i, 0, "step %d: %s created twice", s.Step, c.Container)
				live = append(live, c)
				continue
			}
			if assert.GreaterOrEqual(t, i, 0, "step %d: %s %s, but not running", s.Step, c.Container, c.Change) {
				live[i] = c
			}
		}
		followed := 0
		now := [2]string{s.SharedCPUs, s.SharedMems}
		for i, c := range live {
			if c.Pool == "shared" && !listed[c.ID] && [2]string{c.CPUs, c.Mems} == shared && shared != now {
				// The shared pool's mems are the nodes of its CPUs.
				live[i].CPUs, live[i].Mems, live[i].NUMANodes = now[0], now[1], parse(t, now[1]).List()
				followed++
			}
		}
		assert.Equal(t, s.Followed, followed, "step %d: the shared containers that followed the pool", s.Step)
		assert.Len(t, live, s.Running, "step %d: running containers", s.Step)
		shared = now
		snapshot := slices.Clone(live)
		for i := range snapshot {
			snapshot[i].Change = ""
		}
		out = append(out, snapshot)
	}
	return out
}

func parse(t testing.TB, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	require.NoError(t, err, "cpuset %q", s)
	return set
}

// checkReport asserts what must hold of every report, whatever the
// workload: the policy's rules as seen from outside.
func checkReport(t *testing.T, topo *topology.Topology, r *report) {
	t.Helper()
	var previous []ContainerPlacement
	for i, s := range r.Steps {
		running := r.Running[i]
		shared := parse(t, s.SharedCPUs)
		ids := map[string]bool{}
		var granted cpuset.CPUSet
		sharedContainers := 0
		for _, c := range running {
			what := fmt.Sprintf("step %d (%s): %s/%s/%s", s.Step, s.Kind, c.Namespace, c.Pod, c.Container)
			assert.False(t, ids[c.ID], "%s: listed twice", what)
			ids[c.ID] = true
			cpus, mems := parse(t, c.CPUs), parse(t, c.Mems)
			assert.False(t, cpus.IsEmpty(), "%s: no CPUs", what)
			assert.Equal(t, topo.NodesOfCPUs(cpus), nonNil(c.NUMANodes), "%s: numaNodes are the nodes of its CPUs", what)
			if !cpuset.New(c.NUMANodes...).IsSubsetOf(mems) {
				// Only when the memory cannot be there, which the reason says.
				assert.Contains(t, c.Reason, "not on its CPUs' NUMA nodes", "%s: mems %s lack the nodes of its CPUs %v", what, c.Mems, c.NUMANodes)
			}
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
				assert.Equal(t, r.Machine.Reserved, c.CPUs, "%s: on the reserved CPUs", what)
			default:
				t.Errorf("%s: unknown pool %q", what, c.Pool)
			}
		}
		for _, c := range s.Changed {
			if c.Change == changeUpdated || c.Change == changeResized {
				j := slices.IndexFunc(previous, func(p ContainerPlacement) bool { return p.ID == c.ID })
				if assert.GreaterOrEqual(t, j, 0, "step %d: %s %s but not running before", s.Step, c.Container, c.Change) && c.Change == changeUpdated {
					assert.NotEqual(t, [2]string{previous[j].CPUs, previous[j].Mems}, [2]string{c.CPUs, c.Mems}, "step %d: %s updated to where it was", s.Step, c.Container)
				}
			}
		}
		if sharedContainers > 0 {
			assert.False(t, shared.IsEmpty(), "step %d: the shared pool is empty under %d shared containers", s.Step, sharedContainers)
		}
		for _, rej := range s.Rejected {
			assert.NotEmpty(t, rej.Error)
			if s.Kind == StepResize {
				// A refused resize leaves the container as it was.
				assert.Empty(t, s.Changed, "step %d: a refused resize changed containers", s.Step)
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
			assert.Equal(t, len(previous), s.Restart.Kept, "step %d: every running container is kept", s.Step)
			assert.Equal(t, previous, running, "step %d: a restart changed placements", s.Step)
		}
		previous = running
	}
	assert.Equal(t, previous, r.Final.Containers, "the final state is what the steps' changes add up to")
	assert.Equal(t, len(r.Steps), r.Final.StepsRun)
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
	// The peak is a step after which the shared pool was at its smallest.
	if r.Final.Peak.Step > 0 {
		smallest := parse(t, r.Steps[0].SharedCPUs).Size()
		for _, s := range r.Steps {
			smallest = min(smallest, parse(t, s.SharedCPUs).Size())
		}
		assert.Equal(t, r.Steps[r.Final.Peak.Step-1].SharedCPUs, r.Final.Peak.SharedCPUs)
		assert.Equal(t, smallest, parse(t, r.Final.Peak.SharedCPUs).Size(), "the peak has the smallest shared pool")
	}
}

func nonNil(nodes []int) []int {
	if nodes == nil {
		return []int{}
	}
	return nodes
}

// find returns the container ns/pod/name running after step i (from 0).
func find(t *testing.T, r *report, i int, name string) ContainerPlacement {
	t.Helper()
	for _, c := range r.Running[i] {
		if c.Namespace+"/"+c.Pod+"/"+c.Container == name {
			return c
		}
	}
	t.Fatalf("step %d: %s is not running", i+1, name)
	return ContainerPlacement{}
}

// changeOf returns what step i (from 0) did to the container, "" for
// nothing listed.
func changeOf(r *report, i int, name string) string {
	for _, c := range r.Steps[i].Changed {
		if c.Namespace+"/"+c.Pod+"/"+c.Container == name {
			return c.Change
		}
	}
	return ""
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
func checkBasics(hasIsolated bool) func(*testing.T, *topology.Topology, *report) {
	return func(t *testing.T, topo *topology.Topology, r *report) {
		require.Len(t, r.Steps, 8)
		proxy := find(t, r, 0, "kube-system/kube-proxy/proxy")
		assert.Equal(t, "reserved", proxy.Pool)
		assert.Equal(t, 2, parse(t, proxy.CPUs).Size(), "reserved-cpu-count: 2")

		for _, name := range []string{"shop/web/proxy", "shop/web/app"} {
			assert.Equal(t, "shared", find(t, r, 1, name).Pool, name)
		}
		web := r.Steps[1]
		require.Len(t, web.Exited, 1, "the init container ran to completion")
		assert.Equal(t, "setup", web.Exited[0].Container)

		db := find(t, r, 2, "shop/db/db")
		assert.Equal(t, "exclusive", db.Pool)
		assert.Equal(t, 2, parse(t, db.CPUs).Size())
		assert.Len(t, db.NUMANodes, 1, "2 CPUs fit on one node")
		assert.Equal(t, "shared", find(t, r, 2, "shop/db/metrics").Pool, "fractional Guaranteed is shared")
		assert.Equal(t, 2, r.Steps[2].Followed, "the grant shrank the shared pool under web's two containers")

		if hasIsolated {
			feed := find(t, r, 3, "trading/rt/feed")
			assert.Equal(t, "isolated", feed.Pool)
			assert.Equal(t, 1, parse(t, feed.CPUs).Size())
		} else {
			rejected(t, r.Steps[3], "trading/rt/feed", "isolated")
		}
		rejected(t, r.Steps[4], "batch/huge/crunch", "insufficient CPUs")

		resized := find(t, r, 5, "shop/db/db")
		assert.Equal(t, changeResized, changeOf(r, 5, "shop/db/db"))
		assert.Equal(t, 4, parse(t, resized.CPUs).Size())
		assert.True(t, parse(t, db.CPUs).IsSubsetOf(parse(t, resized.CPUs)), "growing keeps the CPUs it had")

		del := r.Steps[7]
		require.Len(t, del.Released, 2)
		assert.Equal(t, resized.CPUs, del.Released[0].CPUs)
		assert.True(t, parse(t, resized.CPUs).IsSubsetOf(parse(t, find(t, r, 7, "shop/web/app").CPUs)),
			"the shared containers get the released CPUs")
	}
}

// checkDevices: see testdata/workloads/devices.yaml (fixture80: node n
// holds cpus 10n..10n+9 and 40+10n..40+10n+9).
func checkDevices(t *testing.T, topo *topology.Topology, r *report) {
	require.Len(t, r.Steps, 10)
	onNode := func(i int, name string, node, n int) {
		t.Helper()
		c := find(t, r, i, name)
		assert.Equal(t, "exclusive", c.Pool, name)
		assert.True(t, parse(t, c.CPUs).IsSubsetOf(topo.CPUsOfNode(node)), "%s: CPUs %s not on node %d", name, c.CPUs, node)
		assert.Equal(t, n, parse(t, c.CPUs).Size(), name)
		assert.Equal(t, []int{node}, c.Affinity, name)
		assert.Equal(t, cpuset.New(node).String(), c.Mems, name)
	}
	onNode(0, "ml/infer/model", 3, 4)
	onNode(1, "ml/ingest/reader", 2, 2)
	onNode(2, "ml/accel/kernel", 1, 2)
	rejected(t, r.Steps[3], "ml/split/both", "topology affinity")
	onNode(4, "ml/train/worker", 3, 14)
	rejected(t, r.Steps[5], "ml/late/worker", "single-numa-node")
	assert.Equal(t, r.Running[4], r.Running[5], "a refusal moves nothing")
	assert.Empty(t, r.Steps[5].Changed)
	onNode(9, "ml/late/worker", 3, 4)
}

// checkPodScope: see testdata/workloads/pod-scope.yaml.
func checkPodScope(t *testing.T, topo *topology.Topology, r *report) {
	require.Len(t, r.Steps, 5)
	web := find(t, r, 1, "shop/web/app")
	for _, name := range []string{"trading/pair/feed", "trading/pair/engine"} {
		c := find(t, r, 1, name)
		assert.Equal(t, []int{1}, c.NUMANodes, name)
		assert.True(t, parse(t, c.CPUs).IsSubsetOf(topo.CPUsOfNode(1)), "%s: CPUs %s not on node 1", name, c.CPUs)
	}
	assert.Equal(t, 1, parse(t, web.CPUs).Intersection(topo.CPUsOfNode(1)).Size(), "the shared pool keeps node 1's one CPU the pod leaves")
	for _, name := range []string{"trading/wide/small", "trading/wide/large"} {
		rejected(t, r.Steps[2], name, "pod trading/wide (topology manager scope pod: 21 CPUs")
	}
	pricer := find(t, r, 3, "trading/quote/pricer")
	assert.Equal(t, []int{0}, pricer.NUMANodes)
	assert.NotContains(t, r.Final.PodReservations, "trading/pair", "the pair's reservation went with it")
	assert.Contains(t, r.Final.PodReservations, "trading/quote")
	gone := r.Steps[4]
	require.Len(t, gone.Released, 2)
	assert.True(t, topo.CPUsOfNode(1).Difference(parse(t, r.Machine.Reserved)).IsSubsetOf(parse(t, gone.SharedCPUs)), "node 1 is back in the shared pool")
	assert.Equal(t, 2, gone.Followed, "web's proxy and app got it through the Updater")
}

// checkNUMANodes: see testdata/workloads/numa-nodes.yaml.
func checkNUMANodes(t *testing.T, topo *topology.Topology, r *report) {
	require.Len(t, r.Steps, 8)
	engine := find(t, r, 0, "data/analytics/engine")
	require.Len(t, engine.NUMANodes, 1)
	assert.Equal(t, topo.CPUsOfNode(engine.NUMANodes[0]).String(), engine.CPUs, "32 CPUs take a whole node")

	mip := find(t, r, 1, "data/solver/mip")
	require.Len(t, mip.NUMANodes, 2)
	assert.Equal(t, topo.CPUsOfNode(mip.NUMANodes[0]).Union(topo.CPUsOfNode(mip.NUMANodes[1])).String(), mip.CPUs, "64 CPUs take two whole nodes")

	stream := find(t, r, 2, "data/stream/kernel")
	cpuLess := parse(t, stream.Mems).Difference(cpuset.New(stream.NUMANodes...))
	assert.False(t, cpuLess.IsEmpty(), "include-cpuless adds a CPU-less node to mems %s", stream.Mems)
	assert.True(t, cpuLess.IsSubsetOf(cpuset.New(topo.CPULessNodes()...)))
	assert.Equal(t, map[string]int64{"2MB": 512 << 20}, stream.HugePages, "hugepages accounted")

	rejected(t, r.Steps[3], "data/odd/app", "full-pcpus-only")

	shrunk := find(t, r, 4, "data/analytics/engine")
	assert.Equal(t, 16, parse(t, shrunk.CPUs).Size())
	assert.True(t, parse(t, shrunk.CPUs).IsSubsetOf(parse(t, engine.CPUs)), "shrinking keeps a subset")

	for _, reserved := range []int{0, 128} {
		assert.False(t, parse(t, r.Steps[5].SharedCPUs).Contains(reserved), "strict-reservation keeps CPU %d out of the shared pool", reserved)
	}
	assert.True(t, parse(t, mip.CPUs).IsSubsetOf(parse(t, find(t, r, 7, "data/api/server").CPUs)), "the api server gets the solver's CPUs")
	assert.Equal(t, 1, r.Steps[7].Followed, "the api server followed the shared pool")
}

// checkControllers: see testdata/workloads/controllers.yaml.
func checkControllers(t *testing.T, topo *topology.Topology, r *report) {
	require.Len(t, r.Steps, 7)
	assert.Equal(t, []string{"Deployment shop/web", "StatefulSet shop/db"}, r.Steps[0].Objects)
	for i := range 3 {
		assert.Equal(t, "shared", find(t, r, 0, fmt.Sprintf("shop/web-%d/app", i)).Pool)
	}
	db0, db1 := find(t, r, 0, "shop/db-0/db"), find(t, r, 0, "shop/db-1/db")
	for _, db := range []ContainerPlacement{db0, db1} {
		assert.Equal(t, "exclusive", db.Pool)
		assert.Equal(t, 2, parse(t, db.CPUs).Size())
	}

	assert.Equal(t, []string{"DaemonSet kube-system/node-agent", "ReplicaSet jobs/batch"}, r.Steps[1].Objects)
	assert.Equal(t, "reserved", find(t, r, 1, "kube-system/node-agent-0/agent").Pool)
	for i := range 4 {
		assert.Equal(t, "shared", find(t, r, 1, fmt.Sprintf("jobs/batch-%d/worker", i)).Pool)
	}
	require.Len(t, r.Steps[1].Warnings, 1, "the batch workers overcommit the shared pool")
	w := r.Steps[1].Warnings[0]
	assert.Equal(t, "shared", w.Pool)
	assert.Equal(t, 7, w.Containers, "web's 3 and batch's 4")
	assert.Equal(t, int64(3*500+4*4000), w.RequestedMilliCPU)
	assert.Equal(t, parse(t, r.Steps[1].SharedCPUs).Size(), w.CPUs)
	assert.Contains(t, w.Message, "the shared pool is overcommitted: 7 containers request 17.5 CPUs on 6 CPUs")

	assert.Equal(t, 3, parse(t, find(t, r, 2, "shop/db-1/db").CPUs).Size(), "db-1 grew in place")
	assert.Equal(t, "db", find(t, r, 3, "shop/db-0/db").Container, "a restart keeps them")

	del := r.Steps[4]
	assert.Equal(t, []string{"StatefulSet shop/db"}, del.Objects)
	require.Len(t, del.Released, 2, "both pods of the StatefulSet")
	assert.Equal(t, "db-1", del.Released[0].Pod, "the newest pod first")
	assert.True(t, parse(t, db0.CPUs).IsSubsetOf(parse(t, del.SharedCPUs)), "their CPUs go back to the shared pool")

	assert.Len(t, r.Steps[5].Released, 1)
	require.Len(t, r.Steps[6].Released, 3, "the ReplicaSet's other pods")
	assert.Len(t, r.Final.Containers, 4, "web's 3 and the agent")

	// Overcommitted at the end still (web's 1.5 CPUs on 9 CPUs: no), and
	// most when the shared pool was smallest.
	require.Len(t, r.Final.Warnings, 1)
	assert.Contains(t, r.Final.Warnings[0].Message, "the shared pool was most overcommitted after step 3")
}
