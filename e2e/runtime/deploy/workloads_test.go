package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// containerState is a running container as the kubelet and the plugins
// left it: which container (the runtime's id, the kubelet's attempt) and
// what it has from the plugins, read inside it (inside).
type containerState struct {
	ID      string
	Attempt uint32
	Inside  string
}

// insideScript prints what the plugins give a container: its CPUs, memory
// nodes and seccomp mode, its device nodes and its device cgroup's rules
// (cgroup v1; nothing on v2, where the runtime's eBPF program holds them).
const insideScript = `grep -E '^(Cpus_allowed_list|Mems_allowed_list|Seccomp):' /proc/1/status; ` +
	`ls -ln /dev | grep '^[bc]'; cat /sys/fs/cgroup/devices/devices.list 2>/dev/null; true`

// running lists the running containers of the pods in namespace, by
// pod/container.
func running(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, namespace string) map[string]sandbox.Container {
	all, err := sb.CRI().Containers(ctx)
	require.NoError(t, err)
	out := map[string]sandbox.Container{}
	for _, c := range all {
		if c.Namespace == namespace && c.State == sandbox.ContainerRunning {
			out[c.Pod+"/"+c.Name] = c
		}
	}
	return out
}

// containerStates reads every running container of namespace, a few at a
// time: one exec each.
func containerStates(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, namespace string) map[string]containerState {
	var mu sync.Mutex
	states := map[string]containerState{}
	var g errgroup.Group
	g.SetLimit(4)
	for key, c := range running(ctx, t, sb, namespace) {
		g.Go(func() error {
			inside, err := sb.CRI().Exec(ctx, c.ID, "sh", "-c", insideScript)
			if err != nil {
				return fmt.Errorf("reading container %s: %w", key, err)
			}
			mu.Lock()
			defer mu.Unlock()
			states[key] = containerState{ID: c.ID, Attempt: c.Attempt, Inside: strings.TrimSpace(inside)}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	return states
}
