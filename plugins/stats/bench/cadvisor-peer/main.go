// Command cadvisor-peer is the stats plugin's benchmark peer: cAdvisor's
// library (manager, raw cgroup factory, Prometheus collector) wired the way
// the kubelet runs its embedded cAdvisor (housekeeping 10 s, dynamic up to
// 15 s, raw cgroups only, the expensive metric groups off), serving the
// same /metrics the cadvisor binary would, for the cgroups under -prefix.
// It lives in its own module so that cAdvisor never enters the suite's.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/cadvisor/lib/cache/memory"
	"github.com/google/cadvisor/lib/container"
	"github.com/google/cadvisor/lib/manager"
	"github.com/google/cadvisor/lib/metrics"
	"github.com/google/cadvisor/lib/model"
	"github.com/google/cadvisor/lib/utils/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address of /metrics; the bound address is printed on stdout")
	prefix := flag.String("prefix", "/", "serve only the raw cgroups under this path")
	housekeeping := flag.Duration("housekeeping", 10*time.Second, "housekeeping interval (the kubelet's)")
	flag.Parse()
	if err := flag.Set("max_housekeeping_interval", "15s"); err != nil {
		log.Fatalf("setting cAdvisor's max_housekeeping_interval: %v", err)
	}
	// Everything but the groups the notes list as off, as the kubelet does.
	included := container.MetricSet{
		container.CpuUsageMetrics: {}, container.MemoryUsageMetrics: {}, container.CpuLoadMetrics: {},
		container.DiskIOMetrics: {}, container.AppMetrics: {}, container.OOMMetrics: {}, container.PressureMetrics: {},
	}
	dynamic := true
	m, err := manager.New(memory.New(2*time.Minute, nil), sysfs.NewRealSysFs(),
		manager.HousekeepingConfig{Interval: housekeeping, AllowDynamic: &dynamic},
		included, []string{*prefix}, nil, "", 0)
	if err != nil {
		log.Fatalf("creating the cAdvisor manager: %v", err)
	}
	if err := m.Start(); err != nil {
		log.Fatalf("starting the cAdvisor manager: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPrometheusCollector(m, nil, included, clock.RealClock{},
		model.RequestOptions{IdType: "name", Count: 1, Recursive: true}))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listening on %s: %v", *addr, err)
	}
	fmt.Println(ln.Addr().String())
	os.Stdout.Sync()
	log.Fatal(http.Serve(ln, nil))
}
