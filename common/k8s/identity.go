package k8s

import (
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
)

// Labels the kubelet sets on every pod sandbox and container it creates
// through CRI. A user's pod label of the same name is overwritten by the
// kubelet, so these are trustworthy.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Identity names a container the way Kubernetes does.
type Identity struct {
	Namespace string
	Pod       string
	PodUID    string
	Container string

	// PodSandboxID and ContainerID are the runtime's ids; they are what NRI
	// uses to refer to the pod and the container in later events.
	PodSandboxID string
	ContainerID  string
}

// IdentityOf names the container from the kubelet's labels, falling back to
// the fields NRI fills in itself when a label is absent (a pod created with
// crictl, for instance). The labels come first because the NRI fields differ
// by runtime, while the kubelet sets the labels identically everywhere.
// Both arguments may be nil.
func IdentityOf(pod *api.PodSandbox, ctr *api.Container) Identity {
	return Identity{
		Namespace:    firstLabel(LabelPodNamespace, pod.GetLabels(), ctr.GetLabels(), pod.GetNamespace()),
		Pod:          firstLabel(LabelPodName, pod.GetLabels(), ctr.GetLabels(), pod.GetName()),
		PodUID:       firstLabel(LabelPodUID, pod.GetLabels(), ctr.GetLabels(), pod.GetUid()),
		Container:    firstLabel(LabelContainerName, ctr.GetLabels(), nil, ctr.GetName()),
		PodSandboxID: pod.GetId(),
		ContainerID:  ctr.GetId(),
	}
}

// firstLabel returns the first non-empty value of label in primary, then
// secondary, then fallback.
func firstLabel(label string, primary, secondary map[string]string, fallback string) string {
	if v := primary[label]; v != "" {
		return v
	}
	if v := secondary[label]; v != "" {
		return v
	}
	return fallback
}

// String is the "namespace/pod/container" form used in logs and errors.
func (id Identity) String() string {
	return id.Namespace + "/" + id.Pod + "/" + id.Container
}

// Fields are the logrus fields every decision log carries, so that a log line
// can be found by the pod it concerns.
func (id Identity) Fields() logrus.Fields {
	return logrus.Fields{
		"pod":       id.Pod,
		"namespace": id.Namespace,
		"container": id.Container,
	}
}
