package deploy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
)

// podNetwork runs two pods off the host network, each in the network
// namespace its sandbox made on the cluster's CNI bridge, and has one send
// a MiB to the other over TCP. nri-stats, as the chart runs it (in the
// node's PID namespace), serves each pod's eth0 on the pod's network
// series: the sender's transmit and the receiver's receive counters rise
// by at least the MiB, and every counter lies between a scrape before the
// pod's own read of its counters and the scrapes after it. On CRI-O, which runs no
// sandbox process for such pods, the counters are read through a
// container's process. The kubelet's cAdvisor serves no pod's network in
// the sandbox (plugins/stats' TestRealNode), so there is nothing of its to
// compare with.
func podNetwork(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	const port, size = "5000", 1 << 20
	scrape := statsScraper(t, sb)
	// The listener's stdin stays open (busybox nc closes the connection
	// once its stdin ends, before the MiB is through), and keeps the
	// container running after the transfer.
	receiver := podOffHost(ctx, t, sb, "net-receiver", "sleep 3600 | nc -l -p "+port+" > /dev/null")
	sender := podOffHost(ctx, t, sb, "net-sender", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done")

	var sent, received float64
	require.NoError(t, poll(ctx, func() error {
		var err error
		metrics := scrape(ctx)
		if sent, err = eth0(metrics, sender.Name, "container_network_transmit_bytes_total"); err == nil {
			received, err = eth0(metrics, receiver.Name, "container_network_receive_bytes_total")
		}
		return err
	}), "nri-stats serves both pods' network")
	out, err := sb.Kubectl(ctx, "exec", sender.Name, "--", "sh", "-c",
		fmt.Sprintf("head -c %d /dev/zero | nc -w 5 %s %s", size, receiver.Status.PodIP, port))
	require.NoError(t, err, "sending from %s to %s: %s", sender.Name, receiver.Name, out)
	require.NoError(t, poll(ctx, func() error {
		metrics := scrape(ctx)
		if now, err := eth0(metrics, sender.Name, "container_network_transmit_bytes_total"); err != nil || now < sent+size {
			return fmt.Errorf("sender transmitted %.0f bytes since (%v)", now-sent, err)
		}
		if now, err := eth0(metrics, receiver.Name, "container_network_receive_bytes_total"); err != nil || now < received+size {
			return fmt.Errorf("receiver received %.0f bytes since (%v)", now-received, err)
		}
		return nil
	}), "the MiB in the sender's and the receiver's counters")

	// The pod's own view, from the kernel's counters in its sysfs (not the
	// file nri-stats parses): a scrape before it is at most that, and the
	// scrapes after it reach it once nri-stats' cached reading is renewed.
	families := []string{"container_network_receive_bytes_total", "container_network_receive_packets_total",
		"container_network_transmit_bytes_total", "container_network_transmit_packets_total"}
	for _, name := range []string{sender.Name, receiver.Name} {
		before := scrape(ctx)
		own, err := sb.Kubectl(ctx, "exec", name, "--", "sh", "-c",
			"cd /sys/class/net/eth0/statistics && cat rx_bytes rx_packets tx_bytes tx_packets")
		require.NoError(t, err, "reading %s's eth0 statistics: %s", name, own)
		values := strings.Fields(string(own))
		require.Len(t, values, len(families), "%s's eth0 statistics: %q", name, own)
		for i, family := range families {
			value, err := strconv.ParseFloat(values[i], 64)
			require.NoError(t, err)
			lo, err := eth0(before, name, family)
			require.NoError(t, err)
			assert.LessOrEqual(t, lo, value, "%s %s: nri-stats' before the pod's own", name, family)
			var hi float64
			assert.NoError(t, poll(ctx, func() error {
				if hi, err = eth0(scrape(ctx), name, family); err == nil && hi < value {
					err = fmt.Errorf("nri-stats serves %.0f", hi)
				}
				return err
			}), "%s %s: nri-stats reaches the pod's own %.0f", name, family, value)
			t.Logf("%s %s{interface=\"eth0\"}: nri-stats %.0f, then %.0f, the pod's own %.0f", name, family, lo, hi, value)
		}
	}
}

// podOffHost runs script in a busybox pod on the cluster's pod network and
// returns it running, with its address.
func podOffHost(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name, script string) *corev1.Pod {
	t.Helper()
	pod := sandbox.BusyboxPod(name)
	pod.Spec.HostNetwork = false
	pod.Spec.Containers[0].Command = []string{"sh", "-c", script}
	writePod(ctx, t, sb, pod)
	running, err := sb.WaitPodRunning(ctx, pod.Namespace, name)
	require.NoError(t, err)
	require.NotEmpty(t, running.Status.PodIP, "pod %s on the pod network", name)
	return running
}

// statsScraper returns a function that reads nri-stats' /metrics/cadvisor
// on the node, as a client of the cluster's CA in system:masters.
func statsScraper(t *testing.T, sb *sandbox.Sandbox) func(context.Context) map[string]*dto.MetricFamily {
	t.Helper()
	ca, err := pki.LoadCA(sb.PKI().CACert, sb.PKI().CAKey)
	require.NoError(t, err)
	caPEM, err := os.ReadFile(sb.PKI().CACert)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	client := sb.NodeClient(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCertificate(t, ca, "nri-suite-test:admin")}})
	url := "https://" + net.JoinHostPort(sb.NodeIP().String(), strconv.Itoa(suite.StatsPort)) + "/metrics/cadvisor"
	return func(ctx context.Context) map[string]*dto.MetricFamily {
		t.Helper()
		code, body := fetch(ctx, t, client, url, "")
		require.Equal(t, http.StatusOK, code, "%s: %s", url, body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(body))
		require.NoError(t, err)
		return families
	}
}

// eth0 is the value of family's series of pod's eth0.
func eth0(families map[string]*dto.MetricFamily, pod, family string) (float64, error) {
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pod"] == pod && labels["interface"] == "eth0" {
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no %s series of pod %s's eth0", family, pod)
}
