package nriplugin

import (
	"errors"

	"github.com/nri-suite/nri-suite/common/state"
)

// RemoveNodeState implements plugin.NodeStateRemover: the plugin leaves the
// node for good (uninstalled), so its checkpoint goes with its directory,
// and so do its pool and placement records and its NodeResourceTopology
// (which would otherwise stay until the Node goes). Running containers keep their
// CPUs and memory nodes, which the runtime holds; a topology-aware
// installed again adopts them where they run. It runs after Close, when
// nothing writes any more.
func (p *Plugin) RemoveNodeState() error {
	p.mu.Lock()
	checkpoints := []*state.Checkpoint[Saved]{p.checkpoint}
	if p.moved != nil {
		checkpoints = append(checkpoints, p.moved)
	}
	p.mu.Unlock()
	var errs []error
	for _, cp := range checkpoints {
		errs = append(errs, cp.RemoveAll())
	}
	if s := p.persist; s.placements != nil {
		// The placements first: a placement names the pool record.
		errs = append(errs, s.placements.records.RemoveAll(), s.pools.records.RemoveAll())
	}
	errs = append(errs, p.deleteNRT())
	return errors.Join(errs...)
}
