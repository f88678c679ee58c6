package plugin

import (
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/state"
)

// statusPublisher keeps the plugin's state.PluginStatus record in the node's shared
// state directory up to date, so that the other plugins (stats first) and operators can
// see which plugins are attached to the runtime without asking each one.
type statusPublisher struct {
	records *state.Records[state.PluginStatus]
	base    state.PluginStatus
	log     *logrus.Entry

	mu   sync.Mutex
	last time.Time // Updated of the record this process last published
}

// newStatusPublisher publishes under dir; an empty dir disables publishing (nil).
func newStatusPublisher(dir, name, idx string, log *logrus.Entry) (*statusPublisher, error) {
	if dir == "" {
		return nil, nil
	}
	records, err := state.PluginStatuses(dir)
	if err != nil {
		return nil, err
	}
	index, _ := strconv.Atoi(idx) // validated by the settings or the runtime
	return &statusPublisher{
		records: records,
		base:    state.PluginStatus{Name: name, Index: index, PID: os.Getpid(), Version: buildVersion()},
		log:     log,
	}, nil
}

// publish writes the status. A failure is logged, not returned: the shared record is
// informative and must never stop the plugin from serving its runtime.
func (p *statusPublisher) publish(s statusSnapshot) {
	if p == nil {
		return
	}
	rec := p.base
	rec.Connected, rec.Ready, rec.LastSynchronize, rec.Updated = s.Connected, s.Ready, s.LastSync, time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.records.Publish(rec.Key(), rec); err != nil {
		p.log.WithError(err).Warn("could not publish the plugin's status to the shared state")
		return
	}
	p.last = rec.Updated
}

// remove withdraws the record at a clean stop, unless it is no longer this process's:
// the plugin's next process (launched again by a restarted runtime, or a DaemonSet's
// next pod) may have published already, and its record is the live one. A record left
// by a killed plugin stays with its last Updated time.
func (p *statusPublisher) remove() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, found, err := p.records.Read(p.base.Key())
	if err == nil && (!found || rec.PID != p.base.PID || !rec.Updated.Equal(p.last)) {
		return
	}
	if err := p.records.Remove(p.base.Key()); err != nil {
		p.log.WithError(err).Warn("could not remove the plugin's status from the shared state")
	}
}

// buildVersion is the main module's version as the Go toolchain stamped it.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "unknown"
}
