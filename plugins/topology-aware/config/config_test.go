package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/common/topology/sysfs"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/classes"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

func fixture(t *testing.T, name string) *topology.Topology {
	t.Helper()
	topo, err := sysfs.Discover(filepath.Join("..", "..", "..", "common", "topology", "testdata", name, "sysfs"))
	require.NoError(t, err)
	return topo
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want policy.Config
	}{
		{
			name: "empty means the defaults",
			yaml: "",
			want: policy.Config{
				ReservedNamespaces: []string{"kube-system"},
				ReservedGuaranteed: policy.ReservedGuaranteedExclusive,
				TopologyPolicy:     policy.TopologyNone,
				TopologyScope:      policy.ScopeContainer,
			},
		},
		{
			name: "every key",
			yaml: `
available-cpus: "0-39"
reserved-cpus: "0,20"
reserved-namespaces: [kube-system, monitoring]
reserved-namespaces-guaranteed: reserved
options: [full-pcpus-only, distribute-across-numa, spread-across-cores, align-by-uncore-cache, strict-reservation, kubelet-packing]
max-allowable-numa-nodes: 9
topology-policy: single-numa-node
topology-scope: pod
prefer-closest-numa-nodes: true
reserved-memory:
  0: 1Gi
  2: "536870912"
`,
			want: policy.Config{
				AvailableCPUs:         cpuset.Range(0, 39),
				ReservedCPUs:          cpuset.New(0, 20),
				ReservedNamespaces:    []string{"kube-system", "monitoring"},
				ReservedGuaranteed:    policy.ReservedGuaranteedReserved,
				KubeletPacking:        true,
				MaxAllowableNUMANodes: 9,
				FullPCPUsOnly:         true,
				DistributeAcrossNUMA:  true,
				SpreadAcrossCores:     true,
				AlignByUncoreCache:    true,
				StrictReservation:     true,
				TopologyPolicy:        policy.TopologySingleNUMANode,
				TopologyScope:         policy.ScopePod,
				PreferClosestNUMA:     true,
				ReservedMemory:        map[int]uint64{0: 1 << 30, 2: 512 << 20},
			},
		},
		{
			name: "the kubelet's names, as a list",
			yaml: `options: [distribute-cpus-across-numa, prefer-align-cpus-by-uncorecache, strict-cpu-reservation, align-by-socket, prefer-closest-numa-nodes]
max-allowable-numa-nodes: 16
reserved-namespaces-guaranteed: reserved-allow-fewer
`,
			want: policy.Config{
				ReservedNamespaces:    []string{"kube-system"},
				ReservedGuaranteed:    policy.ReservedGuaranteedAllowFewer,
				DistributeAcrossNUMA:  true,
				AlignByUncoreCache:    true,
				StrictReservation:     true,
				AlignBySocket:         true,
				PreferClosestNUMA:     true,
				MaxAllowableNUMANodes: 16,
				TopologyPolicy:        policy.TopologyNone,
				TopologyScope:         policy.ScopeContainer,
			},
		},
		{
			name: "the kubelet's policy options, as a mapping",
			yaml: `options:
  full-pcpus-only: "true"
  distribute-cpus-across-cores: "false"
  kubelet-packing: true
  max-allowable-numa-nodes: "12"
`,
			want: policy.Config{
				ReservedNamespaces:    []string{"kube-system"},
				ReservedGuaranteed:    policy.ReservedGuaranteedExclusive,
				FullPCPUsOnly:         true,
				KubeletPacking:        true,
				MaxAllowableNUMANodes: 12,
				TopologyPolicy:        policy.TopologyNone,
				TopologyScope:         policy.ScopeContainer,
			},
		},
		{
			name: "a count of reserved CPUs, no reserved namespaces",
			yaml: "reserved-cpu-count: 2\nreserved-namespaces: []\n",
			want: policy.Config{
				ReservedCPUCount:   2,
				ReservedNamespaces: []string{},
				ReservedGuaranteed: policy.ReservedGuaranteedExclusive,
				TopologyPolicy:     policy.TopologyNone,
				TopologyScope:      policy.ScopeContainer,
			},
		},
		{
			name: "a single reserved CPU written as a string",
			yaml: `reserved-cpus: "2"`,
			want: policy.Config{
				ReservedCPUs:       cpuset.New(2),
				ReservedNamespaces: []string{"kube-system"},
				ReservedGuaranteed: policy.ReservedGuaranteedExclusive,
				TopologyPolicy:     policy.TopologyNone,
				TopologyScope:      policy.ScopeContainer,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml), "test.yaml")
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Config)
			assert.Empty(t, got.StateDir, "where --state-dir says")
		})
	}
	got, err := Parse([]byte("state-dir: /run/nri-suite/topology-aware-2\n"), "test.yaml")
	require.NoError(t, err)
	assert.Equal(t, "/run/nri-suite/topology-aware-2", got.StateDir)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"unknown key", "reserved-cpu: 2", []string{"test.yaml", `unknown key "reserved-cpu"`}},
		{"unknown option", "options: [full-pcpus-only, pack-tightly]",
			[]string{"options", "line 1", `"pack-tightly"`, "full-pcpus-only, kubelet-packing, max-allowable-numa-nodes, prefer-closest-numa-nodes",
				"or the kubelet's distribute-cpus-across-cores, distribute-cpus-across-numa, prefer-align-cpus-by-uncorecache, strict-cpu-reservation"}},
		{"option twice", "options: [strict-reservation, strict-reservation]", []string{"options", `"strict-reservation"`, "twice"}},
		{"option twice by the kubelet's name", "options: [strict-reservation, strict-cpu-reservation]",
			[]string{"options", `"strict-reservation" is listed twice (as "strict-reservation" and as "strict-cpu-reservation")`}},
		{"option value not a boolean", "options: {full-pcpus-only: yes-please}", []string{"options", "line 1", "full-pcpus-only", `"yes-please"`, `expected "true" or "false"`}},
		{"option value of a kubelet name", "options: {strict-cpu-reservation: maybe}", []string{"strict-cpu-reservation (the kubelet's name of strict-reservation)", `"maybe"`}},
		{"option without a value in the mapping", "options: {full-pcpus-only: }", []string{"full-pcpus-only", `""`, `expected "true" or "false"`}},
		{"max-allowable-numa-nodes in the list", "options: [max-allowable-numa-nodes]", []string{"max-allowable-numa-nodes", "expected a number of NUMA nodes, in the mapping form"}},
		{"max-allowable-numa-nodes not a number", "options: {max-allowable-numa-nodes: many}", []string{"max-allowable-numa-nodes", `"many"`}},
		{"max-allowable-numa-nodes below the kubelet's", "max-allowable-numa-nodes: 4", []string{"max-allowable-numa-nodes: 4: expected at least 8"}},
		{"max-allowable-numa-nodes twice", "max-allowable-numa-nodes: 10\noptions: {max-allowable-numa-nodes: \"12\"}",
			[]string{"max-allowable-numa-nodes is set both as a key (10) and as an option (12)"}},
		{"options as a string", "options: full-pcpus-only", []string{"line 1", "expected a list of option names or a mapping of names to values"}},
		{"option as a mapping", "options: [{full-pcpus-only: true}]", []string{"line 1", "expected an option name, got a YAML mapping"}},
		{"bad reserved-namespaces-guaranteed", "reserved-namespaces-guaranteed: always", []string{"reserved-namespaces-guaranteed", `"always"`, "exclusive, reserved, reserved-allow-fewer"}},
		{"bad topology policy", "topology-policy: strict", []string{"topology-policy", `"strict"`, "none, best-effort, restricted, single-numa-node"}},
		{"bad scope", "topology-scope: node", []string{"topology-scope", `"node"`, "container, pod"}},
		{"bad cpu list", `available-cpus: "0-x"`, []string{"line 1", "expected a CPU list", "0-x"}},
		{"reserved cpus as a number", "reserved-cpus: 2", []string{"line 1", "YAML number", "reserved-cpu-count"}},
		{"reserved cpus as a sequence", "reserved-cpus: [0, 1]", []string{"line 1", "expected a CPU list", "sequence"}},
		{"both reserved keys", "reserved-cpus: \"0\"\nreserved-cpu-count: 2", []string{"reserved-cpus \"0\"", "reserved-cpu-count 2", "one of them"}},
		{"negative count", "reserved-cpu-count: -1", []string{"reserved-cpu-count", "-1", ">= 0"}},
		{"empty namespace", "reserved-namespaces: [\"\"]", []string{"reserved-namespaces", `""`, "expected a Kubernetes namespace name"}},
		// A name no namespace can have would put no pod on the reserved CPUs.
		{"namespace with capitals", "reserved-namespaces: [Kube-System]", []string{"reserved-namespaces", `"Kube-System"`, "expected a Kubernetes namespace name"}},
		{"namespace with a dot", "reserved-namespaces: [kube.system]", []string{"reserved-namespaces", `"kube.system"`, "expected a Kubernetes namespace name"}},
		{"namespace with spaces", "reserved-namespaces: [\" kube-system\"]", []string{"reserved-namespaces", `" kube-system"`}},
		{"namespace too long", "reserved-namespaces: [" + strings.Repeat("a", 64) + "]", []string{"reserved-namespaces", "at most 63"}},
		{"namespace of a megabyte", "reserved-namespaces: [" + strings.Repeat("a", 1<<20) + "]", []string{"reserved-namespaces", `"aaaa`, "…(1048576 bytes)"}},
		{"cpu list of a megabyte", "available-cpus: \"0-" + strings.Repeat("x", 1<<20) + "\"", []string{"line 1", "expected a CPU list", "…(1048578 bytes)"}},
		{"namespace twice", "reserved-namespaces: [a, a]", []string{"reserved-namespaces", `"a"`, "twice"}},
		{"bad node id", "reserved-memory: {node0: 1Gi}", []string{"reserved-memory", `"node0"`, "NUMA node id"}},
		{"negative node id", "reserved-memory: {-1: 1Gi}", []string{"reserved-memory", `"-1"`, "NUMA node id"}},
		{"bad quantity", "reserved-memory: {0: lots}", []string{"reserved-memory", "node 0", `"lots"`, "quantity"}},
		{"negative quantity", "reserved-memory: {1: -1Gi}", []string{"reserved-memory", "node 1", `"-1Gi"`}},
		{"fractional bytes", "reserved-memory: {1: 0.5}", []string{"reserved-memory", "node 1", "whole number of bytes"}},
		{"two documents", "options: []\n---\noptions: []\n", []string{"single YAML document"}},
		{"root state dir", "state-dir: /", []string{"test.yaml", `state-dir: "/" is a system directory`}},
		{"system state dir", "state-dir: /run", []string{`state-dir: "/run" is a system directory`}},
		{"relative state dir", "state-dir: state", []string{`state-dir: "state": expected an absolute path`}},
		{"unclean state dir", "state-dir: /run/nri-suite/", []string{`state-dir: "/run/nri-suite/": expected a clean absolute path, such as /run/nri-suite`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "test.yaml")
			require.Error(t, err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes bounded prefixes")
		})
	}
}

func TestLoadValidatesAgainstTheMachine(t *testing.T) {
	topo := fixture(t, "smt-2s-12c-interleaved")
	tests := []struct {
		name    string
		yaml    string
		wantErr string // empty: valid
	}{
		{"defaults", "", ""},
		{"reserved within available", "available-cpus: \"0-9\"\nreserved-cpus: \"0,6\"", ""},
		{"reserved outside available", "available-cpus: \"0-5\"\nreserved-cpus: \"6\"", "6"},
		{"available CPUs the machine lacks", `available-cpus: "0-15"`, "12-15"},
		{"reserved memory on a node the machine lacks", "reserved-memory: {7: 1Gi}", "7"},
		{"align-by-socket with single-numa-node, by the kubelet's spelling", "options: {align-by-socket: \"true\"}\ntopology-policy: single-numa-node",
			"option align-by-socket cannot be used with topology policy single-numa-node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load([]byte(tc.yaml), "test.yaml", topo)
			if tc.wantErr == "" {
				require.NoError(t, err)
				_, err = policy.New(topo, cfg.Config)
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, policy.ErrInvalidConfig), "the policy's error is wrapped: %v", err)
			assert.Contains(t, err.Error(), "test.yaml")
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"available-cpus: \"0-3\"\nreserved-cpus: \"0\"\n",
		"reserved-cpu-count: 2\noptions: [full-pcpus-only]\n",
		"options: [strict-cpu-reservation, align-by-socket, kubelet-packing]\nreserved-namespaces-guaranteed: reserved\n",
		"options: {full-pcpus-only: \"true\", max-allowable-numa-nodes: \"16\", prefer-closest-numa-nodes: false}\n",
		"max-allowable-numa-nodes: 12\noptions: {max-allowable-numa-nodes: \"9\"}\n",
		"options: {full-pcpus-only: [1]}\n",
		"topology-policy: restricted\ntopology-scope: pod\nprefer-closest-numa-nodes: true\n",
		"reserved-memory: {0: 1Gi, 1: 512Mi}\n",
		"reserved-namespaces: []\n",
		"options: [bogus]\n",
		"reserved-cpus: 2\n",
		"[1, 2]",
		"available-cpus: {a: b}\n",
		"state-dir: /run/nri-suite/topology-aware\n",
		"state-dir: /\n",
		"state-dir: state\n",
		"reserved-namespaces: [" + strings.Repeat("A", 1<<13) + "]\n",
		"reserved-memory: {0: " + strings.Repeat("1", 1<<13) + "Qi}\n",
		"blockio:\n  config:\n    Classes:\n      slow: [{Weight: 10}, {Devices: [/dev/vda], ThrottleReadBps: 1Mi}]\n  qos: {BestEffort: slow}\n  namespaces: {batch: slow}\n",
		"rdt:\n  config:\n    partitions:\n      p: {l3Allocation: 50%, classes: {gold: {l3Allocation: 60%}, bronze: {kubernetes: {denyPodAnnotation: true}}}}\n  qos: {Guaranteed: gold}\n",
		"rdt:\n  qos: {Guaranteed: system/default}\n",
		"blockio:\n  config: {Classes: {a/b: []}}\n",
		"blockio:\n  qos: {Burstable: none}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "errors quote bounded prefixes")
			return
		}
		for _, ns := range cfg.ReservedNamespaces {
			assert.True(t, k8s.IsDNSLabel(ns), "accepted namespace %q", ns)
		}
		// Whatever was accepted is self-consistent.
		if cfg.ReservedCPUCount < 0 || (cfg.ReservedCPUCount > 0 && !cfg.ReservedCPUs.IsEmpty()) {
			t.Fatalf("accepted contradictory reserved CPUs: %+v", cfg)
		}
		if _, err := plugin.OneOf("topology-policy", string(cfg.TopologyPolicy), "",
			policy.TopologyNone, policy.TopologyBestEffort, policy.TopologyRestricted, policy.TopologySingleNUMANode); err != nil {
			t.Fatalf("accepted %v", err)
		}
		if cfg.TopologyScope != policy.ScopeContainer && cfg.TopologyScope != policy.ScopePod {
			t.Fatalf("accepted scope %q", cfg.TopologyScope)
		}
		if cfg.MaxAllowableNUMANodes != 0 && cfg.MaxAllowableNUMANodes < policy.DefaultMaxAllowableNUMANodes {
			t.Fatalf("accepted max-allowable-numa-nodes %d", cfg.MaxAllowableNUMANodes)
		}
		if _, err := plugin.OneOf("reserved-namespaces-guaranteed", string(cfg.ReservedGuaranteed), "", policy.ReservedGuaranteedExclusive,
			policy.ReservedGuaranteedReserved, policy.ReservedGuaranteedAllowFewer); err != nil || cfg.ReservedGuaranteed == "" {
			t.Fatalf("accepted reserved-namespaces-guaranteed %q", cfg.ReservedGuaranteed)
		}
		for _, kind := range classes.Kinds {
			rules := cfg.Classes.Rules(kind)
			for _, class := range rules.QOS {
				assert.True(t, rules.Defined(class), "accepted %s class %q of a QoS class, which is not defined", kind, class)
			}
			for ns, class := range rules.Namespaces {
				assert.True(t, k8s.IsDNSLabel(ns) && rules.Defined(class), "accepted %s class %q of namespace %q", kind, class, ns)
			}
		}
	})
}
