package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

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
