package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/incluster"
	"github.com/nri-suite/nri-suite/common/k8s"
)

// ReasonRefused is the reason of the Warning Event a plugin's refusal of a
// container posts on its pod, the same for every plugin: the Event's source
// (nri-<plugin>) and message name the plugin and its reason.
const ReasonRefused = "NRIRefused"

// refusals are the NRI requests whose failure refuses what the runtime was
// doing to a container (it fails the creation, or the update), and what
// that was; a failure of the others is only logged by the runtime.
var refusals = map[string]string{
	"CreateContainer":             "creation",
	"ValidateContainerAdjustment": "creation",
	"UpdateContainer":             "update",
}

// connectAPI makes the client and the Event recorder of the API server
// (--kubeconfig, else the pod's service account), leaving both nil when
// --api-events is off or there is no API server to reach; Run says which in
// the log, once (noAPI): what the plugin does stays in its records and
// metrics. A --kubeconfig that cannot be loaded is an error.
func (r *Runner) connectAPI(namespace string) (kubernetes.Interface, error) {
	if !r.settings.APIEvents {
		r.noAPI = "--api-events=false"
		return nil, nil
	}
	client, err := incluster.ClientFor(r.settings.Kubeconfig)
	if errors.Is(err, incluster.ErrNoAPI) {
		r.noAPI = incluster.ErrNoAPI.Error()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.events, err = apievents.New(client, apievents.Options{Component: "nri-" + r.settings.Plugin, Host: r.settings.NodeName,
		Registry: r.registry, Namespace: namespace, Log: r.log.WithField("component", "events")})
	if err != nil {
		return nil, err
	}
	return client, nil
}

// startAPI starts writing the Events posted, or says once why there are
// none; stop ends the writing (what is queued then is lost) and waits for
// it, so that nothing of the runner outlives Run.
func (r *Runner) startAPI(ctx context.Context) (stop func()) {
	if r.events == nil {
		r.log.Info(r.noAPI + ": no Events nor node conditions in the API server; the plugin's records and metrics say what it does")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.events.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// postRefusal posts the Warning Event of the plugin's refusal of event (err)
// on the container's pod, if event is one that refuses.
func (w *wrapper) postRefusal(event string, pod *api.PodSandbox, ctr *api.Container, err error) {
	what, ok := refusals[event]
	if !ok || pod == nil {
		return
	}
	id := k8s.IdentityOf(pod, ctr)
	w.recorder.Post(apievents.PodRef{Namespace: id.Namespace, Name: id.Pod, UID: id.PodUID}, corev1.EventTypeWarning, ReasonRefused,
		fmt.Sprintf("%s refused the %s of container %s: %v", w.name, what, id.Container, err))
}
