package nriplugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

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
