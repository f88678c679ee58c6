package nriplugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/nodecondition"
	"github.com/nri-suite/nri-suite/common/state"
)

// What device health tells the API server: Events on the pods that use a
// device, and the node's condition.
const (
	ReasonDeviceUnhealthy = "DeviceUnhealthy"
	ReasonDeviceRecovered = "DeviceRecovered"
	// ConditionDevicesHealthy is the node's condition: False while a device
	// is Unhealthy or Unknown, listing them.
	ConditionDevicesHealthy corev1.NodeConditionType = "NRIDevicesHealthy"
	// maxListed bounds the devices the condition's message names.
	maxListed = 10
)

// eventPoster posts Events about pods (an *apievents.Recorder).
type eventPoster interface {
	Post(pod apievents.PodRef, eventType, reason, message string)
}

// apiReport turns the health rounds into Events and the node's condition.
// Only the monitor's goroutine uses it, after a round: never an NRI request.
type apiReport struct {
	events    eventPoster                   // nil: no API server
	condition *nodecondition.Setter         // nil: no API server or node name
	reported  map[string]state.DeviceHealth // the last health told of each device that was not Healthy
}

// report posts DeviceUnhealthy on the pods using each device that turned
// Unhealthy or Unknown (or failed another way) since the last round, and
// DeviceRecovered on those using one that is Healthy again, and sets the
// node's condition.
func (p *Plugin) report(devices map[string]state.DeviceHealth) {
	r := &p.api
	for _, id := range slices.Sorted(maps.Keys(devices)) {
		h, last := devices[id], r.reported[id]
		switch {
		case h.Health != state.HealthHealthy && (last.Health != h.Health || last.Message != h.Message):
			p.postOnPods(id, corev1.EventTypeWarning, ReasonDeviceUnhealthy, fmt.Sprintf("device %s is %s: %s", id, h.Health, h.Message))
			r.reported[id] = h
		case h.Health == state.HealthHealthy && last.Health != "":
			p.postOnPods(id, corev1.EventTypeNormal, ReasonDeviceRecovered, fmt.Sprintf("device %s is Healthy again (was %s: %s)", id, last.Health, last.Message))
			delete(r.reported, id)
		}
	}
	// A device no longer watched (its spec removed, no container using it)
	// has nobody left to tell.
	for id := range r.reported {
		if _, ok := devices[id]; !ok {
			delete(r.reported, id)
		}
	}
	r.condition.Set(devicesCondition(devices))
}

// postOnPods posts an Event on every pod with a container that uses device
// id, once per pod.
func (p *Plugin) postOnPods(id, eventType, reason, message string) {
	if p.api.events == nil {
		return
	}
	p.ctrMu.Lock()
	pods := map[string]apievents.PodRef{}
	for _, c := range p.containers {
		if slices.Contains(c.resources, id) {
			pods[c.id.PodUID] = apievents.PodRef{Namespace: c.id.Namespace, Name: c.id.Pod, UID: c.id.PodUID}
		}
	}
	p.ctrMu.Unlock()
	for _, pod := range pods {
		p.api.events.Post(pod, eventType, reason, message)
	}
}

// devicesCondition is the node's condition for the devices' health.
func devicesCondition(devices map[string]state.DeviceHealth) nodecondition.Condition {
	var bad []string
	for _, id := range slices.Sorted(maps.Keys(devices)) {
		if h := devices[id]; h.Health != state.HealthHealthy {
			bad = append(bad, fmt.Sprintf("%s is %s: %s", id, h.Health, h.Message))
		}
	}
	if len(bad) == 0 {
		return nodecondition.Condition{Status: corev1.ConditionTrue, Reason: "DevicesHealthy",
			Message: fmt.Sprintf("all %d devices device-injector watches are Healthy", len(devices))}
	}
	message := strings.Join(bad[:min(len(bad), maxListed)], "; ")
	if len(bad) > maxListed {
		message += fmt.Sprintf("; and %d more", len(bad)-maxListed)
	}
	return nodecondition.Condition{Status: corev1.ConditionFalse, Reason: "DevicesUnhealthy", Message: message}
}
