package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

// Synchronize rebuilds the policy from what the plugin remembers (its live
// state after a runtime restart, else the checkpoint) and from the
// containers as they actually run, moving none that is consistent. It
// returns the updates the restore needs; the checkpoint is written behind,
// as after any other request (see persister).
//
// Nothing the plugin sent before counts as applied: every container the
// runtime reports elsewhere than its placement (on no cpuset at all, say:
// created without the plugin, or its update lost with a reply that came
// after NRI's deadline) is updated again.
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	updates, err := p.synchronize(pods, ctrs)
	if err != nil {
		return nil, err
	}
	updates, rest := splitReply(updates, maxSyncReply)
	if len(rest) > 0 {
		// The runtime applies them once this Synchronize is done (it holds
		// its lock until then).
		p.mu.Lock()
		for _, u := range rest {
			p.reapplyLocked(u.GetContainerId(), logrus.Fields{"container_id": u.GetContainerId(), "why": "left out of a Synchronize reply above NRI's message size limit"})
		}
		p.mu.Unlock()
		p.log.WithFields(logrus.Fields{"replied": len(updates), "queued": len(rest)}).
			Info("synchronize: sending the updates that do not fit in the reply through the runtime's UpdateContainers")
	}
	if ctx.Err() != nil {
		p.log.WithError(context.Cause(ctx)).WithField("updates", len(updates)).
			Warn("synchronize ran past the runtime's deadline: the runtime drops this reply, and the next synchronize sends again what it does not show")
	}
	return updates, nil
}

// maxSyncReply bounds the encoded updates of a Synchronize reply. NRI's
// transport refuses a message above 4 MiB, and the runtime pages only its
// request: a reply that updates 10,000 containers on a fragmented shared
// pool comes to about 20 MB. A variable for the tests.
var maxSyncReply = 3 << 20

// splitReply returns the first updates whose encoding fits in maxBytes, and
// the rest.
func splitReply(updates []*api.ContainerUpdate, maxBytes int) (reply, rest []*api.ContainerUpdate) {
	size := 0
	for i, u := range updates {
		size += protowire.SizeTag(1) + protowire.SizeBytes(u.SizeVT())
		if size > maxBytes {
			return updates[:i], updates[i:]
		}
	}
	return updates, nil
}

// retireMoved removes the checkpoint where the state was saved before the
// configuration moved it, once the writer saved the state in the new place
// (saved): left, it would be read, stale, if the configuration moved the
// checkpoint back. A save in a place the configuration has since left
// retires nothing.
func (p *Plugin) retireMoved(saved *state.Checkpoint[Saved]) {
	p.mu.Lock()
	moved := p.moved
	if saved != p.checkpoint || p.pol == nil {
		moved = nil
	}
	if moved != nil {
		p.moved = nil
	}
	p.mu.Unlock()
	if moved == nil {
		return
	}
	if err := moved.Remove(); err != nil {
		p.log.WithError(err).Warn("could not remove the checkpoint the configuration moved")
		return
	}
	p.log.WithField("checkpoint", moved.Path()).Info("removed the checkpoint the configuration moved")
}

func (p *Plugin) synchronize(pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pol, err := policy.New(p.topo, p.cfg)
	if err != nil {
		return nil, fmt.Errorf("synchronize: build the policy: %w", err)
	}
	saved, source := p.savedStateLocked()
	if len(saved.Pods) > 0 {
		live := make(map[string]bool, len(pods))
		for _, pod := range pods {
			live[pod.GetUid()] = true
		}
		saved.Pods = slices.DeleteFunc(saved.Pods, func(s policy.SavedPod) bool { return !live[s.PodUID] })
	}
	running := p.running(pods, ctrs)

	start := time.Now()
	report := pol.Restore(saved.Snapshot, running)
	p.metrics.observe(opRestore, start)
	p.pol = pol
	clear(p.pending)
	resent := make(map[string]bool, len(report.Updates))
	for _, pl := range report.Updates {
		resent[pl.ContainerID] = true
	}
	placed := func(id string) bool { _, ok := pol.Placement(id); return ok }
	p.starts.resync(placed, notStarted(ctrs), func(id string) bool { return resent[id] })
	p.classes.Restore(saved.Classes, placed)
	p.changed()
	p.logRestore(report, saved.Snapshot, running, source)

	return containerUpdates(report.Updates, mayFail), nil
}

// savedStateLocked returns the state to restore and where it came from: the
// live policy's if this process has one (the runtime restarted, or the
// configuration changed), else the checkpoint's (as New read it, if it is
// the one to read). A bad checkpoint is set
// aside by Load; the running containers are then adopted. A checkpoint the
// configuration moved is found where it was until the new place has one, so
// that moving it moves no container.
func (p *Plugin) savedStateLocked() (Saved, string) {
	if p.pol != nil {
		return p.savedLocked(), "memory"
	}
	readAtStart := p.readAtStart
	p.readAtStart = nil
	load := func(cp *state.Checkpoint[Saved]) *loadedCheckpoint {
		if readAtStart != nil && readAtStart.path == cp.Path() {
			return readAtStart
		}
		return loadCheckpoint(cp)
	}
	cp := p.checkpoint
	loaded := load(cp)
	if loaded.err == nil && !loaded.found && p.moved != nil {
		cp = p.moved
		loaded = load(cp)
	}
	saved, found, err := loaded.saved, loaded.found, loaded.err
	if cp != p.moved || !found {
		p.moved = nil // only what this process took the state from is retired
	}
	switch {
	case errors.Is(err, state.ErrCorrupt):
		p.log.WithError(err).Error("checkpoint is corrupt; adopting the running containers where they run")
		return Saved{}, "none (corrupt checkpoint)"
	case err != nil:
		p.log.WithError(err).Error("could not read the checkpoint; adopting the running containers where they run")
		return Saved{}, "none (unreadable checkpoint)"
	case !found:
		return Saved{}, "none"
	}
	return saved, "checkpoint " + cp.Path()
}

// running describes the containers the runtime reports with their actual
// cpusets. A container whose request cannot be fully built (its annotation
// became invalid, say) is still accounted, with defaults for the bad parts.
// Stopped containers are left out: they hold nothing (StopContainer
// releases), and CRI-O, unlike containerd, reports them, then fails the
// whole Synchronize if an update of one cannot be applied.
func (p *Plugin) running(pods []*api.PodSandbox, ctrs []*api.Container) []policy.Running {
	podByID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		podByID[pod.GetId()] = pod
	}
	out := make([]policy.Running, 0, len(ctrs))
	requests := p.requests.forMany()
	// Most containers run on one of a few cpusets (the shared pool's):
	// each is parsed once. A CPUSet is immutable, so they share it.
	parsed := map[string]cpuset.CPUSet{}
	parse := func(s string) (cpuset.CPUSet, error) {
		if set, ok := parsed[s]; ok {
			return set, nil
		}
		set, err := cpuset.Parse(s)
		if err == nil {
			parsed[s] = set
		}
		return set, err
	}
	for _, ctr := range ctrs {
		if ctr.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		req, id, err := requests.Build(podByID[ctr.GetPodSandboxId()], ctr, nil)
		// The entry is made only for a warning: 10,000 of them for nothing
		// were a tenth of the work.
		if err != nil {
			p.log.WithFields(id.Fields()).WithError(err).Warn("running container has a bad request; restoring it with defaults for the bad parts")
		}
		r := policy.Running{Request: req}
		cpu := ctr.GetLinux().GetResources().GetCpu()
		if r.CPUs, err = parse(cpu.GetCpus()); err != nil {
			p.log.WithFields(id.Fields()).WithError(err).Warn("running container has an unreadable cpuset.cpus; treating it as unknown")
		}
		if r.Mems, err = parse(cpu.GetMems()); err != nil {
			p.log.WithFields(id.Fields()).WithError(err).Warn("running container has an unreadable cpuset.mems; treating it as unknown")
		}
		out = append(out, r)
	}
	return out
}

// notStarted returns the ids of the containers created and not started.
func notStarted(ctrs []*api.Container) []string {
	var ids []string
	for _, c := range ctrs {
		if c.GetState() == api.ContainerState_CONTAINER_CREATED {
			ids = append(ids, c.GetId())
		}
	}
	return ids
}

// logRestore logs one line per decision of the restore and a summary.
func (p *Plugin) logRestore(report policy.RestoreReport, saved policy.Snapshot, running []policy.Running, source string) {
	// The requests of the containers whose decisions are logged below, by
	// id: on a full node nearly every container is kept, logged at most at
	// debug, and a map of all 10,000 would be made for nothing.
	debug := p.log.Logger.IsLevelEnabled(logrus.DebugLevel)
	requests := map[string]policy.Request{}
	for _, ids := range [][]string{report.Adopted, report.Dropped} {
		for _, id := range ids {
			requests[id] = policy.Request{}
		}
	}
	for _, pl := range report.Replaced {
		requests[pl.ContainerID] = policy.Request{}
	}
	for _, c := range saved.Containers {
		if _, ok := requests[c.Request.ContainerID]; ok || debug {
			requests[c.Request.ContainerID] = c.Request
		}
	}
	for _, r := range running {
		if _, ok := requests[r.Request.ContainerID]; ok || debug {
			requests[r.Request.ContainerID] = r.Request
		}
	}
	entry := func(id string) *logrus.Entry {
		req := requests[id]
		return p.log.WithFields(logrus.Fields{
			"pod": req.Pod, "namespace": req.Namespace, "container": req.Container, "container_id": id,
		})
	}
	placed := func(id string) logrus.Fields {
		pl, _ := p.pol.Placement(id)
		return placementFields(pl)
	}
	// Kept is what a restart is for, and on a full node 10,000 lines that
	// say nothing moved: at debug. Every other decision is news.
	if debug {
		for _, id := range report.Kept {
			entry(id).WithFields(placed(id)).Debug("kept container's placement from the checkpoint")
		}
	}
	for _, id := range report.Adopted {
		entry(id).WithFields(placed(id)).Info("adopted container where it runs")
	}
	unplaced := 0
	for _, pl := range report.Replaced {
		log := entry(pl.ContainerID).WithFields(placementFields(pl))
		switch {
		case !pl.Unplaced:
			log.Info("replaced container's placement")
		case pl.CPUs.IsEmpty():
			unplaced++
			log.Error("could not place container after a restart, nor confine it: every CPU is granted exclusively")
		default:
			unplaced++
			log.Warn("could not place container after a restart; confined to the shared pool and published as unplaced")
			req := requests[pl.ContainerID]
			p.events.Post(apievents.PodRef{Namespace: req.Namespace, Name: req.Pod, UID: req.PodUID}, corev1.EventTypeWarning, "ContainerUnplaced",
				fmt.Sprintf("topology-aware could not place container %s after a restart (%s); it runs on the shared pool %s until a resize or a later restart finds room",
					req.Container, pl.Reason, pl.CPUs))
		}
	}
	for _, id := range report.Dropped {
		entry(id).Info("dropped placement of a container that no longer runs")
	}
	for _, uid := range slices.Sorted(maps.Keys(report.DroppedPods)) {
		p.log.WithFields(logrus.Fields{"pod_uid": uid, "reason": report.DroppedPods[uid]}).
			Warn("dropped a pod's reservation (topology manager scope pod) that could not be restored")
	}
	p.log.WithFields(logrus.Fields{
		"source": source, "containers": len(running), "kept": len(report.Kept), "adopted": len(report.Adopted),
		"replaced": len(report.Replaced) - unplaced, "unplaced": unplaced, "dropped": len(report.Dropped), "updates": len(report.Updates),
		"pods_kept": len(saved.Pods) - len(report.DroppedPods),
	}).Info("restored placements")
}
