package nriplugin

import "errors"

// RemoveNodeState implements plugin.NodeStateRemover: the plugin leaves the
// node for good (uninstalled), so its device and health records go. The
// running containers keep their devices, which the runtime gave them. It
// runs after Close, when the health monitor has stopped.
func (p *Plugin) RemoveNodeState() error {
	if p.records == nil {
		return nil
	}
	return errors.Join(p.records.RemoveAll(), p.devHealth.RemoveAll(), p.ctrHealth.RemoveAll())
}
