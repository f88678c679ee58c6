package deploy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// jobsNamespace holds the Jobs of the jobs scenario.
const jobsNamespace = "jobs"

// sidecarJob is a Job of the jobs scenario: its pod's native sidecar
// (an init container with restartPolicy: Always) becomes ready, for
// sidecar-order, when the file /shared/ready exists, which it writes after
// readyAfter (never, when empty); the main checks that file first, so that
// it tells whether it started after the sidecar was ready.
type sidecarJob struct {
	name       string
	readyAfter string
	onTimeout  string
	// The outcome sidecar-order's README promises, and what the main saw.
	want         batchv1.JobConditionType
	wantMainExit int32
	wantMainLog  string
	wantHelper   string
}

// jobs runs, through the Job controller, Jobs whose pod has a native
// sidecar gated by sidecar-order's readiness annotation:
//   - one whose sidecar becomes ready 2 s after it starts: the main starts
//     only then (the kubelet alone would start it as soon as the sidecar
//     has started, and it would fail), the Job is Complete, and the sidecar
//     stops after the main, stopped by its helper;
//   - two whose sidecar never becomes ready: with on-timeout fail the
//     main's helper exits 125 without starting it and the Job fails; with
//     on-timeout start the main runs without it and the Job is Complete.
func jobs(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	if sb.Runtime().Name() == "crio" {
		t.Skip("CRI-O v1.34's NRI drops args adjustments: sidecar-order leaves pods alone there (plugins/sidecar-order/README.md)")
	}
	createNamespace(ctx, t, sb, jobsNamespace)
	cases := []sidecarJob{
		{name: "gated", readyAfter: "2", onTimeout: "fail", want: batchv1.JobComplete,
			wantMainLog: "the sidecar was ready", wantHelper: "sending SIGTERM to the sidecar"},
		{name: "never-ready-fail", onTimeout: "fail", want: batchv1.JobFailed, wantMainExit: 125,
			wantMainLog: "on-timeout is fail: not starting the command"},
		{name: "never-ready-start", onTimeout: "start", want: batchv1.JobComplete,
			wantMainLog: "started without the sidecar ready"},
	}
	for _, c := range cases {
		_, err := sb.Client().BatchV1().Jobs(jobsNamespace).Create(ctx, c.job(), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(ctx, t, sb) })
	}
}

func (c sidecarJob) job() *batchv1.Job {
	sidecarCommand := "trap 'exit 0' TERM; "
	if c.readyAfter != "" {
		sidecarCommand += "sleep " + c.readyAfter + "; touch /shared/ready; "
	}
	sidecarCommand += "while true; do sleep 3600 & wait; done"
	mainCommand := `if [ -e /shared/ready ]; then echo "the sidecar was ready"; else echo "started without the sidecar ready"; fi`
	if c.readyAfter != "" {
		mainCommand = `[ -e /shared/ready ] || { echo "started before the sidecar was ready"; exit 3; }; echo "the sidecar was ready"`
	}
	shared := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	sidecar := sandbox.BusyboxPod("x").Spec.Containers[0]
	sidecar.Name, sidecar.Command, sidecar.VolumeMounts = "proxy", []string{"sh", "-c", sidecarCommand}, shared
	sidecar.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	main := sandbox.BusyboxPod("x").Spec.Containers[0]
	main.Name, main.Command, main.VolumeMounts = "main", []string{"sh", "-c", mainCommand}, shared
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: jobsNamespace},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					"sidecar-order.nri-suite.io/sidecars": "proxy",
					// An init container counts as a main unless the mains are named.
					"sidecar-order.nri-suite.io/mains":                      "main",
					"ready.sidecar-order.nri-suite.io/container.proxy":      "file:/shared/ready",
					"ready-timeout.sidecar-order.nri-suite.io/pod":          "5s",
					"on-timeout.sidecar-order.nri-suite.io/container.proxy": c.onTimeout,
				}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: new(int64(2)),
					InitContainers:                []corev1.Container{sidecar},
					Containers:                    []corev1.Container{main},
					Volumes:                       []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// check waits for the Job's outcome and checks it, what its main printed
// or its helper said, and that the sidecar stopped after the main.
func (c sidecarJob) check(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	jobs := sb.Client().BatchV1().Jobs(jobsNamespace)
	var outcome batchv1.JobConditionType
	require.NoError(t, sandbox.PollUntil(ctx, 2*time.Minute, 500*time.Millisecond, func() error {
		job, err := jobs.Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range job.Status.Conditions {
			if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
				outcome = cond.Type
				return nil
			}
		}
		return fmt.Errorf("job %s: neither Complete nor Failed yet: %+v", c.name, job.Status)
	}))
	pods, err := sb.Client().CoreV1().Pods(jobsNamespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + c.name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "one pod (backoffLimit 0)")
	pod := pods.Items[0]
	assert.Equal(t, c.want, outcome, "job %s: pod %s ended %s", c.name, pod.Name, pod.Status.Phase)

	main, sidecar := terminated(pod.Status.ContainerStatuses, "main"), terminated(pod.Status.InitContainerStatuses, "proxy")
	require.NotNil(t, main, "the main has exited")
	assert.Equal(t, c.wantMainExit, main.ExitCode, "the main's exit code")
	assert.Contains(t, containerLog(ctx, t, sb, pod.Name, "main"), c.wantMainLog)
	if c.wantHelper == "" {
		return
	}
	require.NotNil(t, sidecar, "the sidecar has exited")
	assert.Contains(t, containerLog(ctx, t, sb, pod.Name, "proxy"), c.wantHelper, "the sidecar's helper stopped it")
	assert.False(t, sidecar.FinishedAt.Before(&main.FinishedAt), "the sidecar stopped (%s) after the main (%s)",
		sidecar.FinishedAt.Time, main.FinishedAt.Time)
}

// terminated is the last termination of container name in statuses.
func terminated(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStateTerminated {
	for _, s := range statuses {
		if s.Name == name {
			if s.State.Terminated != nil {
				return s.State.Terminated
			}
			return s.LastTerminationState.Terminated
		}
	}
	return nil
}

// containerLog is container's log in pod of jobsNamespace, through the API.
func containerLog(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod, container string) string {
	logs, err := sb.Client().CoreV1().Pods(jobsNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	require.NoError(t, err)
	return string(logs)
}
