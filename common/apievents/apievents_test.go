package apievents

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer answers the Events requests of client-go as the API server
// would, or as told by answer (a status code; 0: as the API server).
type apiServer struct {
	t      *testing.T
	answer func(n int) int
	hang   chan struct{} // closed: requests return; nil: never hang

	mu       sync.Mutex
	requests []string // method and count of each request
	got      chan struct{}
}

func newServer(t *testing.T, answer func(n int) int) (*apiServer, kubernetes.Interface) {
	s := &apiServer{t: t, answer: answer, got: make(chan struct{}, 1000)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return s, client
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, r.Method)
	s.mu.Unlock()
	s.got <- struct{}{}
	if s.hang != nil {
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
		return
	}
	if code := s.answer(n); code != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
			"reason": http.StatusText(code)})
		return
	}
	var event corev1.Event
	if r.Method == http.MethodPost {
		require.NoError(s.t, json.Unmarshal(body, &event))
	} else {
		event.Name = "patched"
	}
	event.ResourceVersion = "1"
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(event)
}

func (s *apiServer) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// fast retries, so that a test sees the retries and the giving up.
var fast = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}

func newRecorder(t *testing.T, client kubernetes.Interface, queue int) *Recorder {
	r, err := New(client, Options{Component: "nri-test", Host: "node", QueueSize: queue, Backoff: fast,
		Registry: prometheus.NewRegistry(), Namespace: "nri_suite_test", Log: logrus.NewEntry(logrus.New())})
	require.NoError(t, err)
	return r
}

func run(t *testing.T, r *Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

var pod = PodRef{Namespace: "ns", Name: "pod", UID: "uid-1"}

// count is the value of the outcome's counter.
func count(r *Recorder, outcome string) float64 {
	return testutil.ToFloat64(r.outcomes.WithLabelValues(outcome))
}

func waitFor(t *testing.T, r *Recorder, outcome string, want float64) {
	t.Helper()
	require.Eventually(t, func() bool { return count(r, outcome) == want }, 10*time.Second, time.Millisecond,
		"%s: %v, want %v", outcome, count(r, outcome), want)
}

// With the API server hanging, the writer holds one Event, the queue
// QueueSize more, and every Post beyond returns at once, counted as
// dropped: the caller never waits for the API server.
func TestPostNeverWaitsForTheAPIServer(t *testing.T) {
	s, client := newServer(t, func(int) int { return 0 })
	s.hang = make(chan struct{})
	r := newRecorder(t, client, 4)
	run(t, r)
	defer close(s.hang)

	r.Post(pod, corev1.EventTypeWarning, "Test", "first")
	<-s.got // the writer is in the request now
	for range 4 + 10 {
		r.Post(pod, corev1.EventTypeWarning, "Test", "more")
	}
	assert.Equal(t, 10.0, count(r, OutcomeQueueFull))
	assert.Equal(t, 0.0, count(r, OutcomeWritten))
}

// An API server that fails (503) is tried again until it answers; one that
// stays away is given up on after the backoff's steps, counted, and the
// next Event is written.
func TestRetriesWhileTheAPIServerIsAway(t *testing.T) {
	s, client := newServer(t, func(n int) int {
		if n < 2 || (n >= 3 && n < 6) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	r := newRecorder(t, client, 0)
	run(t, r)
	r.Post(pod, corev1.EventTypeWarning, "Test", "comes through on the third try")
	waitFor(t, r, OutcomeWritten, 1)
	r.Post(pod, corev1.EventTypeWarning, "Other", "given up after three tries")
	waitFor(t, r, OutcomeUnreachable, 1)
	r.Post(pod, corev1.EventTypeWarning, "Third", "written")
	waitFor(t, r, OutcomeWritten, 2)
	assert.Len(t, s.methods(), 7)
}

// A refusal of the API server (RBAC) is final: one request, counted.
func TestRefusedEventsAreNotRetried(t *testing.T) {
	s, client := newServer(t, func(int) int { return http.StatusForbidden })
	r := newRecorder(t, client, 0)
	run(t, r)
	r.Post(pod, corev1.EventTypeWarning, "Test", "forbidden")
	waitFor(t, r, OutcomeRejected, 1)
	assert.Len(t, s.methods(), 1)
}

// The same Event again patches the one written (its count), as the kubelet's
// do: client-go's correlator decides.
func TestRepeatsAreCounted(t *testing.T) {
	s, client := newServer(t, func(int) int { return 0 })
	r := newRecorder(t, client, 0)
	run(t, r)
	for range 3 {
		r.Post(pod, corev1.EventTypeWarning, "Test", "the same")
	}
	waitFor(t, r, OutcomeWritten, 3)
	assert.Equal(t, []string{http.MethodPost, http.MethodPatch, http.MethodPatch}, s.methods())
}

func TestTruncatesLongMessages(t *testing.T) {
	assert.Equal(t, "short", truncate("short"))
	long := truncate(string(make([]byte, 5000)))
	assert.Len(t, long, maxMessage)
	assert.Equal(t, "...", long[maxMessage-3:])
}

// A nil Recorder, a plugin's without an API server, takes Events and does
// nothing.
func TestNilRecorder(t *testing.T) {
	var r *Recorder
	assert.NotPanics(t, func() { r.Post(pod, corev1.EventTypeNormal, "Test", "nobody hears") })
}
