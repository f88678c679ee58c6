package nriplugin

import (
	"context"
	"errors"
	"time"
)

// removeConditionTimeout bounds the removal of the node's condition at
// uninstall: the API server may be away, and the pod is being deleted.
const removeConditionTimeout = 3 * time.Second

// RemoveNodeState implements plugin.NodeStateRemover: the plugin leaves the
// node for good (uninstalled), so its device and health records go, and
// the node's NRIDevicesHealthy condition, which nobody would keep any
// longer. The running containers keep their devices, which the runtime gave
// them. It runs after Close, when the health monitor has stopped.
func (p *Plugin) RemoveNodeState() error {
	var errs []error
	if p.records != nil {
		errs = append(errs, p.records.RemoveAll(), p.devHealth.RemoveAll(), p.ctrHealth.RemoveAll())
	}
	ctx, cancel := context.WithTimeout(context.Background(), removeConditionTimeout)
	defer cancel()
	errs = append(errs, p.api.condition.Remove(ctx))
	return errors.Join(errs...)
}
