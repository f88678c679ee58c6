package collect

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/plugins/stats/bench/cgtree"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

const benchPods = 1000

func benchCollector(b *testing.B, root string, inv *inventory.Inventory) *Collector {
	b.Helper()
	layout, err := cgstats.Detect(root)
	require.NoError(b, err)
	reader, err := cgstats.NewReader(layout, cgstats.Options{Swap: swapActive(b), SpecMaxAge: cgstats.DefaultSpecMaxAge})
	require.NoError(b, err)
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	c, err := New(inv, reader, Options{CacheFor: 0, Workers: DefaultOptions().Workers}, "nri_suite_stats", logrus.NewEntry(log))
	require.NoError(b, err)
	return c
}

func swapActive(b *testing.B) bool {
	on, err := cgstats.SwapActive("/proc/swaps")
	require.NoError(b, err)
	return on
}

// runSnapshots reads every cgroup b.N times and checks the last reading.
func runSnapshots(b *testing.B, c *Collector) {
	b.Helper()
	b.ReportAllocs()
	var s *Snapshot
	for b.Loop() {
		s = c.Snapshot()
	}
	read := 0
	for _, p := range s.Pods {
		for _, ctr := range p.Containers {
			if ctr.Sample != nil && ctr.Sample.CPU != nil && ctr.Sample.Memory != nil {
				read++
			}
		}
	}
	require.Equal(b, benchPods, read, "containers read with CPU and memory")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/scrape")
}

// BenchmarkSnapshot reads 1,000 pods with one container each (2,001
// cgroups with the root): on a fixture v1 tree, and on real cgroups of
// this host under a private parent when run as root.
func BenchmarkSnapshot(b *testing.B) {
	b.Run("fixture-v1", func(b *testing.B) {
		root := b.TempDir()
		writeV1(b, root, "/", 1, 1<<20)
		for i := range benchPods {
			pod := path.Join("/bench", cgtree.PodName(i))
			writeV1(b, root, pod, 1, 2<<20)
			writeV1(b, root, path.Join(pod, cgtree.ContainerName(i)), 1, 2<<20)
		}
		runSnapshots(b, benchCollector(b, root, cgtree.Inventory("/bench", benchPods)))
	})
	b.Run("host", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("creating real cgroups needs root")
		}
		parent := fmt.Sprintf("/nri-stats-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
		tree, err := cgtree.Create(cgstats.DefaultRoot, parent, benchPods)
		require.NoError(b, err)
		b.Cleanup(func() { require.NoError(b, tree.Remove()) })
		runSnapshots(b, benchCollector(b, cgstats.DefaultRoot, cgtree.Inventory(parent, benchPods)))
	})
}

// BenchmarkScrape serves the cAdvisor metrics of 1,000 pods from a
// snapshot already taken (interval mode): the cost of a scrape itself,
// written directly (what /metrics/cadvisor does) and through a registry.
func BenchmarkScrape(b *testing.B) {
	root := b.TempDir()
	writeV1(b, root, "/", 1, 1<<20)
	for i := range benchPods {
		pod := path.Join("/bench", cgtree.PodName(i))
		writeV1(b, root, pod, 1, 2<<20)
		writeV1(b, root, path.Join(pod, cgtree.ContainerName(i)), 1, 2<<20)
	}
	c := benchCollector(b, root, cgtree.Inventory("/bench", benchPods))
	c.Configure(time.Hour, 0, 0)
	c.Snapshot()
	m := NewCAdvisor(c)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter)
	}{
		{"direct", func(w http.ResponseWriter) { require.NoError(b, m.WriteText(w)) }},
		{"registry", func(w http.ResponseWriter) {
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", nil))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				w := httptest.NewRecorder()
				tc.serve(w)
				size = w.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/scrape")
		})
	}
}
