package nriplugin

import "github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"

// View calls f with the plugin's policy under the plugin's lock, nil before
// the first Synchronize: for a report of the placements the handlers made,
// such as simulate's, which drives these handlers as a runtime does and
// reads where they put every container. f must not change the policy.
func (p *Plugin) View(f func(pol *policy.Policy)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p.pol)
}
