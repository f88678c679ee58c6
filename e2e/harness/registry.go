package harness

import (
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
)

// registry learns from the adaptation which plugins finished Synchronize,
// and how long each plugin call took. The adaptation has no event for
// "plugin registered"; its metrics hook is called with the plugin's NN-name
// after every Synchronize, which is the last step of registration. One
// registry outlives runtime restarts.
type registry struct {
	mu     sync.Mutex
	synced map[string]int
	// latency is the last latency of each plugin ("NN-name") and operation.
	latency map[[2]string]time.Duration
	// changed is closed, and replaced, at every completed Synchronize, so
	// that waiters wake at once instead of polling.
	changed chan struct{}
}

var _ adaptation.Metrics = (*registry)(nil)

func newRegistry() *registry {
	return &registry{synced: map[string]int{}, latency: map[[2]string]time.Duration{}, changed: make(chan struct{})}
}

func (r *registry) RecordPluginInvocation(plugin, op string, err error) {
	if op != "Synchronize" || err != nil {
		return
	}
	r.mu.Lock()
	r.synced[plugin]++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// syncCount is how many Synchronize calls plugin (NN-name) has completed.
func (r *registry) syncCount(plugin string) int {
	n, _ := r.watch(plugin)
	return n
}

// watch returns syncCount and a channel closed at the next completed
// Synchronize of any plugin.
func (r *registry) watch(plugin string) (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced[plugin], r.changed
}

func (r *registry) RecordPluginLatency(plugin, op string, latency time.Duration) {
	r.mu.Lock()
	r.latency[[2]string{plugin, op}] = latency
	r.mu.Unlock()
}

// lastLatency is the latency of plugin's last op call, 0 if none.
func (r *registry) lastLatency(plugin, op string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latency[[2]string{plugin, op}]
}

func (r *registry) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {
}
func (r *registry) UpdatePluginCount(int) {}
