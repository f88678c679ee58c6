package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nri-suite/nri-suite/internal/testenv"
)

// teardownMargin is kept free before a test's deadline for teardown: when
// `go test -timeout` fires, the binary dies without running t.Cleanup and
// the shims stay behind (the next sandbox sweeps them, but only then).
const teardownMargin = 90 * time.Second

// InCI reports whether the tests run in CI, where a missing prerequisite is
// a failure rather than a reason to skip.
func InCI() bool { return testenv.InCI() }

// RequirePrereqs skips the test when the sandbox cannot run here (not root,
// cache not filled, -short), saying why; with CI=true it fails instead.
func RequirePrereqs(t testing.TB, runtimeName string) {
	t.Helper()
	requirePrereqs(t, runtimeName, false)
}

// RequireClusterPrereqs is RequirePrereqs for a sandbox with Options.Cluster.
func RequireClusterPrereqs(t testing.TB, runtimeName string) {
	t.Helper()
	requirePrereqs(t, runtimeName, true)
}

func requirePrereqs(t testing.TB, runtimeName string, cluster bool) {
	t.Helper()
	rt, err := NewRuntime(runtimeName)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPrereqs(rt, DefaultCache(), cluster); err != nil {
		if InCI() {
			t.Fatalf("real-runtime test cannot run in CI: %v", err)
		}
		t.Skipf("skipping real-runtime test: %v", err)
	}
	if testing.Short() && !InCI() {
		t.Skip("skipping real-runtime test in -short mode")
	}
}

// TestContext returns a context that ends teardownMargin before the test's
// deadline (or after 10 minutes without one).
func TestContext(t testing.TB) context.Context {
	deadline := time.Now().Add(10 * time.Minute)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, has := d.Deadline(); has {
			deadline = dl.Add(-teardownMargin)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// PollUntil calls check every interval until it returns nil; after timeout
// (or when ctx ends) it returns the context's error with check's last one.
// Real-node steps wait this way for what the runtime, the kubelet or a
// plugin does asynchronously; timeout is a bound far above what a step
// needs, never a measure of speed.
func PollUntil(ctx context.Context, timeout, interval time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// Eventually is PollUntil that fails the test, saying what it waited for.
func Eventually(t testing.TB, ctx context.Context, timeout, interval time.Duration, what string, check func() error) {
	t.Helper()
	if err := PollUntil(ctx, timeout, interval, check); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// RemoveCreatedDirs removes, when t ends, those of dirs that do not exist
// now (each from its outermost missing parent): for tools that write host
// paths of their own whatever they are told, as podman and skopeo do.
func RemoveCreatedDirs(t testing.TB, dirs ...string) {
	var created []string
	for _, dir := range dirs {
		if missing := outermostMissing(dir); missing != "" {
			created = append(created, missing)
		}
	}
	t.Cleanup(func() {
		for _, dir := range created {
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("removing %s: %v", dir, err)
			}
		}
	})
}

// NewForTest starts a sandbox for t (after RequirePrereqs) and registers its
// teardown: on failure the component logs are printed first, then the
// sandbox is closed and the test fails if anything was left on the host.
// NRI_SANDBOX_KEEP=1 keeps the run dir (logs, configs) until the next
// sandbox starts.
func NewForTest(t *testing.T, opts Options) *Sandbox {
	t.Helper()
	requirePrereqs(t, opts.Runtime, opts.Cluster)
	if opts.Log == nil {
		opts.Log = TestLogger(t)
	}
	if os.Getenv("NRI_SANDBOX_KEEP") == "1" {
		opts.KeepRunDir = true
	}
	s, err := Start(TestContext(t), opts)
	if err != nil {
		t.Fatalf("starting sandbox: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logComponentLogs(t, s.Dir())
		}
		if err := s.Close(); err != nil {
			t.Errorf("tearing down sandbox: %v", err)
		}
		AssertNoLeftovers(t, s)
	})
	return s
}

// AssertNoLeftovers fails the test if the sandbox left anything on the host.
func AssertNoLeftovers(t testing.TB, s *Sandbox) {
	t.Helper()
	if left := s.Leftovers(); len(left) > 0 {
		t.Errorf("sandbox left on the host:\n  %s", strings.Join(left, "\n  "))
	}
}

// logComponentLogs prints the end of every log in the run dir.
func logComponentLogs(t testing.TB, dir string) {
	t.Helper()
	var logs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() && (d.Name() == "root" || d.Name() == "state") {
			return filepath.SkipDir // container filesystems, not logs
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".log") {
			logs = append(logs, path)
		}
		return nil
	})
	for _, path := range logs {
		t.Logf("--- last lines of %s:\n%s", path, tailFile(path, 40))
	}
}

// BusyboxPod is a host-network pod in namespace default with long-running
// busybox containers (one named "main" unless names are given) that exit at
// once on SIGTERM.
func BusyboxPod(name string, containers ...string) *corev1.Pod {
	if len(containers) == 0 {
		containers = []string{"main"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: new(int64(2))},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:            c,
			Image:           BusyboxImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"},
		})
	}
	return pod
}

// TestLogger returns a logrus logger that writes through t.Log.
func TestLogger(t testing.TB) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(testWriter{t})
	log.SetLevel(logrus.InfoLevel)
	return log
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
