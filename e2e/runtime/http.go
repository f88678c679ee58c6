package runtime

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// httpTimeout bounds one request to something the sandbox serves on
// loopback, so that a hung server fails a poll's attempt, not the test.
const httpTimeout = 10 * time.Second

// kubeletClient accepts the kubelet's self-signed certificate: the sandbox's
// kubelet serves HTTPS on loopback only.
var kubeletClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test kubelet

// HTTPGet returns the body of a 200 answer to a GET of url; any other
// status is an error that quotes the start of the body.
func HTTPGet(ctx context.Context, url string) ([]byte, error) {
	return get(ctx, http.DefaultClient, url)
}

// NodeGet is HTTPGet of a URL as seen from the node: in a cluster, from
// inside its network namespace, where the plugins on the host network
// listen.
func (s *Sandbox) NodeGet(ctx context.Context, url string) ([]byte, error) {
	if s.cluster != nil {
		return get(ctx, s.cluster.http, url)
	}
	return HTTPGet(ctx, url)
}

// NodeClient is an HTTP client that reaches what listens on the node (in a
// cluster, inside its network namespace) with tlsConfig, for a test that
// chooses its own credentials; NodeGet's is the admin's.
func (s *Sandbox) NodeClient(tlsConfig *tls.Config) *http.Client {
	transport := &http.Transport{TLSClientConfig: tlsConfig}
	if s.cluster != nil {
		transport.DialContext = s.cluster.ns.Dial
	}
	return &http.Client{Transport: transport, Timeout: httpTimeout}
}

// KubeletGet is HTTPGet of path (such as "/pods" or "/metrics/probes") on
// the kubelet's HTTPS port (KubeletAddr); a cluster's kubelet is asked in
// its network namespace, as the cluster's admin.
func (s *Sandbox) KubeletGet(ctx context.Context, path string) ([]byte, error) {
	if s.kubelet == nil {
		return nil, fmt.Errorf("GET %s of the kubelet: the sandbox runs none", path)
	}
	client := kubeletClient
	if s.cluster != nil {
		client = s.cluster.http
	}
	return get(ctx, client, "https://"+s.KubeletAddr()+path)
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	return body, nil
}

// MetricValue scrapes the Prometheus text at url and returns the sum of the
// counters or gauges of family name whose labels include every one of
// labels: a test's view of a plugin's decisions.
func MetricValue(ctx context.Context, url, name string, labels map[string]string) (float64, error) {
	body, err := HTTPGet(ctx, url)
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, fmt.Errorf("parsing the metrics of %s: %w", url, err)
	}
	fam, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("%s serves no metric %s", url, name)
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range labels {
			matches = matches && have[k] == v
		}
		if matches {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum, nil
}
