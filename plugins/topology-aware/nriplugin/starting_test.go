package nriplugin

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
	"github.com/nri-suite/nri-suite/plugins/topology-aware/internal/policy"
)

func TestStartTracker(t *testing.T) {
	all := func(string) bool { return true }
	none := func(string) bool { return false }
	tests := []struct {
		name  string
		steps func(s *startTracker)
		// started: id -> whether started reports a possibly lost update
		started map[string]bool
		// exclusive: the containers are not on the shared pool
		exclusive bool
	}{
		{name: "nothing announced", steps: func(s *startTracker) { s.created("a") }, started: map[string]bool{"a": false}},
		{name: "announced after creation", steps: func(s *startTracker) { s.created("a"); s.announced() }, started: map[string]bool{"a": true}},
		{name: "announced after creation, not shared", steps: func(s *startTracker) { s.created("a"); s.announced() },
			started: map[string]bool{"a": false}, exclusive: true},
		{name: "announced before creation only", steps: func(s *startTracker) { s.announced(); s.created("a") }, started: map[string]bool{"a": false}},
		{name: "each container its own creation", steps: func(s *startTracker) { s.created("a"); s.announced(); s.created("b") },
			started: map[string]bool{"a": true, "b": false}},
		{name: "unknown container", steps: func(s *startTracker) { s.announced() }, started: map[string]bool{"a": false}},
		{name: "forgotten container", steps: func(s *startTracker) { s.created("a"); s.announced(); s.forget("a") }, started: map[string]bool{"a": false}},
		{name: "resync keeps placed, adds created, counts from now", steps: func(s *startTracker) {
			s.created("placed")
			s.created("gone")
			s.announced()
			s.resync(func(id string) bool { return id != "gone" }, []string{"new"}, none)
			s.announced()
		}, started: map[string]bool{"placed": true, "gone": false, "new": true}},
		{name: "resync without later changes", steps: func(s *startTracker) {
			s.created("a")
			s.announced()
			s.resync(all, nil, none)
		}, started: map[string]bool{"a": false}},
		{name: "resync that updated them, whatever their pool", steps: func(s *startTracker) {
			s.created("placed")
			s.resync(all, []string{"new", "other"}, func(id string) bool { return id != "other" })
		}, started: map[string]bool{"placed": true, "new": true, "other": false}, exclusive: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStartTracker()
			tc.steps(&s)
			for id, want := range tc.started {
				assert.Equal(t, want, s.started(id, !tc.exclusive), "started(%s)", id)
				assert.False(t, s.started(id, !tc.exclusive), "started(%s) a second time", id)
			}
			assert.Empty(t, s.starting, "every container is forgotten once started")
		})
	}
}

// recordingUpdater is the runner's Updater as a runtime that applies
// everything, recording what it got; during, if set, runs within each call.
type recordingUpdater struct {
	mu     sync.Mutex
	calls  [][]*api.ContainerUpdate
	during func()
	fail   func(updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error)
}

func (u *recordingUpdater) UpdateContainers(updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	u.mu.Lock()
	u.calls = append(u.calls, updates)
	during, fail := u.during, u.fail
	u.mu.Unlock()
	if during != nil {
		during()
	}
	if fail != nil {
		return fail(updates)
	}
	return nil, nil
}

// pushed returns the cpuset.cpus of every update of id, in order.
func (u *recordingUpdater) pushed(id string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, call := range u.calls {
		for _, up := range call {
			if up.GetContainerId() == id {
				out = append(out, up.GetLinux().GetResources().GetCpu().GetCpus())
			}
		}
	}
	return out
}

// withRecordingUpdater is a synchronized plugin on the 12-CPU fixture, with
// an Updater that records what the plugin pushes, and its runtime.
func withRecordingUpdater(t *testing.T) (*recordingUpdater, *testPlugin, *runtimeView) {
	t.Helper()
	u := &recordingUpdater{}
	p := newTestPluginWith(t, "smt-2s-12c-interleaved", nil, t.TempDir(), t.TempDir(), u)
	v := newRuntimeView()
	synchronize(t, p.Plugin, v)
	return u, p, v
}

func TestPostStartReappliesPlacementAfterSharedPoolChanged(t *testing.T) {
	u, p, v := withRecordingUpdater(t)
	ctx := context.Background()

	// web is created and started before the grant: nothing to re-apply.
	web, err := v.create(t, p.Plugin, "burstable.yaml", "web")
	require.NoError(t, err)
	require.NoError(t, p.PostStartContainer(ctx, v.pods[v.ctrs[web].GetPodSandboxId()], v.ctrs[web]))
	// idle is created, then the grant changes the shared pool, then idle starts.
	idle, err := v.create(t, p.Plugin, "besteffort.yaml", "idle")
	require.NoError(t, err)
	app, err := v.create(t, p.Plugin, "guaranteed-2cpu.yaml", "app")
	require.NoError(t, err)
	require.NoError(t, p.PostStartContainer(ctx, v.pods[v.ctrs[app].GetPodSandboxId()], v.ctrs[app]))
	require.NoError(t, p.PostStartContainer(ctx, v.pods[v.ctrs[idle].GetPodSandboxId()], v.ctrs[idle]))

	want := v.cpus(t, idle).String()
	require.Eventually(t, func() bool { return len(u.pushed(idle)) > 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{want}, u.pushed(idle), "idle's current placement, once")
	// web was queued before idle if at all, so its push would be seen by now.
	assert.Empty(t, u.pushed(web), "web started before the change")
	assert.Empty(t, u.pushed(app), "app is not on the shared pool")
	assert.InDelta(t, 1, counterValue(t, p.metrics.reapplied.WithLabelValues(reapplyApplied)), 0)
}

// A placement counts as applied once the runtime shows it: a container that
// starts elsewhere (its CreateContainer reply never reached the runtime,
// which created it without the plugin's cpuset) gets it again; one that
// starts on it gets nothing.
func TestPostStartReappliesWhatTheRuntimeDoesNotShow(t *testing.T) {
	u, p, v := withRecordingUpdater(t)
	ctx := context.Background()

	shown, err := v.create(t, p.Plugin, "guaranteed-4cpu.yaml", "app")
	require.NoError(t, err)
	pod, lost := nriPod(t, "guaranteed-2cpu.yaml", "app")
	adjust, _, err := p.CreateContainer(ctx, pod, lost)
	require.NoError(t, err)
	require.NoError(t, p.PostStartContainer(ctx, v.pods[v.ctrs[shown].GetPodSandboxId()], v.ctrs[shown]))
	require.Empty(t, lost.GetLinux().GetResources().GetCpu().GetCpus(), "the runtime never got the adjustment")
	require.NoError(t, p.PostStartContainer(ctx, pod, lost))

	want := adjust.GetLinux().GetResources().GetCpu().GetCpus()
	require.Eventually(t, func() bool { return len(u.pushed(lost.GetId())) > 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{want}, u.pushed(lost.GetId()))
	assert.Empty(t, u.pushed(shown), "it runs where it was placed")
}

// A Synchronize's update of a container created but not started may be
// lost before its start as any other (containerd applies it to the spec
// only, once the task exists): it is pushed again after the start, whatever
// the pool, even though the runtime's spec shows it.
func TestPostStartReappliesWhatASynchronizeSentBeforeTheStart(t *testing.T) {
	u := &recordingUpdater{}
	p := newTestPluginWith(t, "smt-2s-12c-interleaved", nil, t.TempDir(), t.TempDir(), u)
	v := newRuntimeView()
	pod, ctr := nriPod(t, "guaranteed-2cpu.yaml", "app")
	ctr.State = api.ContainerState_CONTAINER_CREATED // created while the plugin was down
	v.pods[pod.GetId()], v.ctrs[ctr.GetId()] = pod, ctr
	synchronize(t, p.Plugin, v)
	grant := v.cpus(t, ctr.GetId())
	require.Equal(t, 2, grant.Size(), "the Synchronize placed it")

	require.NoError(t, p.PostStartContainer(context.Background(), pod, ctr))
	require.Eventually(t, func() bool { return len(u.pushed(ctr.GetId())) > 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{grant.String()}, u.pushed(ctr.GetId()))
}

// A Synchronize that ran past the runtime's deadline says so: its reply is
// lost, and the next one sends again.
func TestSynchronizePastTheDeadlineIsLogged(t *testing.T) {
	p := newTestPlugin(t, "smt-2s-12c-interleaved", nil)
	logs := logtest.NewLocal(p.log.Logger)
	logged := func(msg string) bool {
		return slices.ContainsFunc(logs.AllEntries(), func(e *logrus.Entry) bool { return e.Message == msg })
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err, "the plugin cannot tell the runtime anything more")
	const warning = "synchronize ran past the runtime's deadline: the runtime drops this reply, and the next synchronize sends again what it does not show"
	assert.True(t, logged(warning))
	logs.Reset()
	_, err = p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	assert.False(t, logged(warning), "not in time")
}

func TestCurrentUpdatesLeaveOutRemovedContainers(t *testing.T) {
	p, v, idle := withIdleContainer(t)
	web, err := v.create(t, p.Plugin, "burstable.yaml", "web")
	require.NoError(t, err)
	v.remove(t, p.Plugin, web, true)

	updates := p.currentUpdates([]string{idle, web})
	require.Len(t, updates, 1)
	assert.Equal(t, idle, updates[0].GetContainerId())
	assert.Equal(t, v.cpus(t, idle).String(), updates[0].GetLinux().GetResources().GetCpu().GetCpus())
	p.mu.Lock()
	assert.NotContains(t, p.starts.starting, web, "a removed container is not waited for")
	p.mu.Unlock()
}

// placements is what a reapplier reads: a container's cpuset.cpus, changed
// by the test while a push is on its way.
type placements struct {
	mu   sync.Mutex
	cpus map[string]string
}

func (s *placements) set(id, cpus string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpus[id] = cpus
}

func (s *placements) current(ids []string) []*api.ContainerUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*api.ContainerUpdate
	for _, id := range ids {
		if cpus, ok := s.cpus[id]; ok {
			out = append(out, &api.ContainerUpdate{ContainerId: id, Linux: &api.LinuxContainerUpdate{
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus}},
			}})
		}
	}
	return out
}

func newTestReapplier(t *testing.T, u plugin.Updater, s *placements) (*reapplier, *metrics) {
	t.Helper()
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	m := newMetrics("test")
	r := newReapplier(u, s.current, logrus.NewEntry(logger), m)
	t.Cleanup(r.Close)
	return r, m
}

func TestReapplierPushesAgainWhenThePlacementChangedInFlight(t *testing.T) {
	s := &placements{cpus: map[string]string{"a": "0-3"}}
	u := &recordingUpdater{}
	once := sync.Once{}
	// A handler's newer update reaches the runtime before the push does.
	u.during = func() { once.Do(func() { s.set("a", "0-1") }) }
	r, m := newTestReapplier(t, u, s)
	r.Queue("a", logrus.Fields{"container": "a"})
	require.Eventually(t, func() bool { return len(u.pushed("a")) == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"0-3", "0-1"}, u.pushed("a"), "the last push carries the newer placement")
	assert.InDelta(t, 2, counterValue(t, m.reapplied.WithLabelValues(reapplyApplied)), 0)
}

func TestReapplierOutcomes(t *testing.T) {
	errRuntime := errors.New("connection reset")
	tests := []struct {
		name string
		// fail is the runtime's answer to a push of a and gone.
		fail     func([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error)
		updater  bool
		outcomes map[string]float64
	}{
		{"applied", nil, true, map[string]float64{reapplyApplied: 2}},
		{"failed, one removed meanwhile", func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return u, nil },
			true, map[string]float64{reapplyFailed: 1}},
		{"request failed", func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return u, errRuntime },
			true, map[string]float64{reapplyError: 2}},
		{"no updater", nil, false, map[string]float64{reapplyError: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &placements{cpus: map[string]string{"a": "0-3", "gone": "0-3"}}
			u := &recordingUpdater{fail: tc.fail}
			// gone is removed while its push is on its way (the two may
			// be queued into one push or two).
			u.during = func() {
				u.mu.Lock()
				last := u.calls[len(u.calls)-1]
				u.mu.Unlock()
				if slices.ContainsFunc(last, func(up *api.ContainerUpdate) bool { return up.GetContainerId() == "gone" }) {
					s.mu.Lock()
					delete(s.cpus, "gone")
					s.mu.Unlock()
				}
			}
			var updater plugin.Updater
			if tc.updater {
				updater = u
			}
			r, m := newTestReapplier(t, updater, s)
			r.Queue("a", nil)
			r.Queue("gone", nil)
			total := func() float64 {
				sum := 0.0
				for _, o := range []string{reapplyApplied, reapplyFailed, reapplyError} {
					sum += counterValue(t, m.reapplied.WithLabelValues(o))
				}
				return sum
			}
			var want float64
			for _, n := range tc.outcomes {
				want += n
			}
			require.Eventually(t, func() bool { return total() >= want }, 10*time.Second, time.Millisecond)
			r.Close()
			for _, o := range []string{reapplyApplied, reapplyFailed, reapplyError} {
				assert.InDelta(t, tc.outcomes[o], counterValue(t, m.reapplied.WithLabelValues(o)), 0, "outcome %s", o)
			}
		})
	}
}

// counterValue reads one child of a counter vector.
func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	assert.NoError(t, c.Write(&m)) // not require: also called from Eventually's goroutine
	return m.GetCounter().GetValue()
}

// A Synchronize reply has a size limit (NRI's transport refuses a message
// above 4 MiB): the updates that do not fit in it reach the runtime through
// the Updater, each container's exactly once between the two.
func TestSynchronizeSendsWhatTheReplyCannotHoldThroughTheUpdater(t *testing.T) {
	u, p, v := withRecordingUpdater(t)
	for i := range 6 {
		pod, ctr := livePod(t, "besteffort.yaml", "idle", i)
		_, _, err := p.CreateContainer(context.Background(), pod, ctr)
		require.NoError(t, err)
		v.pods[pod.GetId()], v.ctrs[ctr.GetId()] = pod, ctr
	}
	// Created while the plugin was away: every container on no cpuset, so
	// that each needs an update.
	for id := range v.ctrs {
		v.setCPUs(id, "", "")
	}
	limit := maxSyncReply
	one := containerUpdates([]policy.Placement{{ContainerID: "ctr-0", CPUs: mustCPUs(t, "0-4,6-10"), Mems: cpuset.New(0, 1)}}, mayFail)[0]
	maxSyncReply = 2 * (one.SizeVT() + 2)
	t.Cleanup(func() { maxSyncReply = limit })

	fresh := newTestPluginWith(t, "smt-2s-12c-interleaved", nil, t.TempDir(), t.TempDir(), u)
	pods, ctrs := v.list()
	reply, err := fresh.Synchronize(context.Background(), pods, ctrs)
	require.NoError(t, err)
	assert.NotEmpty(t, reply)
	assert.Less(t, len(reply), len(ctrs), "the reply holds what fits")
	v.apply(t, reply)
	inReply := map[string]bool{}
	for _, up := range reply {
		inReply[up.GetContainerId()] = true
	}
	for id := range v.ctrs {
		if inReply[id] {
			continue
		}
		require.Eventually(t, func() bool { return len(u.pushed(id)) > 0 }, 10*time.Second, time.Millisecond, "%s is pushed through the Updater", id)
		assert.Len(t, u.pushed(id), 1)
	}
}

// On a runtime whose NRI can deadlock on unsolicited updates (CRI-O
// v1.34.0), a placement to apply again is never pushed through the
// Updater: the next reply that carries updates, another container's
// creation here, carries it.
func TestReapplyWaitsForTheNextReplyWhereUnsolicitedUpdatesAreUnsafe(t *testing.T) {
	u, p, _ := withRecordingUpdater(t)
	p.SetRuntime("cri-o", "1.34.0")
	ctx := context.Background()

	pod, lost := nriPod(t, "guaranteed-2cpu.yaml", "app")
	adjust, _, err := p.CreateContainer(ctx, pod, lost)
	require.NoError(t, err)
	require.NoError(t, p.PostStartContainer(ctx, pod, lost), "the runtime shows it elsewhere: it needs its placement again")

	nextPod, next := nriPod(t, "besteffort.yaml", "idle")
	_, updates, err := p.CreateContainer(ctx, nextPod, next)
	require.NoError(t, err)
	var carried []string
	for _, up := range updates {
		if up.GetContainerId() == lost.GetId() {
			carried = append(carried, up.GetLinux().GetResources().GetCpu().GetCpus())
		}
	}
	assert.Equal(t, []string{adjust.GetLinux().GetResources().GetCpu().GetCpus()}, carried, "the next creation's reply carries it")
	p.reapply.Close() // the pusher stopped: anything it was given is in u now
	assert.Empty(t, u.pushed(lost.GetId()), "nothing went through the runtime's UpdateContainers")
}

// posted is an eventPoster that keeps what it is given.
type posted []string

func (p *posted) Post(pod apievents.PodRef, eventType, reason, message string) {
	*p = append(*p, pod.Namespace+"/"+pod.Name+"/"+pod.UID+" "+eventType+" "+reason+": "+message)
}

// A container that could not be placed after a restart is an Event on its
// pod in the cluster, besides its record, metric and log line; the others
// are not.
func TestUnplacedContainerIsAnEventOnItsPod(t *testing.T) {
	_, p, _ := withRecordingUpdater(t)
	var events posted
	p.events = &events
	req := policy.Request{ContainerID: "c1", PodUID: "u1", Namespace: "shop", Pod: "db", Container: "main"}
	p.logRestore(policy.RestoreReport{Replaced: []policy.Placement{
		{ContainerID: "c1", PodUID: "u1", Pool: policy.PoolShared, CPUs: cpuset.New(0, 1), Unplaced: true,
			Reason: "2 CPUs requested, 1 free"},
		{ContainerID: "c2", PodUID: "u2", Pool: policy.PoolShared, CPUs: cpuset.New(0, 1), Reason: "shared"},
	}}, policy.Snapshot{}, []policy.Running{{Request: req}, {Request: policy.Request{ContainerID: "c2", Pod: "web"}}}, "test")
	assert.Equal(t, posted{"shop/db/u1 Warning ContainerUnplaced: topology-aware could not place container main after a restart " +
		"(2 CPUs requested, 1 free); it runs on the shared pool 0-1 until a resize or a later restart finds room"}, events)
}
