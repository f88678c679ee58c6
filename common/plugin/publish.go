package plugin

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/version"
)

// statusPublisher keeps the plugin's state.PluginStatus record in the node's shared
// state directory up to date, so that the other plugins (stats first) and operators can
// see which plugins are attached to the runtime without asking each one.
//
// Two processes of a plugin may run at once: a DaemonSet's old pod still stopping
// beside its new one, a pre-registered plugin the runtime launched again before the
// last one exited. The record is the newer process's: a process never overwrites, nor
// removes, a record published by one that started after it (state.ProcessStart.After).
type statusPublisher struct {
	records *state.Records[state.PluginStatus]
	base    state.PluginStatus
	log     *logrus.Entry

	mu         sync.Mutex
	last       time.Time // Updated of the record this process last published
	superseded bool      // a newer process publishes the record; logged once
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
	started, err := processStart("self")
	if err != nil {
		// Publishing goes on; this process cannot tell a newer one then.
		log.WithError(err).Warn("unknown process start: the status record is replaced whoever published it")
	}
	return &statusPublisher{
		records: records,
		base:    state.PluginStatus{Name: name, Index: index, PID: os.Getpid(), Started: started, Version: version.Get().Version},
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
	published, err := p.records.PublishIf(rec.Key(), rec, p.notNewer)
	switch {
	case err != nil:
		p.log.WithError(err).Warn("could not publish the plugin's status to the shared state")
	case published:
		p.last = rec.Updated
	case !p.superseded:
		p.superseded = true
		p.log.Info("a newer process of the plugin publishes its status; this one no longer does")
	}
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
	if _, err := p.records.RemoveIf(p.base.Key(), p.own); err != nil {
		p.log.WithError(err).Warn("could not remove the plugin's status from the shared state")
	}
}

// prune removes the status records' directory when no plugin's record is
// left in it.
func (p *statusPublisher) prune() {
	if p == nil {
		return
	}
	if err := p.records.Prune(); err != nil {
		p.log.WithError(err).Warn("could not remove the empty status directory from the shared state")
	}
}

// notNewer tells whether this process may replace rec: rec was not published by a
// process that started after this one.
func (p *statusPublisher) notNewer(rec state.PluginStatus) bool {
	return !rec.Started.After(p.base.Started)
}

// own tells whether this process published rec, the last it published: the same
// PID, start (robust to PID reuse) and time (the same PID in another PID namespace,
// should the start be unknown).
func (p *statusPublisher) own(rec state.PluginStatus) bool {
	return rec.PID == p.base.PID && rec.Started == p.base.Started && rec.Updated.Equal(p.last)
}

// processStart reads when the process pid ("self" for this one) started, from /proc.
func processStart(pid string) (state.ProcessStart, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return state.ProcessStart{}, fmt.Errorf("reading the boot id: %w", err)
	}
	path := "/proc/" + pid + "/stat"
	stat, err := os.ReadFile(path)
	if err != nil {
		return state.ProcessStart{}, fmt.Errorf("reading the process start: %w", err)
	}
	ticks, err := startTicks(string(stat))
	if err != nil {
		return state.ProcessStart{}, fmt.Errorf("%s: %w", path, err)
	}
	return state.ProcessStart{BootID: strings.TrimSpace(string(boot)), Ticks: ticks}, nil
}

// startTicks is field 22 (starttime) of a /proc/<pid>/stat line. The command name,
// field 2, is in parentheses and may hold spaces and parentheses: fields are counted
// from the last ')'.
func startTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:]) // fields 3 and on
	const starttime = 22 - 3
	if len(fields) <= starttime {
		return 0, fmt.Errorf("%d fields after the command name: expected at least %d", len(fields), starttime+1)
	}
	ticks, err := strconv.ParseUint(fields[starttime], 10, 64)
	if err != nil || ticks == 0 {
		return 0, fmt.Errorf("starttime %q: expected clock ticks since boot", fields[starttime])
	}
	return ticks, nil
}
