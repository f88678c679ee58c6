package harness

import (
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
)

// registry learns from the adaptation which plugins finished Synchronize,
// and how long each plugin call took. The adaptation has no event for
// "plugin registered"; its metrics hook is called with the plugin's NN-name
// after every Synchronize message, and Synchronize is the last step of
// registration. Above NRI's message limit the runtime sends one Synchronize
// in pages, each reported: a Synchronize counts as done when the runtime's
// sync callback returns (syncDone). One registry outlives runtime restarts.
type registry struct {
	mu     sync.Mutex
	synced map[string]int
	// pages and pageTime are the Synchronize messages of the Synchronize in
	// flight, and their latencies added up, by plugin.
	pages    map[string]int
	pageTime map[string]time.Duration
	// latency is the last latency of each plugin ("NN-name") and operation;
	// a Synchronize's is that of all its pages.
	latency map[[2]string]time.Duration
	// changed is closed, and replaced, at every completed Synchronize, so
	// that waiters wake at once instead of polling.
	changed chan struct{}
}

var _ adaptation.Metrics = (*registry)(nil)

func newRegistry() *registry {
	return &registry{synced: map[string]int{}, pages: map[string]int{}, pageTime: map[string]time.Duration{},
		latency: map[[2]string]time.Duration{}, changed: make(chan struct{})}
}

func (r *registry) RecordPluginInvocation(plugin, op string, err error) {
	if op != "Synchronize" || err != nil {
		return
	}
	r.mu.Lock()
	r.pages[plugin]++
	r.mu.Unlock()
}

// syncDone ends the Synchronize in flight: the runtime's sync callback
// returned, ok if the plugin answered every page. The runtime synchronizes
// one plugin at a time.
func (r *registry) syncDone(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for plugin, n := range r.pages {
		if n > 0 && ok {
			r.synced[plugin]++
			r.latency[[2]string{plugin, "Synchronize"}] = r.pageTime[plugin]
		}
		delete(r.pages, plugin)
		delete(r.pageTime, plugin)
	}
	close(r.changed)
	r.changed = make(chan struct{})
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
	defer r.mu.Unlock()
	if op == "Synchronize" {
		r.pageTime[plugin] += latency
		return
	}
	r.latency[[2]string{plugin, op}] = latency
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
