package nrt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	topologyclient "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/typed/topology/v1alpha2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// publishDelay is how long changes must pause before the object is
	// updated: a burst of grants (a node filling up) costs one update, and
	// the object is still at most about this much behind a grant.
	publishDelay = 50 * time.Millisecond
	// maxPublishDelay bounds the wait under sustained churn.
	maxPublishDelay = 500 * time.Millisecond
	// The wait after a failed update doubles from minBackoff up to
	// maxBackoff: an API server that is down gets one request per
	// maxBackoff, whatever the churn.
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
	// resyncPeriod is how often the object is compared with the state
	// without a change: one that was edited or deleted by someone else is
	// put back, at the cost of one GET per node per period.
	resyncPeriod = time.Minute
)

// Publisher keeps the node's NodeResourceTopology in line with the
// plugin's state. Changed returns at once: one goroutine builds the object
// from the state as it is when it publishes (so only the latest state
// waits, however many changes the API server missed), at most one request
// in flight, never on an NRI request path.
type Publisher struct {
	nodeName string
	nrts     topologyclient.NodeResourceTopologyInterface
	nodes    kubernetes.Interface
	// state returns the plugin's state under its lock; false while it has
	// none (before the first Synchronize).
	state   func() (State, bool)
	log     *logrus.Entry
	metrics *metrics

	generation atomic.Uint64 // counts changes
	changed    chan struct{} // wakes the goroutine; holds at most one signal
	ctx        context.Context
	cancel     context.CancelFunc
	stopped    chan struct{}
	closeOnce  sync.Once

	// Owned by the goroutine (and by Delete, after it stopped).
	owner     *metav1.OwnerReference // the Node, once known
	failing   bool                   // the last publish failed
	published bool                   // an object was published once
}

// Connect starts a Publisher of node nodeName's object through the API
// server of config; state supplies the plugin's state. Its metrics go to reg, named under namespace.
func Connect(config *rest.Config, nodeName string, state func() (State, bool), log *logrus.Entry,
	reg prometheus.Registerer, namespace string) (*Publisher, error) {
	if nodeName == "" {
		return nil, errors.New("the node's name is unknown: expected --node-name or $NODE_NAME")
	}
	topo, err := topologyclient.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("client of the API server %s: %w", config.Host, err)
	}
	nodes, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("client of the API server %s: %w", config.Host, err)
	}
	m := newMetrics(namespace)
	if err := m.register(reg); err != nil {
		return nil, fmt.Errorf("registering the NodeResourceTopology metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{
		nodeName: nodeName, nrts: topo.NodeResourceTopologies(), nodes: nodes, state: state,
		log: log.WithField("noderesourcetopology", nodeName), metrics: m,
		changed: make(chan struct{}, 1), ctx: ctx, cancel: cancel, stopped: make(chan struct{}),
	}
	go p.run()
	return p, nil
}

// Changed tells the publisher that the state changed; it returns at once.
func (p *Publisher) Changed() {
	p.generation.Add(1)
	select {
	case p.changed <- struct{}{}:
	default: // already woken
	}
}

// Close stops the publisher, abandoning a request in flight.
func (p *Publisher) Close() {
	p.closeOnce.Do(p.cancel)
	<-p.stopped
}

// Delete removes the node's object, after Close: the plugin leaves the
// node for good. An object already gone is no error.
func (p *Publisher) Delete(ctx context.Context) error {
	err := p.nrts.Delete(ctx, p.nodeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeResourceTopology %s: %w", p.nodeName, err)
	}
	return nil
}

// run publishes publishDelay after changes pause (maxPublishDelay after
// the first unpublished one at the latest), after a failure again with a
// backoff, whatever changes meanwhile, and every resyncPeriod besides.
func (p *Publisher) run() {
	defer close(p.stopped)
	timer := time.NewTimer(0)
	timer.Stop()
	resync := time.NewTicker(resyncPeriod)
	defer resync.Stop()
	var dirtySince time.Time // the first change not published; zero: none
	var backoff time.Duration
	for {
		select {
		case <-resync.C:
			if backoff == 0 && dirtySince.IsZero() {
				timer.Reset(0)
			}
		case <-p.changed:
			now := time.Now()
			if dirtySince.IsZero() {
				dirtySince = now
			}
			if backoff == 0 {
				timer.Reset(max(0, min(publishDelay, dirtySince.Add(maxPublishDelay).Sub(now))))
			}
		case <-timer.C:
			generation, start := p.generation.Load(), time.Now()
			err := p.publish()
			if err != nil {
				backoff = nextBackoff(backoff)
				p.failed(err, backoff)
				timer.Reset(backoff)
				continue
			}
			backoff = 0
			if !dirtySince.IsZero() {
				p.metrics.staleness.Observe(time.Since(dirtySince).Seconds())
			}
			dirtySince = time.Time{}
			if p.generation.Load() != generation {
				// Changed meanwhile: the signal is waiting, and the
				// changes date from this publish at the latest.
				dirtySince = start
			}
		case <-p.ctx.Done():
			return
		}
	}
}

// nextBackoff is the wait after a failure that followed a wait of last.
func nextBackoff(last time.Duration) time.Duration {
	if last == 0 {
		return minBackoff
	}
	return min(2*last, maxBackoff)
}

// failed logs a failure once per run of failures, at warning; the rest
// at debug.
func (p *Publisher) failed(err error, retry time.Duration) {
	entry := p.log.WithError(err).WithField("retry_in", retry.String())
	if p.failing {
		entry.Debug("could not update the NodeResourceTopology; retrying")
		return
	}
	p.failing = true
	entry.Warn("could not update the NodeResourceTopology; retrying with backoff (the plugin places containers meanwhile)")
}

// publish makes the API's object the state's: created, or updated when it
// differs. A request in flight ends with Close.
func (p *Publisher) publish() error {
	st, ok := p.state()
	if !ok {
		return nil
	}
	err := p.apply(Object(p.nodeName, st))
	p.metrics.updates.WithLabelValues(outcome(err)).Inc()
	if err != nil {
		return err
	}
	switch {
	case p.failing:
		p.failing = false
		p.log.Info("the NodeResourceTopology is up to date again")
	case !p.published:
		p.log.Info("published the NodeResourceTopology")
	}
	p.published = true
	return nil
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// apply creates want, or updates the object that is there to it unless it
// is already the same; the object is owned by the Node, so that it goes
// with the node.
func (p *Publisher) apply(want *v1alpha2.NodeResourceTopology) error {
	ctx := p.ctx
	if p.owner == nil {
		node, err := p.nodes.CoreV1().Nodes().Get(ctx, p.nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s, the NodeResourceTopology's owner: %w", p.nodeName, err)
		}
		p.owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	}
	want.OwnerReferences = []metav1.OwnerReference{*p.owner}
	got, err := p.nrts.Get(ctx, p.nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = p.nrts.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("creating NodeResourceTopology %s: %w (is the CRD noderesourcetopologies.topology.node.k8s.io installed?)", p.nodeName, err)
		}
		if err != nil {
			return fmt.Errorf("creating NodeResourceTopology %s: %w", p.nodeName, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("getting NodeResourceTopology %s: %w", p.nodeName, err)
	}
	if same(got, want) {
		return nil
	}
	got.Zones, got.Attributes, got.TopologyPolicies, got.OwnerReferences = want.Zones, want.Attributes, want.TopologyPolicies, want.OwnerReferences
	if _, err := p.nrts.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating NodeResourceTopology %s: %w", p.nodeName, err)
	}
	return nil
}

// same reports whether got already says what want says.
func same(got, want *v1alpha2.NodeResourceTopology) bool {
	return apiequality.Semantic.DeepEqual(got.Zones, want.Zones) &&
		apiequality.Semantic.DeepEqual(got.Attributes, want.Attributes) &&
		apiequality.Semantic.DeepEqual(got.TopologyPolicies, want.TopologyPolicies) &&
		apiequality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences)
}

type metrics struct {
	updates   *prometheus.CounterVec
	staleness prometheus.Histogram
}

func newMetrics(namespace string) *metrics {
	return &metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "nrt_updates_total",
			Help: "Attempts to bring the node's NodeResourceTopology in line with the plugin's state, by outcome (ok, error).",
		}, []string{"outcome"}),
		staleness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "nrt_staleness_seconds",
			Help:    "Time from a change of the plugin's state (a grant, a release) to the NodeResourceTopology showing it.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.updates, m.staleness} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, o := range []string{"ok", "error"} {
		m.updates.WithLabelValues(o)
	}
	return nil
}
