package nriplugin

import (
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/plugin"
)

// safeUnsolicitedUpdates is, per runtime, the first version whose NRI takes
// a plugin's unsolicited UpdateContainers without a lock inversion. Before
// containerd/nri#301, the adaptation held its lock while the runtime's
// update handler waited for the runtime's NRI lock, which a CRI request
// (a container's creation, a plugin's registration) holds while it waits
// for the adaptation's: the runtime then stops creating and stopping
// containers for good (seen here on CRI-O v1.34.0, whose NRI is
// v0.9.1-0.20250219, during a roll of the chart; cri-o/cri-o#9835).
// containerd v2.4.2 (NRI v0.12.3) has the fix; no CRI-O release is known to.
var safeUnsolicitedUpdates = map[string]string{
	"containerd": "v2.4.2",
	"cri-o":      "",
}

// SetRuntime implements plugin.RuntimeAware: whether the reapplier may push
// placements through the runtime's UpdateContainers.
func (p *Plugin) SetRuntime(name, version string) {
	safe := plugin.RuntimeAtLeast(name, version, safeUnsolicitedUpdates)
	p.unsolicited.Store(safe)
	if !safe {
		p.log.WithField("runtime", name+" "+version).Info("the runtime's NRI can deadlock on updates a plugin sends on its own " +
			"(containerd/nri#301): placements to apply again go with the next reply that carries updates instead")
	}
}

// reapplyLocked has the container's current placement applied again: at
// once through the reapplier where the runtime takes unsolicited updates
// safely, else with the next handler's reply that can carry updates
// (pending). names are the log fields naming the container.
func (p *Plugin) reapplyLocked(id string, names logrus.Fields) {
	if p.unsolicited.Load() {
		p.reapply.Queue(id, names)
		return
	}
	p.pending[id] = true
}
