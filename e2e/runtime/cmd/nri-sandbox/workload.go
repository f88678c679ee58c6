package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
)

// manifest is one file of the workload: a Pod, a Deployment or a Job.
type manifest struct {
	file      string
	kind      string
	namespace string
	name      string
	// pod is the pod it makes (the template of a Deployment or Job), for
	// Sandbox.CannotRun.
	pod *corev1.Pod
	// selector selects its pods (a Deployment's or a Job's); empty for a Pod.
	selector *metav1.LabelSelector
}

// loadWorkload decodes every *.yaml in dir, sorted by file name.
func loadWorkload(dir string) ([]manifest, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing the workload's manifests in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("loading the workload: no *.yaml in %s", dir)
	}
	slices.Sort(files)
	workload := make([]manifest, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("loading the workload: %w", err)
		}
		m, err := decodeManifest(data)
		if err != nil {
			return nil, fmt.Errorf("loading the workload: %s: %w", file, err)
		}
		m.file = file
		workload = append(workload, m)
	}
	return workload, nil
}

// decodeManifest decodes one object, strictly: an unknown field is an error
// here rather than a field the API server drops.
func decodeManifest(data []byte) (manifest, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return manifest{}, fmt.Errorf("decoding manifest: %w", err)
	}
	var (
		obj      metav1.Object
		template corev1.PodTemplateSpec
		m        = manifest{kind: meta.Kind}
	)
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 Pod":
		pod := &corev1.Pod{}
		obj, m.pod = pod, pod
		if err := yaml.UnmarshalStrict(data, pod); err != nil {
			return manifest{}, fmt.Errorf("decoding Pod: %w", err)
		}
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(data, d); err != nil {
			return manifest{}, fmt.Errorf("decoding Deployment: %w", err)
		}
		obj, template, m.selector = d, d.Spec.Template, d.Spec.Selector
	case "batch/v1 Job":
		j := &batchv1.Job{}
		if err := yaml.UnmarshalStrict(data, j); err != nil {
			return manifest{}, fmt.Errorf("decoding Job: %w", err)
		}
		// The API server sets a Job's selector; its pods carry the job-name label.
		obj, template = j, j.Spec.Template
		m.selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.JobNameLabel: j.Name}}
	default:
		return manifest{}, fmt.Errorf("apiVersion %q kind %q: expected a v1 Pod, an apps/v1 Deployment or a batch/v1 Job", meta.APIVersion, meta.Kind)
	}
	m.name, m.namespace = obj.GetName(), obj.GetNamespace()
	if m.name == "" {
		return manifest{}, fmt.Errorf("%s: metadata.name is empty, expected a name", m.kind)
	}
	if m.namespace == "" {
		m.namespace = metav1.NamespaceDefault
	}
	if m.pod == nil {
		m.pod = &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
	}
	if len(m.pod.Spec.Containers) == 0 {
		return manifest{}, fmt.Errorf("%s %s: no containers, expected at least one", m.kind, m.name)
	}
	return m, nil
}

// applyWorkload applies the manifests with kubectl, one at a time, and
// waits for each one's pods (Ready, or a Job complete) before the next:
// placements then do not depend on how the kubelet interleaves the
// creations, and the report reads the same on every run. It returns the
// pods in manifest order.
func applyWorkload(ctx context.Context, sb *sandbox.Sandbox, workload []manifest, out io.Writer) ([]corev1.Pod, error) {
	var all []corev1.Pod
	for _, m := range workload {
		if _, err := sb.Kubectl(ctx, "apply", "-f", m.file); err != nil {
			return nil, fmt.Errorf("applying %s: %w", m.file, err)
		}
		fmt.Fprintf(out, "applied %s (kubectl apply -f %s)\n", m.describe(), m.file)
		pods, err := waitSettled(ctx, sb.Client(), m)
		if err != nil {
			return nil, err
		}
		all = append(all, pods...)
	}
	return all, nil
}

func (m manifest) describe() string { return m.kind + " " + m.namespace + "/" + m.name }

// settleTimeout bounds the wait for one manifest's pods.
const settleTimeout = 2 * time.Minute

// waitSettled waits until m's pods can be reported on and returns them.
func waitSettled(ctx context.Context, client kubernetes.Interface, m manifest) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var failed error
	err := sandbox.PollUntil(ctx, settleTimeout, 200*time.Millisecond, func() error {
		var err error
		pods, err = settled(ctx, client, m)
		if errors.Is(err, errJobFailed) {
			failed = err // no use waiting
			return nil
		}
		return err
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", m.describe(), err)
	}
	return pods, nil
}

// errJobFailed ends the wait for a Job: it will not complete.
var errJobFailed = errors.New("the Job failed")

// settled returns m's pods once they are where the report can read them:
// every pod of a Pod or Deployment Ready, a Job complete; otherwise an
// error that says what is missing.
func settled(ctx context.Context, client kubernetes.Interface, m manifest) ([]corev1.Pod, error) {
	if m.kind == "Job" {
		job, err := client.BatchV1().Jobs(m.namespace).Get(ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		pods, err := podsOf(ctx, client, m)
		if err != nil {
			return nil, err
		}
		switch jobCondition(job) {
		case batchv1.JobComplete:
			return pods, nil
		case batchv1.JobFailed:
			return nil, fmt.Errorf("%w: %s (pods: %s)", errJobFailed, jobMessage(job), describePods(pods))
		}
		return nil, fmt.Errorf("the Job is not complete (pods: %s)", describePods(pods))
	}
	pods, err := podsOf(ctx, client, m)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, errors.New("no pod yet")
	}
	for _, pod := range pods {
		if why := sandbox.PodNotReady(&pod); why != "" {
			return nil, fmt.Errorf("pod %s: %s", pod.Name, why)
		}
	}
	return pods, nil
}

// podsOf lists m's pods that are not being deleted, by name.
func podsOf(ctx context.Context, client kubernetes.Interface, m manifest) ([]corev1.Pod, error) {
	if m.selector == nil {
		pod, err := client.CoreV1().Pods(m.namespace).Get(ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return []corev1.Pod{*pod}, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(m.selector)
	if err != nil {
		return nil, fmt.Errorf("selecting the pods of %s: %w", m.describe(), err)
	}
	list, err := client.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// jobCondition is the Job's terminal condition (Complete or Failed) that
// holds, "" while it runs.
func jobCondition(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// jobMessage is the reason and message of the Job's Failed condition.
func jobMessage(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed {
			return strings.TrimSpace(c.Reason + " " + c.Message)
		}
	}
	return ""
}

// describePods names each pod with why it is not Ready, if it is not.
func describePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "none yet"
	}
	var out []string
	for _, p := range pods {
		why := sandbox.PodNotReady(&p)
		if why == "" {
			why = "Ready"
		}
		out = append(out, p.Name+" "+why)
	}
	return strings.Join(out, "; ")
}
