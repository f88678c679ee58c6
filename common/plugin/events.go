package plugin

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// implements reports whether p implements the interface T.
func implements[T any](p any) bool {
	_, ok := p.(T)
	return ok
}

// eventHandlers pairs each NRI event with the stub interface that handles it. The
// runner's wrapper implements all of them, so the stub would subscribe to everything;
// this table gives the mask of what the plugin itself implements.
var eventHandlers = []struct {
	event       api.Event
	implemented func(any) bool
}{
	{api.Event_RUN_POD_SANDBOX, implements[stub.RunPodInterface]},
	{api.Event_UPDATE_POD_SANDBOX, implements[stub.UpdatePodInterface]},
	{api.Event_POST_UPDATE_POD_SANDBOX, implements[stub.PostUpdatePodInterface]},
	{api.Event_STOP_POD_SANDBOX, implements[stub.StopPodInterface]},
	{api.Event_REMOVE_POD_SANDBOX, implements[stub.RemovePodInterface]},
	{api.Event_CREATE_CONTAINER, implements[stub.CreateContainerInterface]},
	{api.Event_POST_CREATE_CONTAINER, implements[stub.PostCreateContainerInterface]},
	{api.Event_START_CONTAINER, implements[stub.StartContainerInterface]},
	{api.Event_POST_START_CONTAINER, implements[stub.PostStartContainerInterface]},
	{api.Event_UPDATE_CONTAINER, implements[stub.UpdateContainerInterface]},
	{api.Event_POST_UPDATE_CONTAINER, implements[stub.PostUpdateContainerInterface]},
	{api.Event_STOP_CONTAINER, implements[stub.StopContainerInterface]},
	{api.Event_REMOVE_CONTAINER, implements[stub.RemoveContainerInterface]},
	{api.Event_VALIDATE_CONTAINER_ADJUSTMENT, implements[stub.ValidateContainerAdjustmentInterface]},
}

// EventMask returns the NRI events plugin p handles, or an error when it handles none
// or implements the stub's own Configure, which the runner's Configurable replaces.
func EventMask(p any) (api.EventMask, error) {
	if implements[stub.ConfigureInterface](p) {
		return 0, fmt.Errorf("plugin %T implements the NRI stub's Configure: implement plugin.Configurable instead", p)
	}
	var mask api.EventMask
	for _, h := range eventHandlers {
		if h.implemented(p) {
			mask.Set(h.event)
		}
	}
	if mask == 0 {
		return 0, fmt.Errorf("plugin %T implements no NRI event handler (CreateContainer, UpdateContainer, ...)", p)
	}
	return mask, nil
}
