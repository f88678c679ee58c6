package plugin

import (
	"context"
	"time"

	"github.com/nri-suite/nri-suite/common/incluster"
	"github.com/nri-suite/nri-suite/common/state"
)

// leaveCheckTimeout bounds the question to the API server at stop: the
// chart gives a plugin's pod 10 s to stop, of which draining handlers and
// closing take at most drainTimeout.
const leaveCheckTimeout = 3 * time.Second

// NodeStateRemover is implemented by a plugin that keeps state on the node
// beyond the runner's status record (checkpoints, shared records, files it
// put on the host). RemoveNodeState removes it when the plugin leaves the
// node for good: stopped while its DaemonSet (--daemonset) is being
// deleted, as the chart's pre-delete hook does at `helm uninstall`. It runs
// after Close. It must leave alone what running containers still use, and
// say so in its error.
type NodeStateRemover interface {
	RemoveNodeState() error
}

// leavingFunc asks whether the plugin's DaemonSet is being deleted.
type leavingFunc func(ctx context.Context) (bool, error)

// daemonSetLeaving asks the API server, with the pod's service account,
// whether the DaemonSet ref (validated with the settings) is leaving.
func daemonSetLeaving(ref string) leavingFunc {
	return func(ctx context.Context) (bool, error) {
		daemonSet, err := incluster.ParseDaemonSetRef(ref)
		if err != nil {
			return false, err
		}
		client, err := incluster.Client()
		if err != nil {
			return false, err
		}
		return incluster.Leaving(ctx, client, daemonSet)
	}
}

// leaveNode runs once the plugin has stopped on a signal: if its DaemonSet
// is being deleted, the plugin's node state goes (NodeStateRemover), then
// the status records' directory and the shared directory, each if nothing
// else is left in it. When the API server cannot tell, everything stays: a
// restarting plugin needs its state, and a leftover one is harmless.
func (r *Runner) leaveNode() {
	if r.leaving == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveCheckTimeout)
	defer cancel()
	leaving, err := r.leaving(ctx)
	switch {
	case err != nil:
		r.log.WithError(err).Warn("cannot tell an uninstall from a restart: the plugin's node state stays")
		return
	case !leaving:
		return
	}
	log := r.log.WithField("daemonset", r.settings.DaemonSet)
	if remover, ok := r.plugin.(NodeStateRemover); ok {
		if err := remover.RemoveNodeState(); err != nil {
			log.WithError(err).Warn("the DaemonSet is being deleted: removed the plugin's node state but for what the error names")
		}
	}
	r.publisher.prune()
	if r.settings.SharedDir != "" {
		if err := state.RemoveDirIfEmpty(r.settings.SharedDir); err != nil {
			log.WithError(err).Warn("removing the shared state directory")
		}
	}
	log.Info("the DaemonSet is being deleted: the plugin left the node and removed its node state")
}
