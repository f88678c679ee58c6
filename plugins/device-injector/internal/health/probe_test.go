package health

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// checks parses one health check for pattern through the real config
// parser: a command (argv) or, with a "file" first element, a file and its
// expect.
func checks(t *testing.T, pattern string, command []string, extra ...string) []config.HealthCheck {
	t.Helper()
	doc := fmt.Sprintf("health-checks:\n- devices: [%q]\n", pattern)
	if len(command) > 0 {
		quoted := make([]string, len(command))
		for i, a := range command {
			quoted[i] = strconv.Quote(a)
		}
		doc += "  command: [" + strings.Join(quoted, ", ") + "]\n"
	}
	for _, line := range extra {
		doc += "  " + line + "\n"
	}
	cfg, err := config.Parse([]byte(doc), "test.yaml")
	require.NoError(t, err)
	return cfg.HealthChecks
}

// probeOnce runs one round for the devices ids (all Healthy so far).
func probeOnce(t *testing.T, p Probes, ids ...string) map[string]state.DeviceHealth {
	t.Helper()
	next := map[string]state.DeviceHealth{}
	for _, id := range ids {
		next[id] = state.DeviceHealth{Health: state.HealthHealthy}
	}
	var pr prober
	require.NoError(t, pr.run(t.Context(), p, next))
	return next
}

func TestProbes(t *testing.T) {
	dir := t.TempDir()
	healthFile := filepath.Join(dir, "0.health")
	require.NoError(t, os.WriteFile(healthFile, []byte("ok\n"), 0o644))
	badFile := filepath.Join(dir, "1.health")
	require.NoError(t, os.WriteFile(badFile, []byte("degraded: ECC errors\n"), 0o644))
	fifo := filepath.Join(dir, "2.health")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	large := filepath.Join(dir, "3.health")
	require.NoError(t, os.WriteFile(large, []byte("ok"+strings.Repeat(" ", maxFileRead)), 0o644))
	const dev = "vendor.com/gpu=0"

	for _, tc := range []struct {
		name    string
		checks  []config.HealthCheck
		id      string
		want    state.Health
		message []string
	}{
		{"exit 0", checks(t, "vendor.com/gpu=*", []string{"/bin/true"}), dev, state.HealthHealthy, nil},
		{"non-zero exit with stderr", checks(t, "vendor.com/gpu=*", []string{"/bin/sh", "-c", "echo 'ECC errors' >&2; exit 3"}), dev,
			state.HealthUnhealthy, []string{"health check health-checks[0]: /bin/sh exited with status 3: ECC errors"}},
		{"placeholders and environment reach the command",
			checks(t, "vendor.com/gpu=*", []string{"/bin/sh", "-c", `[ "$0 $1 $NRI_SUITE_DEVICE" = "0 vendor.com/gpu=0 vendor.com/gpu=0" ]`, "{name}", "{device}"}),
			dev, state.HealthHealthy, nil},
		{"timeout", checks(t, "vendor.com/gpu=*", []string{"/bin/sleep", "30"}, "timeout: 50ms"), dev,
			state.HealthUnhealthy, []string{"/bin/sleep did not finish within 50ms"}},
		{"killed by a signal", checks(t, "vendor.com/gpu=*", []string{"/bin/sh", "-c", "kill -9 $$"}), dev,
			state.HealthUnhealthy, []string{"exited with signal killed"}},
		{"command that cannot run is Unknown", checks(t, "vendor.com/gpu=*", []string{filepath.Join(dir, "no-such-check")}), dev,
			state.HealthUnknown, []string{"health check health-checks[0] could not run", "no-such-check"}},
		{"file matches", checks(t, "vendor.com/gpu=*", nil, "file: "+dir+"/{name}.health", "expect: ok|good"), dev, state.HealthHealthy, nil},
		{"file does not match", checks(t, "vendor.com/gpu=*", nil, "file: "+dir+"/{name}.health", "expect: ok|good"), "vendor.com/gpu=1",
			state.HealthUnhealthy, []string{badFile + ` is "degraded: ECC errors", expected it to match ^(?:ok|good)$`}},
		{"file missing", checks(t, "vendor.com/gpu=*", nil, "file: "+dir+"/{name}.health", "expect: ok"), "vendor.com/gpu=7",
			state.HealthUnhealthy, []string{"reading " + dir + "/7.health", "no such file"}},
		{"a FIFO does not hang the check", checks(t, "vendor.com/gpu=*", nil, "file: "+dir+"/{name}.health", "expect: ok"), "vendor.com/gpu=2",
			state.HealthUnhealthy, []string{"reading " + fifo + ": it is a named pipe (FIFO): not a regular file"}},
		{"a file above 4 KiB", checks(t, "vendor.com/gpu=*", nil, "file: "+dir+"/{name}.health", "expect: ok"), "vendor.com/gpu=3",
			state.HealthUnhealthy, []string{"reading " + large + ": larger than the limit of 4 KiB"}},
		{"a device no check matches", checks(t, "other.com/nic=*", []string{"/bin/false"}), dev, state.HealthHealthy, nil},
		{"the first failing check decides", append(
			checks(t, "vendor.com/gpu=*", []string{"/bin/true"}, "file: "+badFile, "expect: ok"),
			checks(t, "vendor.com/*", []string{"/bin/false"})...), dev,
			state.HealthUnhealthy, []string{"health-checks[0]: " + badFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := probeOnce(t, Probes{Checks: tc.checks, Concurrency: 2}, tc.id)[tc.id]
			assert.Equal(t, tc.want, got.Health, "message: %s", got.Message)
			if tc.message == nil {
				assert.Empty(t, got.Message)
			}
			for _, want := range tc.message {
				assert.Contains(t, got.Message, want)
			}
		})
	}
}

func TestProbesSkipDevicesAlreadyUnhealthy(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	next := map[string]state.DeviceHealth{"vendor.com/gpu=0": {Health: state.HealthUnhealthy, Message: "device node /dev/gpu0 is missing"}}
	var pr prober
	require.NoError(t, pr.run(t.Context(), Probes{Checks: checks(t, "vendor.com/gpu=*", []string{"/bin/touch", ran}), Concurrency: 1}, next))
	assert.Equal(t, "device node /dev/gpu0 is missing", next["vendor.com/gpu=0"].Message)
	assert.NoFileExists(t, ran, "no check runs for a device whose node is already wrong")
}

// TestProbeConcurrency runs a check for 6 devices with concurrency 2: each
// run marks itself running, counts the running ones, and unmarks itself.
func TestProbeConcurrency(t *testing.T) {
	dir := t.TempDir()
	running := filepath.Join(dir, "running")
	require.NoError(t, os.Mkdir(running, 0o755))
	counts := filepath.Join(dir, "counts")
	script := `mkdir "$0/$1" && ls "$0" | wc -l >> "$2"; sleep 0.1; rmdir "$0/$1"`
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("vendor.com/gpu=%d", i))
	}
	got := probeOnce(t, Probes{Checks: checks(t, "vendor.com/gpu=*", []string{"/bin/sh", "-c", script, running, "{name}", counts}), Concurrency: 2}, ids...)
	for _, id := range ids {
		assert.Equal(t, state.HealthHealthy, got[id].Health, "%s: %s", id, got[id].Message)
	}
	f, err := os.Open(counts)
	require.NoError(t, err)
	defer f.Close()
	var seen []int
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		n, err := strconv.Atoi(strings.TrimSpace(scanner.Text()))
		require.NoError(t, err)
		seen = append(seen, n)
	}
	assert.Len(t, seen, len(ids), "one run per device")
	for _, n := range seen {
		assert.LessOrEqual(t, n, 2, "checks running at once: %v", seen)
	}
}

// TestReadersDoNotWaitForChecks holds a round in a check that waits for
// the test, and reads the monitor meanwhile.
func TestReadersDoNotWaitForChecks(t *testing.T) {
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	src := &sources{}
	src.set(inventory(nil, resolve.Defined{Name: "vendor.com/gpu=0"}))
	m := src.monitor()
	m.SetProbes(Probes{Checks: checks(t, "vendor.com/gpu=*",
		[]string{"/bin/sh", "-c", `touch "$0"; while [ ! -e "$1" ]; do sleep 0.02; done`, started, release}, "timeout: 1m"), Concurrency: 1})
	done := make(chan error, 1)
	go func() {
		_, err := m.Check(t.Context())
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 30*time.Second, 10*time.Millisecond,
		"the check started")

	read := make(chan state.DeviceHealth, 1)
	go func() { read <- m.Health("vendor.com/gpu=0") }()
	select {
	case h := <-read:
		assert.Equal(t, state.HealthUnknown, h.Health, "not checked yet while its first round runs")
	case <-time.After(10 * time.Second):
		t.Fatal("Health waited for a running check")
	}
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	require.NoError(t, <-done)
	assert.Equal(t, state.HealthHealthy, m.Health("vendor.com/gpu=0").Health)
}

// TestTimeoutKillsTheCheck checks that a check's children go with it: a
// script's background child would otherwise outlive the timeout.
func TestTimeoutKillsTheCheck(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	got := probeOnce(t, Probes{Checks: checks(t, "vendor.com/gpu=*",
		[]string{"/bin/sh", "-c", `sleep 30 & echo $! > "$0"; wait`, pidFile}, "timeout: 200ms"), Concurrency: 1}, "vendor.com/gpu=0")
	assert.Contains(t, got["vendor.com/gpu=0"].Message, "did not finish within 200ms")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		// Gone, or a zombie waiting for init to reap it.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z ")
	}, 10*time.Second, 20*time.Millisecond, "the check's child %d was killed", pid)
}
