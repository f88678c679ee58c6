package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/incluster"
)

// eventsServer is an API server's Events endpoint: it keeps the Events
// created, or, hanging, answers nothing until the test ends.
type eventsServer struct {
	hang chan struct{} // nil: answers

	mu     sync.Mutex
	events []corev1.Event
}

func (s *eventsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.hang != nil {
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
		return
	}
	var event corev1.Event
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || json.Unmarshal(body, &event) != nil {
		http.Error(w, "only Events are created here", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, event)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

func (s *eventsServer) created() []corev1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]corev1.Event(nil), s.events...)
}

// kubeconfig writes a kubeconfig of the server at url and returns its path.
func kubeconfig(t *testing.T, url string) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, url), 0o600))
	return path
}

// A refusal of a container (an error of its CreateContainer, or a panic)
// becomes a Warning Event NRIRefused on its pod, by namespace, name and
// UID, from nri-<plugin> on the node, naming the plugin and its reason.
func TestRunnerPostsRefusalsAsEvents(t *testing.T) {
	api := &eventsServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)
	s := testSettings(socket, &syncBuffer{})
	s.Kubeconfig, s.NodeName = kubeconfig(t, srv.URL), "node-1"
	p, factory := newRecorder()
	r, _ := startRunner(t, s, factory)
	waitReadyz(t, r, 200, "ready")
	require.NotNil(t, p.deps.Events)
	require.NotNil(t, p.deps.APIClient)

	pod := testPod("web")
	_, err := rt.createContainer(pod, testContainer(pod, "refused"))
	require.ErrorContains(t, err, "test-plugin: container web-refused refused")
	_, err = rt.createContainer(pod, testContainer(pod, "app"))
	require.NoError(t, err, "no Event for a container let through")
	_, err = rt.createContainer(pod, testContainer(pod, "boom"))
	require.Error(t, err)

	require.True(t, assertEventually(func() bool { return len(api.created()) == 2 }), "%d Events", len(api.created()))
	for i, want := range []string{
		"test-plugin refused the creation of container refused: test-plugin: container web-refused refused",
		"test-plugin refused the creation of container boom: plugin test-plugin: CreateContainer handler panicked",
	} {
		e := api.created()[i]
		assert.Equal(t, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "uid-web"}, e.InvolvedObject)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Equal(t, ReasonRefused, e.Reason)
		assert.Equal(t, "default", e.Namespace)
		assert.Equal(t, corev1.EventSource{Component: "nri-test-plugin", Host: "node-1"}, e.Source)
		assert.True(t, strings.HasPrefix(e.Message, want), "%q starts with %q", e.Message, want)
	}
	assert.True(t, assertEventually(func() bool {
		written, _ := metricValue(t, r, "nri_suite_test_plugin_api_events_total", map[string]string{"outcome": "written"})
		return written == 2
	}), "both counted as written")
}

// An API server that hangs never holds up a handler: every refusal is
// answered with the plugin's own error (a handler stuck in the API would
// miss NRI's deadline and fail otherwise), and the Events beyond the queue
// are dropped and counted.
func TestRunnerNeverWaitsForAHangingAPIServer(t *testing.T) {
	api := &eventsServer{hang: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer close(api.hang)
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)
	s := testSettings(socket, &syncBuffer{})
	s.Kubeconfig = kubeconfig(t, srv.URL)
	_, factory := newRecorder()
	r, _ := startRunner(t, s, factory)
	waitReadyz(t, r, 200, "ready")

	const refusals = 300 // above the queue's 256
	for i := range refusals {
		pod := testPod(fmt.Sprint("p", i))
		_, err := rt.createContainer(pod, testContainer(pod, "refused"))
		require.ErrorContains(t, err, "test-plugin: container "+pod.Name+"-refused refused")
	}
	dropped, _ := metricValue(t, r, "nri_suite_test_plugin_api_events_total", map[string]string{"outcome": "dropped_queue_full"})
	assert.GreaterOrEqual(t, dropped, float64(refusals-256-1), "the writer holds one, the queue 256")
	assert.Empty(t, api.created())
}

// Without an API server (no --kubeconfig, not in a pod with a service
// account: a pre-registered plugin) the plugin works as before, posts
// nothing and says so in its log once, however many refusals follow.
func TestRunnerWithoutAPIServerSaysSoOnce(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	socket := filepath.Join(shortTempDir(t), "nri.sock")
	rt := startRuntime(t, socket, nil, nil)
	logs := &syncBuffer{}
	p, factory := newRecorder()
	r, _ := startRunner(t, testSettings(socket, logs), factory)
	waitReadyz(t, r, 200, "ready")
	assert.Nil(t, p.deps.Events)
	assert.Nil(t, p.deps.APIClient)
	for i := range 3 {
		pod := testPod(fmt.Sprint("p", i))
		_, err := rt.createContainer(pod, testContainer(pod, "refused"))
		require.Error(t, err)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), incluster.ErrNoAPI.Error()), logs.String())
	_, ok := metricValue(t, r, "nri_suite_test_plugin_api_events_total", nil)
	assert.False(t, ok, "no Events metric without Events")
}
