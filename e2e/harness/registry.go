package harness

import (
	"sync"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
)

// registry learns from the adaptation which plugins finished Synchronize.
// The adaptation has no event for "plugin registered"; its metrics hook is
// called with the plugin's NN-name after every Synchronize, which is the last
// step of registration. One registry outlives runtime restarts.
type registry struct {
	mu     sync.Mutex
	synced map[string]int
}

var _ adaptation.Metrics = (*registry)(nil)

func newRegistry() *registry {
	return &registry{synced: map[string]int{}}
}

func (r *registry) RecordPluginInvocation(plugin, op string, err error) {
	if op != "Synchronize" || err != nil {
		return
	}
	r.mu.Lock()
	r.synced[plugin]++
	r.mu.Unlock()
}

// syncCount is how many Synchronize calls plugin (NN-name) has completed.
func (r *registry) syncCount(plugin string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced[plugin]
}

func (r *registry) RecordPluginLatency(string, string, time.Duration) {}
func (r *registry) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {
}
func (r *registry) UpdatePluginCount(int) {}
