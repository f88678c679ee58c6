package classes

import (
	"maps"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Reasons a class is refused, the values of classes_refused_total's reason
// label.
const (
	// RefusedAnnotation: an annotation names a class the configuration does
	// not define (or one pods may not choose); the container is refused.
	RefusedAnnotation = "invalid-annotation"
	// RefusedRDTUnavailable: the container's RDT class is not sent, as the
	// node has no RDT; the container runs without it.
	RefusedRDTUnavailable = "rdt-unavailable"
)

// Tracker keeps the classes of the running containers: it chooses and sets
// them at a creation, forgets them at a release, hands them to the
// checkpoint and takes them back from it, and counts them. Its methods are
// safe for concurrent use (the metrics read it at scrape time).
type Tracker struct {
	node      *Node
	applied   *prometheus.CounterVec
	refused   *prometheus.CounterVec
	collector *collector

	mu  sync.Mutex
	cfg Config
	// running are the classes set on each container, by id: what it runs
	// with, never changed while it runs.
	running map[string]Assignment
}

// NewTracker keeps classes applied on node; metrics are named in namespace.
func NewTracker(node *Node, namespace string) *Tracker {
	t := &Tracker{
		node: node,
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "classes_applied_total",
			Help: "Classes set in containers' adjustments at their creation, by kind (blockio, rdt) and class.",
		}, []string{"kind", "class"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "classes_refused_total",
			Help: "Classes refused, by kind and reason: invalid-annotation (the container is refused), rdt-unavailable (the container runs without its RDT class).",
		}, []string{"kind", "reason"}),
		running: map[string]Assignment{},
	}
	t.collector = newCollector(t, namespace)
	return t
}

// Collectors are the tracker's metrics.
func (t *Tracker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.applied, t.refused, t.collector}
}

// Configure applies cfg on the node; later creations choose by it, and the
// running containers keep their classes.
func (t *Tracker) Configure(cfg Config) error {
	if err := t.node.Apply(cfg); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg = cfg
	return nil
}

// Assign chooses the container's classes. A refusal, an error naming the
// annotation, is counted.
func (t *Tracker) Assign(ctr Container) (Assignment, error) {
	t.mu.Lock()
	cfg := t.cfg
	t.mu.Unlock()
	var a Assignment
	for _, kind := range Kinds {
		class, err := cfg.Rules(kind).Choose(ctr)
		if err != nil {
			t.refused.WithLabelValues(string(kind), RefusedAnnotation).Inc()
			return Assignment{}, err
		}
		a = a.with(kind, class)
	}
	return a, nil
}

// Set sets the container's classes a in its adjustment, records those set
// and returns them as log fields.
func (t *Tracker) Set(id string, adjust *api.ContainerAdjustment, a Assignment) logrus.Fields {
	set, rdtRefused := t.node.Adjust(adjust, a)
	if rdtRefused {
		t.refused.WithLabelValues(string(RDT), RefusedRDTUnavailable).Inc()
	}
	fields := logrus.Fields{}
	for _, kind := range Kinds {
		if class := set.Of(kind); class != "" {
			t.applied.WithLabelValues(string(kind), class).Inc()
			fields[string(kind)+"_class"] = class
		}
	}
	if rdtRefused {
		fields["rdt_class_unavailable"] = a.RDT
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if set != (Assignment{}) {
		t.running[id] = set
	}
	return fields
}

// Forget drops a released container.
func (t *Tracker) Forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, id)
}

// Saved returns the running containers' classes for the checkpoint.
func (t *Tracker) Saved() map[string]Assignment {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.running) == 0 {
		return nil
	}
	return maps.Clone(t.running)
}

// Restore takes the classes of the containers that still run from saved (a
// checkpoint, or the live state after the runtime restarted): a container
// keeps the classes it was created with, whatever the configuration says
// now. One the plugin did not create (created while it was away) has none
// it knows of, as the runtime does not report a container's classes.
func (t *Tracker) Restore(saved map[string]Assignment, runs func(id string) bool) {
	restored := make(map[string]Assignment, len(saved))
	for id, a := range saved {
		if runs(id) {
			restored[id] = a
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = restored
}

// collector reports the containers per class, and whether RDT is
// available, at scrape time.
type collector struct {
	t                    *Tracker
	containers, rdtAvail *prometheus.Desc
}

func newCollector(t *Tracker, namespace string) *collector {
	return &collector{
		t: t,
		containers: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "class_containers"),
			"Running containers with a class, by kind (blockio, rdt) and class.", []string{"kind", "class"}, nil),
		rdtAvail: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "rdt_available"),
			"1 if the node has RDT (resctrl) and RDT classes are applied, 0 if not: the containers then run without theirs.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.containers
	ch <- c.rdtAvail
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ kind, class string }
	counts := map[key]int{}
	c.t.mu.Lock()
	for _, a := range c.t.running {
		for _, kind := range Kinds {
			if class := a.Of(kind); class != "" {
				counts[key{string(kind), class}]++
			}
		}
	}
	c.t.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.containers, prometheus.GaugeValue, float64(n), k.kind, k.class)
	}
	available := 0.0
	if c.t.node.RDTAvailable() {
		available = 1
	}
	ch <- prometheus.MustNewConstMetric(c.rdtAvail, prometheus.GaugeValue, available)
}
