package nodecondition

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeServer serves one node's GET and its status' PATCH, failing the
// first failures requests with 503.
type nodeServer struct {
	mu       sync.Mutex
	node     corev1.Node
	failures int
	patches  []patch
}

type patch struct {
	contentType string
	conditions  []corev1.NodeCondition
}

func (s *nodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.failures--
		http.Error(w, "away", http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/node-1":
	case r.Method == http.MethodPatch && r.URL.Path == "/api/v1/nodes/node-1/status":
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Status struct{ Conditions []corev1.NodeCondition } `json:"status"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.patches = append(s.patches, patch{r.Header.Get("Content-Type"), p.Status.Conditions})
		s.node.Status.Conditions = p.Status.Conditions // one condition type in these tests
	default:
		http.Error(w, "not here", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.node)
}

func (s *nodeServer) written() []patch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]patch(nil), s.patches...)
}

func start(t *testing.T, s *nodeServer) *Setter {
	s.node.Name = "node-1"
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, Timeout: 5 * time.Second})
	require.NoError(t, err)
	setter := New(client, "node-1", "NRIDevicesHealthy", logrus.NewEntry(logrus.New()))
	setter.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}
	return setter
}

func run(t *testing.T, s *Setter) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Only the latest condition set is written, as a strategic merge patch of
// the node's status, retried while the API server fails; the same one
// again writes nothing.
func TestLatestConditionIsWrittenAfterRetries(t *testing.T) {
	srv := &nodeServer{failures: 3}
	s := start(t, srv)
	s.Set(Condition{Status: corev1.ConditionFalse, Reason: "DevicesUnhealthy", Message: "gpu=0 is Unhealthy"})
	s.Set(Condition{Status: corev1.ConditionTrue, Reason: "DevicesHealthy", Message: "all healthy"})
	run(t, s)
	require.Eventually(t, func() bool { return len(srv.written()) == 1 }, 10*time.Second, time.Millisecond)
	p := srv.written()[0]
	assert.Equal(t, "application/strategic-merge-patch+json", p.contentType)
	require.Len(t, p.conditions, 1)
	c := p.conditions[0]
	assert.Equal(t, corev1.NodeConditionType("NRIDevicesHealthy"), c.Type)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, "all healthy", c.Message)

	s.Set(Condition{Status: corev1.ConditionTrue, Reason: "DevicesHealthy", Message: "all healthy"})
	s.Set(Condition{Status: corev1.ConditionFalse, Reason: "DevicesUnhealthy", Message: "gpu=1 is Unhealthy"})
	require.Eventually(t, func() bool { return len(srv.written()) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, corev1.ConditionFalse, srv.written()[1].conditions[0].Status)
}

// A new message under the same status keeps the condition's transition
// time; a new status moves it.
func TestTransitionTimeFollowsTheStatus(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	srv := &nodeServer{}
	srv.node.Status.Conditions = []corev1.NodeCondition{{Type: "NRIDevicesHealthy", Status: corev1.ConditionFalse,
		Message: "gpu=0 is Unhealthy", LastTransitionTime: then}}
	s := start(t, srv)
	run(t, s)
	s.Set(Condition{Status: corev1.ConditionFalse, Reason: "DevicesUnhealthy", Message: "gpu=0 and gpu=1 are Unhealthy"})
	require.Eventually(t, func() bool { return len(srv.written()) == 1 }, 10*time.Second, time.Millisecond)
	assert.True(t, then.Equal(&srv.written()[0].conditions[0].LastTransitionTime), "kept: %v", srv.written()[0].conditions[0].LastTransitionTime)

	s.Set(Condition{Status: corev1.ConditionTrue, Reason: "DevicesHealthy", Message: "all healthy"})
	require.Eventually(t, func() bool { return len(srv.written()) == 2 }, 10*time.Second, time.Millisecond)
	moved := srv.written()[1].conditions[0].LastTransitionTime
	assert.True(t, moved.After(then.Time), "moved: %v", moved)
}

// A nil Setter, a plugin's without an API server, takes conditions and
// does nothing.
func TestNilSetter(t *testing.T) {
	var s *Setter
	assert.NotPanics(t, func() { s.Set(Condition{Status: corev1.ConditionTrue}) })
}

// Remove sends the strategic merge patch's delete directive for the
// condition's type, which leaves the node's other conditions alone.
func TestRemove(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-1"}}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	s := New(client, "node-1", "NRIDevicesHealthy", logrus.NewEntry(logrus.New()))
	require.NoError(t, s.Remove(context.Background()))
	assert.Equal(t, `PATCH /api/v1/nodes/node-1/status application/strategic-merge-patch+json `+
		`{"status":{"conditions":[{"$patch":"delete","type":"NRIDevicesHealthy"}]}}`, body)
	assert.NoError(t, (*Setter)(nil).Remove(context.Background()))
}
