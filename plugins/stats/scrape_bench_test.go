package main_test

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/nri-suite/nri-suite/e2e/harness"
	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
)

// BenchmarkResourceScrape is metrics-server's scrape (GET
// /metrics/resource over HTTPS with a bearer token, gzip accepted, a new
// connection each) of nri-stats beside the same scrape of the kubelet, on
// one real node running STATS_BENCH_PODS static pods (default 100) of
// STATS_BENCH_CONTAINERS pause containers each (default 10): 1,000
// containers that the kubelet itself runs, so that both serve all of them.
// nri-stats reads the cgroups on the scrape (its default, `cache: 1s`, the
// scrapes 1.5 s apart so that each reads anew, as metrics-server's 15 s
// apart do) and, in its second configuration, serves the reading its
// background loop made (`interval: 10s`), as the kubelet serves its
// cAdvisor's housekeeping. Per scrape: the wall time (ns/op, and the
// median and 90th percentile), the bytes on the wire (gzip) and of text,
// the series. Root and the runtime binaries: see e2e/runtime.
//
//	sudo go test -run '^$' -bench ResourceScrape -benchtime 20x -timeout 30m ./plugins/stats/
func BenchmarkResourceScrape(b *testing.B) {
	pods, perPod := envInt(b, "STATS_BENCH_PODS", 100), envInt(b, "STATS_BENCH_CONTAINERS", 10)
	sandbox.RequirePrereqs(b, "containerd")
	ctx := sandbox.TestContext(b)
	sb, err := sandbox.Start(ctx, sandbox.Options{Runtime: "containerd", TolerateMissingPlugins: true, Log: sandbox.TestLogger(b)})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, sb.Close()) })

	dir := b.TempDir()
	ca, err := pki.NewCA("bench CA")
	require.NoError(b, err)
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "nri-stats", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.Server})
	require.NoError(b, err)
	const token = "metrics-server-token"
	files := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "token": []byte(token)}
	for name, data := range files {
		require.NoError(b, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	spec := sandbox.PluginSpec{Binary: harness.BuildPlugin(b, pluginPkg), Name: "stats", Idx: "90",
		Args: []string{"--stats-tls-cert", filepath.Join(dir, "tls.crt"), "--stats-tls-key", filepath.Join(dir, "tls.key"),
			"--stats-token-file", filepath.Join(dir, "token")}}

	// Before the sandbox's teardown, which stops what is left one pod at a
	// time: the kubelet stops them side by side, ten at a time here.
	b.Cleanup(func() {
		began := time.Now()
		var g errgroup.Group
		g.SetLimit(10)
		for i := range pods {
			g.Go(func() error { return sb.RemovePod(context.Background(), fmt.Sprintf("scale-%03d", i)) })
		}
		require.NoError(b, g.Wait())
		b.Logf("%d pods removed in %s", pods, time.Since(began).Round(time.Second))
	})
	start := time.Now()
	for i := range pods {
		names := make([]string, perPod)
		for c := range names {
			names[c] = "c" + strconv.Itoa(c)
		}
		pod := sandbox.BusyboxPod(fmt.Sprintf("scale-%03d", i), names...)
		for c := range pod.Spec.Containers {
			pod.Spec.Containers[c].Image, pod.Spec.Containers[c].Command = sandbox.PauseImage, []string{"/pause"}
		}
		require.NoError(b, sb.WritePod(pod))
	}
	want := pods * perPod
	kubelet := func(ctx context.Context) ([]byte, error) { return sb.KubeletGet(ctx, "/metrics/resource") }
	require.NoError(b, sandbox.PollUntil(ctx, 20*time.Minute, 5*time.Second, func() error {
		return countStarted(ctx, kubelet, want)
	}), "the kubelet runs every container")
	b.Logf("%d containers in %d pods running after %s", want, pods, time.Since(start).Round(time.Second))

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback bench
		DisableKeepAlives: true, DisableCompression: true}}
	ours := func(ctx context.Context) ([]byte, error) {
		return scrapeOnce(ctx, client, "https://127.0.0.1:9191/metrics/resource", token, nil)
	}
	for _, cfg := range []struct{ name, config string }{
		{"nri-stats/on-scrape", "cache: 1s\n"},
		{"nri-stats/interval-10s", "interval: 10s\n"},
	} {
		spec.Config = []byte(cfg.config)
		plugin, err := sb.StartPlugin(spec)
		require.NoError(b, err)
		require.NoError(b, sandbox.PollUntil(ctx, 2*time.Minute, time.Second, func() error { return countStarted(ctx, ours, want) }))
		b.Run(cfg.name, func(b *testing.B) {
			benchScrapes(ctx, b, client, "https://127.0.0.1:9191/metrics/resource", token)
		})
		plugin.Stop(10 * time.Second)
	}
	b.Run("kubelet", func(b *testing.B) {
		benchScrapes(ctx, b, client, "https://"+sb.KubeletAddr()+"/metrics/resource", "")
	})
}

// benchScrapes scrapes url b.N times, 1.5 s apart, and reports the wall
// time, the bytes and the series of each.
func benchScrapes(ctx context.Context, b *testing.B, client *http.Client, url, token string) {
	var durations []time.Duration
	var wire, text int
	for range b.N {
		b.StopTimer()
		time.Sleep(1500 * time.Millisecond)
		var n int
		b.StartTimer()
		began := time.Now()
		body, err := scrapeOnce(ctx, client, url, token, &n)
		durations = append(durations, time.Since(began))
		if err != nil {
			b.Fatal(err)
		}
		wire, text = n, len(body)
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(wire), "gzip-bytes")
	b.ReportMetric(float64(text), "text-bytes")
}

// scrapeOnce GETs url as metrics-server does (gzip accepted, a bearer token
// if set) and returns the text; wire, if set, gets the bytes received.
func scrapeOnce(ctx context.Context, client *http.Client, url, token string, wire *int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if wire != nil {
		*wire = len(raw)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return raw, nil
	}
	gz, err := gzip.NewReader(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(gz)
}

// countStarted checks that get's /metrics/resource has the start time of
// at least want containers of the benchmark's pods.
func countStarted(ctx context.Context, get func(context.Context) ([]byte, error), want int) error {
	body, err := get(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "container_start_time_seconds{") && strings.Contains(line, `pod="scale-`) {
			n++
		}
	}
	if n < want {
		return fmt.Errorf("%d of %d containers", n, want)
	}
	return nil
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	return n
}
