package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/description"
)

// kubeletCase is one case of the kubelet's cpu_assignment_test.go, converted
// by testdata/kubelet/gen.go.
type kubeletCase struct {
	Test        string   `yaml:"test"`
	Description string   `yaml:"description"`
	Topology    string   `yaml:"topology"`
	Algorithm   string   `yaml:"algorithm"`
	Spread      bool     `yaml:"spread"`
	AlignUncore bool     `yaml:"alignUncore"`
	GroupSize   int      `yaml:"groupSize"`
	Available   string   `yaml:"available"`
	CPUs        int      `yaml:"cpus"`
	Error       string   `yaml:"error"`
	Expect      *string  `yaml:"expect"`
	ExpectList  []int    `yaml:"expectList"`
	ExpectCores []string `yaml:"expectCores"`
	ExpectNone  bool     `yaml:"expectNone"`
}

func kubeletTopology(t *testing.T, name string) *topology.Topology {
	t.Helper()
	d, err := description.Load(filepath.Join("testdata", "kubelet", "topologies", name+".yaml"))
	require.NoError(t, err)
	topo, err := d.Topology()
	require.NoError(t, err)
	return topo
}

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	require.NoError(t, err)
	return set
}

// TestKubeletCPUAssignment replays the kubelet's own expectations for its
// CPU accumulator and its packed and distributed algorithms.
func TestKubeletCPUAssignment(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "kubelet", "cpu_assignment.yaml"))
	require.NoError(t, err)
	var cases []kubeletCase
	require.NoError(t, yaml.Unmarshal(data, &cases))
	require.NotEmpty(t, cases)
	machines := map[string]*machine{}
	for _, tc := range cases {
		t.Run(tc.Test+"/"+tc.Description, func(t *testing.T) {
			m := machines[tc.Topology]
			if m == nil {
				m = newMachine(kubeletTopology(t, tc.Topology))
				machines[tc.Topology] = m
			}
			available := mustParse(t, tc.Available)
			a := newAccumulator(m, available, tc.CPUs, tc.Spread)
			switch tc.Algorithm {
			case "freeSockets":
				assert.ElementsMatch(t, orEmpty(tc.ExpectList), a.freeIDs(levelSocket, a.sortSockets()))
			case "freeNUMANodes":
				assert.Equal(t, orEmpty(tc.ExpectList), a.freeIDs(levelNode, a.sortNodes()))
			case "freeCores":
				var got []string
				for _, c := range a.sortCores() {
					if a.isFree(levelCore, c) {
						got = append(got, m.groups[levelCore][c].cpus.String())
					}
				}
				assert.Equal(t, tc.ExpectCores, got)
			case "freeCPUs":
				got := a.sortCPUs()
				if tc.ExpectNone {
					assert.Empty(t, got)
				} else {
					assert.Equal(t, tc.ExpectList, got)
				}
			case "packed", "distributed":
				var got cpuset.CPUSet
				if tc.Algorithm == "packed" {
					got, err = m.takePacked(available, tc.CPUs, tc.Spread, tc.AlignUncore)
				} else {
					got, err = m.takeDistributed(available, tc.CPUs, tc.GroupSize, false)
				}
				if tc.Error != "" {
					require.EqualError(t, err, tc.Error)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, *tc.Expect, got.String())
			default:
				t.Fatalf("unknown algorithm %q", tc.Algorithm)
			}
		})
	}
}

// freeIDs returns the ids of the entirely free groups among order.
func (a *accumulator) freeIDs(level int, order []int) []int {
	ids := []int{}
	for _, i := range order {
		if a.isFree(level, i) {
			ids = append(ids, a.m.groups[level][i].id)
		}
	}
	return ids
}

func orEmpty(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

// kubeletStaticCase is one case of the kubelet's policy_static_test.go,
// converted by testdata/kubelet/gen.go.
type kubeletStaticCase struct {
	Test              string `yaml:"test"`
	Description       string `yaml:"description"`
	Topology          string `yaml:"topology"`
	Reserved          string `yaml:"reserved"`
	FullPCPUsOnly     bool   `yaml:"fullPCPUsOnly"`
	AlignUncore       bool   `yaml:"alignUncore"`
	StrictReservation bool   `yaml:"strictReservation"`
	Free              string `yaml:"free"`
	Containers        []int  `yaml:"containers"`
	Expect            string `yaml:"expect"`
	ExpectUncore      []int  `yaml:"expectUncore"`
}

// TestKubeletStaticPolicy replays the kubelet's static policy cases
// (align-by-uncore-cache with full-pcpus-only and strict-cpu-reservation)
// under the option kubelet-packing, which makes the kubelet's choice:
// the CPUs outside the kubelet's default set are held by another container,
// adopted where it runs; then the pod's containers are placed in order.
func TestKubeletStaticPolicy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "kubelet", "static_policy.yaml"))
	require.NoError(t, err)
	var cases []kubeletStaticCase
	require.NoError(t, yaml.Unmarshal(data, &cases))
	require.NotEmpty(t, cases)
	for _, tc := range cases {
		t.Run(tc.Test+"/"+tc.Description, func(t *testing.T) {
			topo := kubeletTopology(t, tc.Topology)
			reserved := mustParse(t, tc.Reserved)
			p := newPolicy(t, topo, Config{ReservedCPUs: reserved, FullPCPUsOnly: tc.FullPCPUsOnly,
				AlignByUncoreCache: tc.AlignUncore, StrictReservation: tc.StrictReservation, KubeletPacking: true})
			if taken := topo.CPUs().Difference(mustParse(t, tc.Free)).Difference(reserved); !taken.IsEmpty() {
				report := p.Restore(Snapshot{}, []Running{{Request: guaranteed("other", int64(taken.Size())*1000, 0), CPUs: taken}})
				require.Equal(t, []string{"other"}, report.Adopted, "CPUs %q held by another container", taken)
			}
			var grants []cpuset.CPUSet
			for i, milli := range tc.Containers {
				req := guaranteed(fmt.Sprintf("c%d", i), int64(milli), 0)
				req.PodUID = "pod"
				pl, _, err := p.Allocate(req)
				require.NoError(t, err, "container %d", i)
				require.Equal(t, PoolExclusive, pl.Pool)
				grants = append(grants, pl.CPUs)
			}
			require.NoError(t, p.Check())
			if tc.Expect != "" {
				assert.Equal(t, tc.Expect, grants[0].String())
				return
			}
			var uncores []int
			for _, g := range grants {
				for _, id := range g.List() {
					cpu, _ := topo.CPU(id)
					uncores = append(uncores, cpu.L3)
				}
			}
			assert.Equal(t, tc.ExpectUncore, cpuset.New(uncores...).List())
		})
	}
}
