package nriplugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/nodecondition"
	"github.com/nri-suite/nri-suite/common/state"
)

// The node's condition is True while every device is Healthy, and False
// listing those that are not (Unknown included), at most maxListed of them.
func TestDevicesCondition(t *testing.T) {
	healthy := state.DeviceHealth{Health: state.HealthHealthy}
	assert.Equal(t, nodecondition.Condition{Status: corev1.ConditionTrue, Reason: "DevicesHealthy",
		Message: "all 0 devices device-injector watches are Healthy"}, devicesCondition(nil))
	assert.Equal(t, corev1.ConditionTrue, devicesCondition(map[string]state.DeviceHealth{"a": healthy}).Status)

	c := devicesCondition(map[string]state.DeviceHealth{
		"vendor.com/gpu=1": healthy,
		"vendor.com/gpu=0": {Health: state.HealthUnhealthy, Message: "device node /dev/gpu0 is missing"},
		"/dev/fuse":        {Health: state.HealthUnknown, Message: "health check fuse could not run: timeout"},
	})
	assert.Equal(t, nodecondition.Condition{Status: corev1.ConditionFalse, Reason: "DevicesUnhealthy",
		Message: "/dev/fuse is Unknown: health check fuse could not run: timeout; " +
			"vendor.com/gpu=0 is Unhealthy: device node /dev/gpu0 is missing"}, c)

	many := map[string]state.DeviceHealth{}
	for i := range maxListed + 3 {
		many[fmt.Sprintf("d%02d", i)] = state.DeviceHealth{Health: state.HealthUnhealthy, Message: "gone"}
	}
	assert.Contains(t, devicesCondition(many).Message, "d09 is Unhealthy: gone; and 3 more")
}

// posted is an eventPoster that keeps what it is given.
type posted []string

func (p *posted) Post(pod apievents.PodRef, eventType, reason, message string) {
	*p = append(*p, fmt.Sprintf("%s/%s %s %s: %s", pod.Namespace, pod.Name, eventType, reason, message))
}

// A device turning Unhealthy posts DeviceUnhealthy once on each pod using
// it (two containers of one pod: one Event), again only when the failure
// changes, and DeviceRecovered when it is Healthy again; a device nobody
// uses posts nothing, and one never reported unhealthy never "recovers".
func TestReportPostsOnTheDevicesPods(t *testing.T) {
	var events posted
	p := &Plugin{api: apiReport{events: &events, reported: map[string]state.DeviceHealth{}}, containers: map[string]*tracked{
		"c1": {id: k8s.Identity{Namespace: "shop", Pod: "train", PodUID: "u1"}, resources: []string{"gpu=0"}},
		"c2": {id: k8s.Identity{Namespace: "shop", Pod: "train", PodUID: "u1"}, resources: []string{"gpu=0", "gpu=1"}},
		"c3": {id: k8s.Identity{Namespace: "lab", Pod: "infer", PodUID: "u2"}, resources: []string{"gpu=1"}},
	}}
	healthy := state.DeviceHealth{Health: state.HealthHealthy}
	missing := state.DeviceHealth{Health: state.HealthUnhealthy, Message: "device node /dev/gpu0 is missing"}
	probe := state.DeviceHealth{Health: state.HealthUnknown, Message: "health check gpu could not run: no such file"}

	p.report(map[string]state.DeviceHealth{"gpu=0": healthy, "gpu=1": healthy, "idle": missing})
	assert.Empty(t, events, "healthy devices, and an unhealthy one nobody uses")

	p.report(map[string]state.DeviceHealth{"gpu=0": missing, "gpu=1": healthy, "idle": missing})
	p.report(map[string]state.DeviceHealth{"gpu=0": missing, "gpu=1": healthy, "idle": missing})
	assert.Equal(t, posted{"shop/train Warning DeviceUnhealthy: device gpu=0 is Unhealthy: device node /dev/gpu0 is missing"}, events)

	events = nil
	p.report(map[string]state.DeviceHealth{"gpu=0": probe, "gpu=1": healthy})
	assert.Equal(t, posted{"shop/train Warning DeviceUnhealthy: device gpu=0 is Unknown: health check gpu could not run: no such file"}, events)

	events = nil
	p.report(map[string]state.DeviceHealth{"gpu=0": healthy, "gpu=1": healthy})
	assert.Equal(t, posted{"shop/train Normal DeviceRecovered: device gpu=0 is Healthy again (was Unknown: health check gpu could not run: no such file)"}, events)
	assert.Empty(t, p.api.reported)
}
