package main

import (
	"context"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFanoutUpdatesEveryOtherLiveContainer(t *testing.T) {
	ctx := context.Background()
	p := newForTest(t)
	plain := &api.PodSandbox{Name: "plain"}
	fanning := &api.PodSandbox{Name: "fanning", Annotations: map[string]string{FanoutAnnotation: "2-5"}}
	_, err := p.Synchronize(ctx, nil, []*api.Container{{Id: "a"}, {Id: "b"}})
	require.NoError(t, err)

	_, updates, err := p.CreateContainer(ctx, plain, &api.Container{Id: "c"})
	require.NoError(t, err)
	assert.Empty(t, updates, "a pod without the annotation updates nobody")

	_, updates, err = p.CreateContainer(ctx, fanning, &api.Container{Id: "d"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, updated(updates, "2-5"), "every live container but the new one")

	require.NoError(t, p.RemoveContainer(ctx, plain, &api.Container{Id: "a"}))
	_, updates, err = p.CreateContainer(ctx, fanning, &api.Container{Id: "e"})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c", "d"}, updated(updates, "2-5"), "removed containers are forgotten")
}

// updated returns the ids the updates name, sorted, checking that each
// sets exactly cpuset.cpus to cpus.
func updated(updates []*api.ContainerUpdate, cpus string) []string {
	var ids []string
	for _, u := range updates {
		if u.GetLinux().GetResources().GetCpu().GetCpus() == cpus {
			ids = append(ids, u.GetContainerId())
		}
	}
	slices.Sort(ids)
	return ids
}
