package nriplugin

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
)

// ErrUnhealthy is wrapped by the error for a container asking for an
// Unhealthy device when unhealthy-action is fail.
var ErrUnhealthy = errors.New("unhealthy device")

// tracked is a container that got devices: its identity and resource ids,
// whose health is published for it.
type tracked struct {
	id        k8s.Identity
	resources []string
	published []state.ResourceHealth
}

// checkHealth refuses (fail) or only logs (warn) the Unhealthy devices req
// asks for, each refusal naming the annotation that asked, as the policy's
// do. Unknown devices (not checked yet) pass: resolution still refuses
// those that do not exist.
func (p *Plugin) checkHealth(action config.UnhealthyAction, annotations map[string]string, req request.Request, log *logrus.Entry) error {
	var errs []error
	check := func(key, id string) {
		h := p.monitor.Health(id)
		if h.Health != state.HealthUnhealthy {
			return
		}
		err := fmt.Errorf("%w %s: %s (since %s)", ErrUnhealthy, id, h.Message, h.Since.UTC().Format("2006-01-02T15:04:05Z"))
		if action == config.UnhealthyWarn {
			log.WithError(err).Warn("allowing an unhealthy device (unhealthy-action: warn)")
			return
		}
		errs = append(errs, &request.Error{Key: key, Value: annotations[key], Err: err})
	}
	for _, c := range req.CDI {
		check(c.Key, c.Name)
	}
	for _, d := range req.Devices {
		check(d.Key, d.Path)
	}
	return errors.Join(errs...)
}

// resourceIDs are the ids whose health a container's record reports: CDI
// names and host paths of device nodes, once each.
func resourceIDs(devices []state.InjectedDevice) []string {
	var ids []string
	for _, d := range devices {
		if !slices.Contains(ids, d.Name) {
			ids = append(ids, d.Name)
		}
	}
	return ids
}

// inUse lists the resource ids of the tracked containers, for the monitor.
func (p *Plugin) inUse() []string {
	p.ctrMu.Lock()
	defer p.ctrMu.Unlock()
	var ids []string
	for _, c := range p.containers {
		ids = append(ids, c.resources...)
	}
	return ids
}

// track starts publishing a container's device health.
func (p *Plugin) track(id k8s.Identity, devices []state.InjectedDevice) {
	p.ctrMu.Lock()
	defer p.ctrMu.Unlock()
	c := &tracked{id: id, resources: resourceIDs(devices)}
	p.containers[id.ContainerID] = c
	p.publishContainerHealth(c)
}

// untrack stops it and removes its health record.
func (p *Plugin) untrack(containerID string) {
	p.ctrMu.Lock()
	defer p.ctrMu.Unlock()
	delete(p.containers, containerID)
	if p.ctrHealth != nil {
		if err := p.ctrHealth.Remove(containerID); err != nil {
			p.recordError("remove container health record", err)
		}
	}
}

// healthChecked runs in the monitor's goroutine after every round. It logs
// and publishes the devices' health when it changed, and the record of every
// container whose devices' health changed. A record that could not be
// written before is written again here, every round, until it is. It tells
// the API server (report): Events on the pods whose devices changed, the
// node's condition.
func (p *Plugin) healthChecked(devices map[string]state.DeviceHealth, changed bool) {
	if changed {
		for id, h := range devices {
			if h.Health == state.HealthUnhealthy {
				p.log.WithFields(logrus.Fields{"device": id, "since": h.Since}).Warn("device unhealthy: " + h.Message)
			}
		}
	}
	if p.devHealth != nil && (changed || p.devHealthStale) {
		p.devHealthStale = false
		if err := p.devHealth.Publish(state.DeviceHealthKey, state.DeviceHealthSet{Devices: devices}); err != nil {
			p.devHealthStale = true
			p.recordError("publish device health", err)
		}
	}
	p.report(devices)
	p.ctrMu.Lock()
	defer p.ctrMu.Unlock()
	for _, c := range p.containers {
		p.publishContainerHealth(c)
	}
}

// publishContainerHealth writes c's record when its health changed since
// the last one written (or none was). A failure does not refuse anything:
// unlike the locality record, which topology-aware reads during the same
// creation, the health record is read later (stats, the pod's resource
// health), so it is counted, logged, and written again at the next round.
// The caller holds ctrMu.
func (p *Plugin) publishContainerHealth(c *tracked) {
	resources := make([]state.ResourceHealth, 0, len(c.resources))
	for _, id := range c.resources {
		h := p.monitor.Health(id)
		resources = append(resources, state.ResourceHealth{ResourceID: id, Health: h.Health, Message: h.Message})
	}
	if p.ctrHealth == nil || slices.Equal(resources, c.published) {
		return
	}
	rec := state.ContainerHealth{ContainerID: c.id.ContainerID, PodUID: c.id.PodUID, Namespace: c.id.Namespace,
		Pod: c.id.Pod, Container: c.id.Container, Resources: resources}
	if err := p.ctrHealth.Publish(c.id.ContainerID, rec); err != nil {
		p.recordError("publish container health", err)
		return
	}
	c.published = resources
}
