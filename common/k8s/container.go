package k8s

import "github.com/containerd/nri/pkg/api"

// Container is one container in Kubernetes terms.
type Container struct {
	Identity
	QOS         QOSClass
	QOSSource   QOSSource
	Resources   Resources
	Annotations Annotations
}

// FromNRI describes the container ctr of pod as NRI passes them at create,
// update or synchronize. Both arguments may be nil. For UpdateContainer, the
// new resources arrive separately: use EstimateResources on them, then
// ForQOS.
func FromNRI(pod *api.PodSandbox, ctr *api.Container) Container {
	id := IdentityOf(pod, ctr)
	qos, source := QOSClassOf(pod, ctr)
	return Container{
		Identity:    id,
		QOS:         qos,
		QOSSource:   source,
		Resources:   EstimateResources(ctr.GetLinux().GetResources()).ForQOS(qos),
		Annotations: NewAnnotations(pod.GetAnnotations(), id.Container),
	}
}
