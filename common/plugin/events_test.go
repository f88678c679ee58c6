package plugin

import (
	"context"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type stopAndValidate struct{}

func (stopAndValidate) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

func (stopAndValidate) ValidateContainerAdjustment(context.Context, *api.ValidateContainerAdjustmentRequest) error {
	return nil
}

type syncOnly struct{}

func (syncOnly) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

// stubConfigure has the NRI stub's Configure, which the runner would silently shadow.
type stubConfigure struct{ onlyCreate }

func (stubConfigure) Configure(context.Context, string, string, string) (api.EventMask, error) {
	return 0, nil
}

func TestEventMask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plugin  any
		want    []api.Event
		wantErr string
	}{
		{name: "one handler", plugin: onlyCreate{}, want: []api.Event{api.Event_CREATE_CONTAINER}},
		{name: "two handlers", plugin: stopAndValidate{}, want: []api.Event{api.Event_STOP_CONTAINER, api.Event_VALIDATE_CONTAINER_ADJUSTMENT}},
		{name: "configurable and closer add no events", plugin: &recorder{}, want: []api.Event{api.Event_CREATE_CONTAINER}},
		{name: "no event handler", plugin: syncOnly{}, wantErr: "implements no NRI event handler"},
		{name: "stub's Configure", plugin: stubConfigure{}, wantErr: "implement plugin.Configurable instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EventMask(tc.plugin)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var want api.EventMask
			want.Set(tc.want...)
			assert.Equal(t, want.PrettyString(), got.PrettyString())
		})
	}
}

// TestWrapperImplementsEveryHandler guards the premise of EventMask: the stub must see
// every handler on the wrapper, or events the plugin implements would never arrive.
func TestWrapperImplementsEveryHandler(t *testing.T) {
	w := &wrapper{}
	for _, h := range eventHandlers {
		assert.True(t, h.implemented(w), "wrapper handles %s", h.event.PrettyName())
	}
	assert.Len(t, eventHandlers, len(api.EventPrettyNames), "every NRI event is in the table")
}
