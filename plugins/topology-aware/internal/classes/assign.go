package classes

import (
	"strings"

	"github.com/intel/goresctrl/pkg/blockio"
	"github.com/intel/goresctrl/pkg/kubernetes"
	"github.com/intel/goresctrl/pkg/rdt"

	"github.com/nri-suite/nri-suite/common/k8s"
)

// The suite's annotations, each also as <key>/pod and <key>/container.<name>
// (see k8s.Annotations for the precedence): the value is a class name.
const (
	AnnotationBlockIO = "blockio.nri-suite.io"
	AnnotationRDT     = "rdt.nri-suite.io"
)

// annotationKeys are the pod annotations that choose a class of a kind: the
// suite's, and the kubelet's (KEP-3008's, which containerd and CRI-O read
// themselves), as goresctrl names them.
type annotationKeys struct {
	suite string
	// The kubelet's: for one container (prefix + its name), for the pod,
	// and the CRI container annotation, which is the runtime's, not the
	// pod author's, and never set here.
	kubeletContainerPrefix, kubeletPod, criContainer string
}

func keysOf(kind Kind) annotationKeys {
	if kind == BlockIO {
		return annotationKeys{AnnotationBlockIO, blockio.BlockioPodAnnotationContainerPrefix, blockio.BlockioPodAnnotation, blockio.BlockioContainerAnnotation}
	}
	return annotationKeys{AnnotationRDT, rdt.RdtPodAnnotationContainerPrefix, rdt.RdtPodAnnotation, rdt.RdtContainerAnnotation}
}

// Assignment is a container's classes; "" is none.
type Assignment struct {
	BlockIO string `json:"blockio,omitempty"`
	RDT     string `json:"rdt,omitempty"`
}

// Of returns the class of kind.
func (a Assignment) Of(kind Kind) string {
	if kind == BlockIO {
		return a.BlockIO
	}
	return a.RDT
}

// with returns a with the class of kind set.
func (a Assignment) with(kind Kind, class string) Assignment {
	if kind == BlockIO {
		a.BlockIO = class
	} else {
		a.RDT = class
	}
	return a
}

// Container is what a container's classes are chosen by.
type Container struct {
	Name      string
	Namespace string
	QOS       k8s.QOSClass
	// PodAnnotations are its pod's: the only ones the pod's author controls
	// (see k8s.Annotations).
	PodAnnotations map[string]string
}

// Choose returns the container's class of the rules' kind, strongest first:
// the suite's annotation (<kind>.nri-suite.io/container.<name>, /pod, bare),
// the kubelet's (<kind>.resources.beta.kubernetes.io/container.<name>,
// /pod), its namespace's, its pod QoS class's; else none. Without classes of
// the kind the kubelet's annotations are left to the runtime, which reads
// them itself.
func (r Rules) Choose(ctr Container) (string, error) {
	keys := keysOf(r.Kind)
	value, key, found, err := k8s.NewAnnotations(ctr.PodAnnotations, ctr.Name).Lookup(keys.suite)
	if err != nil {
		return "", err
	}
	if found {
		return r.annotated(key, value)
	}
	if len(r.Names) > 0 {
		value, origin := kubernetes.ContainerClassFromAnnotations(keys.criContainer, keys.kubeletPod, keys.kubeletContainerPrefix,
			ctr.Name, nil, ctr.PodAnnotations)
		if origin != kubernetes.ClassOriginNotFound {
			key := keys.kubeletPod
			if _, own := ctr.PodAnnotations[keys.kubeletContainerPrefix+ctr.Name]; own {
				key = keys.kubeletContainerPrefix + ctr.Name
			}
			return r.annotated(key, value)
		}
	}
	if class, ok := r.Namespaces[ctr.Namespace]; ok {
		return class, nil
	}
	return r.QOS[ctr.QOS], nil
}

// annotated checks the class the annotation key asks for.
func (r Rules) annotated(key, value string) (string, error) {
	if err := k8s.CheckSize(key, value, maxClassName); err != nil {
		return "", err
	}
	class := strings.TrimSpace(value)
	switch {
	case !r.Defined(class):
		return "", &k8s.AnnotationError{Key: key, Value: value, Want: r.describe()}
	case r.noPodAnnotation[class]:
		return "", &k8s.AnnotationError{Key: key, Value: value, Want: "a class that pods may choose: the configuration sets kubernetes.denyPodAnnotation for this one"}
	}
	return class, nil
}
