package nriplugin

import (
	"context"
	"errors"
	"time"

	"github.com/nri-suite/nri-suite/common/incluster"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/nrt"
)

// nrtDeleteTimeout bounds the deletion of the NodeResourceTopology when the
// plugin leaves the node, within the time a stopping plugin has (see
// common/plugin's leaveNode).
const nrtDeleteTimeout = 2 * time.Second

// connectNRT starts publishing the node's NodeResourceTopology, or says once
// why it cannot (no API server, no node name) and returns nil: the plugin
// places containers the same either way.
func (p *Plugin) connectNRT(deps plugin.Deps) *nrt.Publisher {
	config, err := incluster.Config(deps.Kubeconfig)
	if err == nil {
		var pub *nrt.Publisher
		if pub, err = nrt.Connect(config, deps.NodeName, p.nrtState, deps.Log, deps.Registry, deps.MetricsNamespace); err == nil {
			return pub
		}
	}
	entry := deps.Log.WithError(err)
	if errors.Is(err, incluster.ErrNoAPI) {
		entry.Info("the NodeResourceTopology is not published: no API server to publish it to")
	} else {
		entry.Warn("the NodeResourceTopology is not published")
	}
	return nil
}

// nrtState gives the publisher the policy's state; it holds the plugin's
// lock, so it only copies.
func (p *Plugin) nrtState() (nrt.State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pol == nil {
		return nrt.State{}, false
	}
	cfg := p.pol.Config()
	return nrt.State{Topology: p.topo, Usage: p.pol.Usage(), Memory: p.pol.MemoryAccounts(),
		Policy: cfg.TopologyPolicy, Scope: cfg.TopologyScope}, true
}

// deleteNRT removes the node's NodeResourceTopology, if the plugin
// publishes one.
func (p *Plugin) deleteNRT() error {
	if p.nrt == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), nrtDeleteTimeout)
	defer cancel()
	return p.nrt.Delete(ctx)
}
