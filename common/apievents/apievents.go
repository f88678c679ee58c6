// Package apievents posts a plugin's Events about pods to the API server
// (a refusal, a device's health) without ever holding up the caller: an NRI
// handler only hands the Event to a bounded queue, and one goroutine writes
// the queue to the API server, retrying while the server is away.
//
// Deduplication, aggregation and rate limiting are client-go's
// EventCorrelator (tools/record), the kubelet's: an Event repeated bumps the
// count of the one already written, ten similar ones within ten minutes
// become one "(combined from similar events)", and a source may post 25
// Events about one object at once, then one every five minutes. The queue
// and the writing are this package's rather than record's EventBroadcaster,
// whose queue drops Events without a trace while the API server is away:
// here every Event dropped is counted, by why, in
// <namespace>_api_events_total.
package apievents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
)

// Outcomes of an Event, the values of the outcome label.
const (
	// OutcomeWritten: created, or an earlier one's count bumped.
	OutcomeWritten = "written"
	// OutcomeFiltered: the correlator's rate limit held it back.
	OutcomeFiltered = "filtered"
	// OutcomeQueueFull: dropped at Post, the queue full (the API server
	// away for long, or an Event storm).
	OutcomeQueueFull = "dropped_queue_full"
	// OutcomeUnreachable: dropped after the retries, the API server away.
	OutcomeUnreachable = "dropped_unreachable"
	// OutcomeRejected: the API server refused it (RBAC, a namespace being
	// deleted): never retried.
	OutcomeRejected = "rejected"
)

// DefaultQueueSize is how many Events wait at most for the API server.
const DefaultQueueSize = 256

// DefaultBackoff spaces the attempts to write one Event while the API server
// is away: from half a second, doubling up to 30 s, 12 attempts (some 4
// minutes), after which the Event is dropped and the next one tried.
var DefaultBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 12, Cap: 30 * time.Second}

// PodRef is the pod an Event is about, as NRI names it.
type PodRef struct {
	Namespace, Name, UID string
}

// Options configure a Recorder.
type Options struct {
	// Component is the Event's source (e.g. nri-device-injector), Host the
	// node's name.
	Component, Host string
	// QueueSize bounds the Events waiting; 0 is DefaultQueueSize.
	QueueSize int
	// Backoff spaces the retries of one Event; zero is DefaultBackoff.
	Backoff wait.Backoff
	// Registry takes <Namespace>_api_events_total; nil registers nothing.
	Registry  prometheus.Registerer
	Namespace string
	Log       *logrus.Entry
}

// Recorder posts Events. A nil Recorder posts nothing: a plugin without
// access to the API server calls it all the same.
type Recorder struct {
	events     typedcorev1.EventInterface
	source     corev1.EventSource
	queue      chan *corev1.Event
	backoff    wait.Backoff
	correlator *record.EventCorrelator
	outcomes   *prometheus.CounterVec
	log        *logrus.Entry
}

// New builds a Recorder writing through client; it writes once Run runs.
func New(client kubernetes.Interface, opts Options) (*Recorder, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = DefaultBackoff
	}
	r := &Recorder{
		events:     client.CoreV1().Events(""),
		source:     corev1.EventSource{Component: opts.Component, Host: opts.Host},
		queue:      make(chan *corev1.Event, opts.QueueSize),
		backoff:    opts.Backoff,
		correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: opts.Namespace,
			Name:      "api_events_total",
			Help: "Events about pods posted to the API server, by outcome: written, filtered (rate limit), " +
				"dropped_queue_full, dropped_unreachable (after the retries), rejected (by the API server).",
		}, []string{"outcome"}),
		log: opts.Log,
	}
	for _, o := range []string{OutcomeWritten, OutcomeFiltered, OutcomeQueueFull, OutcomeUnreachable, OutcomeRejected} {
		r.outcomes.WithLabelValues(o)
	}
	if opts.Registry != nil {
		if err := opts.Registry.Register(r.outcomes); err != nil {
			return nil, fmt.Errorf("register the Events' metric: %w", err)
		}
	}
	return r, nil
}

// Post queues an Event of eventType (corev1.EventTypeNormal or Warning)
// about pod; it never waits: with the queue full, the Event is dropped and
// counted.
func (r *Recorder) Post(pod PodRef, eventType, reason, message string) {
	if r == nil {
		return
	}
	now := metav1.Now()
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: util.GenerateEventName(pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace,
			Name: pod.Name, UID: types.UID(pod.UID)},
		Reason: reason, Message: truncate(message), Type: eventType,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: r.source, ReportingController: r.source.Component, ReportingInstance: r.source.Host,
	}
	select {
	case r.queue <- event:
	default:
		r.outcomes.WithLabelValues(OutcomeQueueFull).Inc()
	}
}

// maxMessage is the API server's limit on an Event's message.
const maxMessage = 1024

// truncate cuts message to what the API server takes, marking the cut.
func truncate(message string) string {
	if len(message) <= maxMessage {
		return message
	}
	const mark = "..."
	return message[:maxMessage-len(mark)] + mark
}

// Run writes the queued Events until ctx ends; what is queued then is lost.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case event := <-r.queue:
			r.outcomes.WithLabelValues(r.write(ctx, event)).Inc()
		}
	}
}

// write correlates event with those written before and writes the result,
// retrying while the API server cannot be reached; it returns the outcome.
func (r *Recorder) write(ctx context.Context, event *corev1.Event) string {
	result, err := r.correlator.EventCorrelate(event)
	if err != nil {
		r.log.WithError(err).Debug("correlating an Event") // result is the Event itself then
	}
	if result.Skip {
		return OutcomeFiltered
	}
	backoff := r.backoff
	for {
		err := r.send(ctx, result.Event, result.Patch)
		switch {
		case err == nil:
			return OutcomeWritten
		case Refused(err):
			r.log.WithError(err).WithFields(logrus.Fields{"reason": event.Reason, "namespace": event.Namespace,
				"pod": event.InvolvedObject.Name}).Warn("the API server refused an Event; not retrying")
			return OutcomeRejected
		case backoff.Steps <= 1:
			r.log.WithError(err).WithField("reason", event.Reason).Warn("dropped an Event: the API server stayed unreachable")
			return OutcomeUnreachable
		}
		r.log.WithError(err).Debug("writing an Event, retrying")
		select {
		case <-ctx.Done():
			return OutcomeUnreachable
		case <-time.After(backoff.Step()):
		}
	}
}

// Refused reports whether err is the API server's answer that retrying
// would not change (RBAC, a namespace being deleted, an invalid object),
// rather than the server away, overloaded or failing.
func Refused(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) &&
		!apierrors.IsTimeout(err) && !apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err) &&
		!apierrors.IsUnexpectedServerError(err)
}

// send creates event, or patches the one written before when the correlator
// found it a repeat (count above 1), creating it when that one is gone;
// what the server returns updates the correlator.
func (r *Recorder) send(ctx context.Context, event *corev1.Event, patch []byte) error {
	var written *corev1.Event
	var err error
	if event.Count > 1 {
		written, err = r.events.PatchWithEventNamespaceWithContext(ctx, event, patch)
	}
	if event.Count <= 1 || apierrors.IsNotFound(err) {
		event.ResourceVersion = ""
		written, err = r.events.CreateWithEventNamespaceWithContext(ctx, event)
	}
	if err != nil {
		return err
	}
	r.correlator.UpdateState(written)
	return nil
}
