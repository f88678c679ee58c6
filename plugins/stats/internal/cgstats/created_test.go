package cgstats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Created is the oldest time of the cgroup's directories and their
// clone_children (v1) or cgroup.events (v2) files, not before the boot;
// the root's pids directory and controllers cAdvisor does not date by
// (perf_event) do not count.
func TestCreated(t *testing.T) {
	const pod = "/kubepods/pod0d3e"
	at := func(s int) time.Time { return readTime.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name   string
		tree   files
		cgroup string
		times  map[string]int // path below the root -> seconds after readTime
		boot   int
		want   time.Time
	}{
		{"v1 pod: the oldest of every controller", v1Files(pod).with(files{"devices" + pod + "/cgroup.clone_children": "0\n", "perf_event" + pod + "/x": ""}), pod,
			map[string]int{"memory" + pod: 10, "cpu" + pod: 7, "devices" + pod: 9, "devices" + pod + "/cgroup.clone_children": 5, "perf_event" + pod: 1}, -100, at(5)},
		{"v1 root: not its pids directory", v1Files(""), "/",
			map[string]int{"memory": 20, "cpu": 30, "cpuacct": 30, "cpuset": 30, "blkio": 30, "pids": 2}, -100, at(20)},
		{"clamped to the boot", v1Files(""), "/", map[string]int{"memory": 20}, 40, at(40)},
		{"v2: the directory or its cgroup.events", v2Files(pod).with(files{pod[1:] + "/cgroup.events": "populated 1\n"}), pod,
			map[string]int{pod[1:]: 12, pod[1:] + "/cgroup.events": 8}, -100, at(8)},
		{"missing", v2Files(container), pod, nil, -100, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, root := readerFor(t, tc.tree)
			// Everything else is far newer.
			require.NoError(t, filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
				require.NoError(t, err)
				return os.Chtimes(path, at(1000), at(1000))
			}))
			for path, s := range tc.times {
				require.NoError(t, os.Chtimes(filepath.Join(root, path), at(s), at(s)))
			}
			r.boot = at(tc.boot)
			assert.Equal(t, tc.want.Unix(), r.Created(tc.cgroup).Unix())
			assert.Equal(t, tc.want.IsZero(), r.Created(tc.cgroup).IsZero())
		})
	}
}

// bootTime is in the past, to the minute.
func TestBootTime(t *testing.T) {
	now := time.Now()
	boot := bootTime(now)
	require.False(t, boot.IsZero())
	assert.True(t, boot.Before(now))
	assert.Equal(t, boot, boot.Truncate(time.Minute))
}
