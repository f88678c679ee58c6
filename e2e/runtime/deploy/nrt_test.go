package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	topologyclient "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/typed/topology/v1alpha2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

// nrtNamespace holds the NodeResourceTopology scenario's pods.
const nrtNamespace = "nrt"

// nodeResourceTopology: topology-aware publishes the node's
// NodeResourceTopology (the sandbox's values enable it, with the CRD), and
// after every step the object says what the plugin's own metrics say of
// each NUMA node (the exclusive pool's CPUs and the Memory Manager's
// memory, allocatable and free): installed; a Guaranteed pod granted an
// exclusive CPU and 64Mi (the object shows one CPU and 64Mi fewer
// available); a second Guaranteed pod of 500m on the shared pool (nothing
// the scheduler counts changes); the first deleted (everything back). The
// object belongs to the Node and carries the plugin's topology policy and
// scope. The staleness after each step, from the plugin's
// nrt_staleness_seconds, is logged for docs/benchmarks.md, never asserted.
func nodeResourceTopology(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	first := sandbox.BusyboxPod("nrt-first")
	first.Namespace = nrtNamespace
	first.Spec.Containers[0].Resources = guaranteed("1", "64Mi")
	if why := sb.CannotRun(first); why != "" {
		t.Skip(why)
	}
	second := sandbox.BusyboxPod("nrt-second")
	second.Namespace = nrtNamespace
	second.Spec.Containers[0].Resources = guaranteed("500m", "32Mi")
	config, err := clientcmd.BuildConfigFromFlags("", sb.Kubeconfig())
	require.NoError(t, err)
	client, err := topologyclient.NewForConfig(config)
	require.NoError(t, err)
	nrts := client.NodeResourceTopologies()
	createNamespace(ctx, t, sb, nrtNamespace)
	check := &nrtCheck{sb: sb, nrts: nrts}

	installed := check.step(ctx, t, "installed")
	obj, err := nrts.Get(ctx, sb.NodeName(), metav1.GetOptions{})
	require.NoError(t, err)
	node, err := sb.Client().CoreV1().Nodes().Get(ctx, sb.NodeName(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}, obj.OwnerReferences,
		"the object goes with the node")
	assert.Equal(t, v1alpha2.AttributeList{{Name: "topologyManagerPolicy", Value: "none"}, {Name: "topologyManagerScope", Value: "container"}},
		obj.Attributes, "the plugin's policy and scope (the chart's configuration leaves the defaults)")

	for _, p := range []*corev1.Pod{first, second} {
		_, err := sb.Client().CoreV1().Pods(nrtNamespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = sb.WaitPodRunning(ctx, nrtNamespace, p.Name)
		require.NoError(t, err)
		got := check.step(ctx, t, "Guaranteed pod "+p.Name+" running")
		if p == first {
			assert.Equal(t, installed.cpuAvailable-1, got.cpuAvailable, "one CPU granted exclusively")
			assert.Equal(t, installed.memoryAvailable-64<<20, got.memoryAvailable, "64Mi granted")
		} else {
			assert.Equal(t, installed.cpuAvailable-1, got.cpuAvailable, "a shared Guaranteed pod takes no exclusive CPU")
		}
	}
	for _, p := range []*corev1.Pod{first, second} {
		deletePod(ctx, t, sb, nrtNamespace, p.Name)
		got := check.step(ctx, t, "pod "+p.Name+" deleted")
		if p == first {
			assert.Equal(t, installed, got, "the deletion gave everything back")
		}
	}
}

// zoneFigures are what the scheduler counts of a zone, or of all zones
// summed.
type zoneFigures struct {
	cpuAllocatable, cpuAvailable, memoryAllocatable, memoryAvailable int64
}

// nrtCheck compares the node's NodeResourceTopology with the plugin's
// metrics, step by step.
type nrtCheck struct {
	sb   *sandbox.Sandbox
	nrts topologyclient.NodeResourceTopologyInterface
	// staleness is the plugin's histogram at the last step.
	staleness *dto.Histogram
}

// step waits until the node's NodeResourceTopology says, zone by zone,
// what topology-aware's metrics say of the NUMA nodes, logs the staleness
// the plugin measured since the last step, and returns the figures summed
// over the zones.
func (c *nrtCheck) step(ctx context.Context, t *testing.T, step string) zoneFigures {
	t.Helper()
	sb, nrts := c.sb, c.nrts
	var sum zoneFigures
	var families map[string]*dto.MetricFamily
	err := sandbox.PollUntil(ctx, 30*time.Second, 50*time.Millisecond, func() error {
		var err error
		if families, err = topologyAwareMetrics(ctx, t, sb); err != nil {
			return err
		}
		want := zonesFromMetrics(families)
		obj, err := nrts.Get(ctx, sb.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := zonesFromNRT(obj)
		if len(want) == 0 || !maps.Equal(want, got) {
			return fmt.Errorf("the NodeResourceTopology says %+v, the plugin's metrics %+v", got, want)
		}
		sum = zoneFigures{}
		for _, z := range got {
			sum.cpuAllocatable += z.cpuAllocatable
			sum.cpuAvailable += z.cpuAvailable
			sum.memoryAllocatable += z.memoryAllocatable
			sum.memoryAvailable += z.memoryAvailable
		}
		return nil
	})
	require.NoError(t, err, "%s: the NodeResourceTopology equals the plugin's state", step)
	c.logStaleness(t, step, families["nri_suite_topology_aware_nrt_staleness_seconds"], failedNRTUpdates(families))
	return sum
}

// topologyAwareMetrics scrapes topology-aware's /metrics.
func topologyAwareMetrics(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) (map[string]*dto.MetricFamily, error) {
	body, err := get(ctx, sb, "http://"+catalog.TopologyAware.Addr(pluginHost(ctx, t, sb, "topology-aware"))+"/metrics")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}

// zonesFromMetrics are the plugin's figures by zone name (node-N): the
// exclusive pool's grantable and free CPUs, the accounted and free memory.
func zonesFromMetrics(families map[string]*dto.MetricFamily) map[string]zoneFigures {
	out := map[string]zoneFigures{}
	each := func(name string, set func(z *zoneFigures, v int64)) {
		for _, m := range families["nri_suite_topology_aware_"+name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if pool, ok := labels["pool"]; ok && pool != "exclusive" {
				continue
			}
			zone := "node-" + labels["node"]
			z := out[zone]
			set(&z, int64(math.Round(m.GetGauge().GetValue())))
			out[zone] = z
		}
	}
	each("pool_capacity_cpus", func(z *zoneFigures, v int64) { z.cpuAllocatable = v })
	each("pool_free_cpus", func(z *zoneFigures, v int64) { z.cpuAvailable = v })
	each("memory_capacity_bytes", func(z *zoneFigures, v int64) { z.memoryAllocatable = v })
	each("memory_free_bytes", func(z *zoneFigures, v int64) { z.memoryAvailable = v })
	return out
}

// zonesFromNRT are the object's figures by zone name.
func zonesFromNRT(obj *v1alpha2.NodeResourceTopology) map[string]zoneFigures {
	out := map[string]zoneFigures{}
	for _, zone := range obj.Zones {
		var z zoneFigures
		for _, r := range zone.Resources {
			switch corev1.ResourceName(r.Name) {
			case corev1.ResourceCPU:
				z.cpuAllocatable, z.cpuAvailable = r.Allocatable.Value(), r.Available.Value()
			case corev1.ResourceMemory:
				z.memoryAllocatable, z.memoryAvailable = r.Allocatable.Value(), r.Available.Value()
			}
		}
		out[zone.Name] = z
	}
	return out
}

// failedNRTUpdates is nrt_updates_total{outcome="error"}: the retries
// behind a staleness.
func failedNRTUpdates(families map[string]*dto.MetricFamily) float64 {
	for _, m := range families["nri_suite_topology_aware_nrt_updates_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "error" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// logStaleness logs how long the object took to show the changes since
// the previous step: the mean, and the bucket that holds them all; and
// how many updates failed since the plugin started.
func (c *nrtCheck) logStaleness(t *testing.T, step string, family *dto.MetricFamily, failed float64) {
	t.Helper()
	if len(family.GetMetric()) != 1 {
		t.Logf("%s: no nrt_staleness_seconds", step)
		return
	}
	h := family.GetMetric()[0].GetHistogram()
	prev := c.staleness
	c.staleness = h
	count, sum := h.GetSampleCount()-prev.GetSampleCount(), h.GetSampleSum()-prev.GetSampleSum()
	if count == 0 {
		t.Logf("%s: the object needed no update", step)
		return
	}
	within := "+Inf"
	for i, b := range h.GetBucket() {
		before := uint64(0)
		if prev != nil {
			before = prev.GetBucket()[i].GetCumulativeCount()
		}
		if b.GetCumulativeCount()-before == count {
			within = strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) + " s"
			break
		}
	}
	t.Logf("%s: NodeResourceTopology staleness after the change: %d update(s), mean %.0f ms, all within %s (%.0f failed updates since the plugin started)",
		step, count, 1000*sum/float64(count), within, failed)
}

// deletePod deletes the pod and waits until the API has forgotten it (its
// containers stopped, the plugins told).
func deletePod(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, namespace, name string) {
	t.Helper()
	pods := sb.Client().CoreV1().Pods(namespace)
	require.NoError(t, pods.Delete(ctx, name, metav1.DeleteOptions{}))
	require.NoError(t, sandbox.PollUntil(ctx, time.Minute, 200*time.Millisecond, func() error {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s/%s is still there (%v)", namespace, name, err)
	}), "deleting pod %s/%s", namespace, name)
}
