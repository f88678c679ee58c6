package plugin

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/apievents"
	"github.com/nri-suite/nri-suite/common/fsread"
)

// errShuttingDown fails requests that arrive while the plugin is being closed.
var errShuttingDown = fmt.Errorf("plugin is shutting down")

// wrapper is what the stub sees. It implements every handler interface, forwards to
// the plugin what the plugin implements, and makes each call panic-safe and measured.
// Configure returns the plugin's own event mask, so the runtime sends nothing else.
type wrapper struct {
	plugin   any
	name     string
	events   api.EventMask
	log      *logrus.Entry
	metrics  *runnerMetrics
	status   *status
	recorder *apievents.Recorder // nil: no API server
	// closing is read-held by every running handler; drain write-locks it so that
	// Close never runs beside a handler. It is never unlocked again.
	closing sync.RWMutex
}

// configureEvent is the event of Configure requests, and of the --config file's
// application, in logs and metrics.
const configureEvent = "Configure"

// call runs fn as the handler of event for the given pod and container (either may be
// nil): it recovers a panic into an error, counts the outcome and times the call, and
// posts a refusal of the container as an Event on its pod.
func (w *wrapper) call(event string, pod *api.PodSandbox, ctr *api.Container, fn func() error) (err error) {
	if !w.closing.TryRLock() {
		return errShuttingDown
	}
	defer w.closing.RUnlock()

	log := w.log.WithFields(identity(event, pod, ctr))
	log.Debug("handling NRI request")
	start := time.Now()
	defer func() {
		outcome := outcomeOK
		if v := recover(); v != nil {
			outcome = outcomePanic
			w.metrics.panics.WithLabelValues(event).Inc()
			log.WithField("panic", fmt.Sprint(v)).WithField("stack", string(debug.Stack())).
				Error("recovered from a panic in the plugin's handler; failing this request only")
			err = fmt.Errorf("plugin %s: %s handler panicked: %v", w.name, event, v)
		} else if err != nil {
			outcome = outcomeError
			// A configuration's error is its caller's to report, once: the
			// runner's wait for a fixed --config file, the runtime's refused
			// registration.
			if event != configureEvent {
				log.WithError(err).Warn("handler failed")
			}
		}
		if err != nil {
			w.postRefusal(event, pod, ctr, err)
		}
		w.metrics.requests.WithLabelValues(event, outcome).Inc()
		w.metrics.duration.WithLabelValues(event).Observe(time.Since(start).Seconds())
	}()
	return fn()
}

// drain waits for running handlers and refuses new ones; it gives up after timeout so
// that a handler stuck forever cannot keep the process from stopping.
func (w *wrapper) drain(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		w.closing.Lock()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// identity gives the log fields that say which pod and container a request is about.
func identity(event string, pod *api.PodSandbox, ctr *api.Container) logrus.Fields {
	fields := logrus.Fields{"event": event}
	if pod != nil {
		fields["pod"] = pod.GetName()
		fields["namespace"] = pod.GetNamespace()
	}
	if ctr != nil {
		fields["container"] = ctr.GetName()
		fields["container_id"] = ctr.GetId()
	}
	return fields
}

// forward calls a plugin handler of interface T that returns only an error; a plugin
// without T never gets the event (the mask excludes it), so a stray call is a no-op.
func forward[T any](w *wrapper, event string, pod *api.PodSandbox, ctr *api.Container, fn func(T) error) error {
	h, ok := w.plugin.(T)
	if !ok {
		return nil
	}
	return w.call(event, pod, ctr, func() error { return fn(h) })
}

// Configure applies configuration the runtime delivers and subscribes the plugin to
// exactly the events it implements (less what an EventFilter leaves out).
func (w *wrapper) Configure(_ context.Context, config, runtime, version string) (api.EventMask, error) {
	w.status.registered(runtime + " " + version)
	if aware, ok := w.plugin.(RuntimeAware); ok {
		err := w.call(configureEvent, nil, nil, func() error { aware.SetRuntime(runtime, version); return nil })
		if err != nil {
			return 0, err
		}
	}
	if config != "" {
		source := "NRI Configure from " + runtime + " " + version
		err := w.call(configureEvent, nil, nil, func() error {
			c, ok := w.plugin.(Configurable)
			if !ok {
				return fmt.Errorf("the runtime delivered configuration (%s), but plugin %s takes none", source, w.name)
			}
			if len(config) > MaxConfigSize {
				return fmt.Errorf("configuration (%s): %d bytes, above the limit of %s", source, len(config), fsread.Size(MaxConfigSize))
			}
			return c.Configure([]byte(config), source)
		})
		if err != nil {
			return 0, err
		}
		w.log.WithField("source", source).Info("applied configuration")
	}
	return w.subscription()
}

// subscription is the events the plugin subscribes to: those it implements, less what
// an EventFilter leaves out on this runtime.
func (w *wrapper) subscription() (api.EventMask, error) {
	f, ok := w.plugin.(EventFilter)
	if !ok {
		return w.events, nil
	}
	events := f.Events(w.events) & w.events
	if events == 0 {
		return 0, fmt.Errorf("plugin %s subscribes to no NRI event on this runtime", w.name)
	}
	if events != w.events {
		w.log.WithField("events", (&events).PrettyString()).Info("subscribing to part of the implemented events on this runtime")
	}
	return events, nil
}

// Synchronize hands the runtime's pods and containers to the plugin; the plugin is
// ready once this succeeded.
func (w *wrapper) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (updates []*api.ContainerUpdate, err error) {
	if h, ok := w.plugin.(stub.SynchronizeInterface); ok {
		err = w.call("Synchronize", nil, nil, func() (err error) {
			updates, err = h.Synchronize(ctx, pods, ctrs)
			return err
		})
	}
	if err != nil {
		w.status.notReady("Synchronize failed: " + err.Error())
		return nil, err
	}
	w.status.synchronized()
	w.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(ctrs)}).Info("synchronized with the runtime")
	if len(ctrs) >= freeMemoryAfterSync {
		// The request is garbage now: 10,000 containers decode to some
		// 100 MiB that the garbage collector would hand back to the system
		// only over minutes, and the plugin lives on in a fraction of it.
		go debug.FreeOSMemory()
	}
	return updates, nil
}

// freeMemoryAfterSync is the number of containers from which a Synchronize
// returns its request's memory to the system at once, behind the reply.
const freeMemoryAfterSync = 1000

// Shutdown relays the runtime's notice that it is shutting down.
func (w *wrapper) Shutdown(ctx context.Context) {
	_ = forward(w, "Shutdown", nil, nil, func(h stub.ShutdownInterface) error {
		h.Shutdown(ctx)
		return nil
	})
}

func (w *wrapper) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return forward(w, "RunPodSandbox", pod, nil, func(h stub.RunPodInterface) error {
		return h.RunPodSandbox(ctx, pod)
	})
}

func (w *wrapper) UpdatePodSandbox(ctx context.Context, pod *api.PodSandbox, overhead, res *api.LinuxResources) error {
	return forward(w, "UpdatePodSandbox", pod, nil, func(h stub.UpdatePodInterface) error {
		return h.UpdatePodSandbox(ctx, pod, overhead, res)
	})
}

func (w *wrapper) PostUpdatePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return forward(w, "PostUpdatePodSandbox", pod, nil, func(h stub.PostUpdatePodInterface) error {
		return h.PostUpdatePodSandbox(ctx, pod)
	})
}

func (w *wrapper) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return forward(w, "StopPodSandbox", pod, nil, func(h stub.StopPodInterface) error {
		return h.StopPodSandbox(ctx, pod)
	})
}

func (w *wrapper) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return forward(w, "RemovePodSandbox", pod, nil, func(h stub.RemovePodInterface) error {
		return h.RemovePodSandbox(ctx, pod)
	})
}

func (w *wrapper) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (adjust *api.ContainerAdjustment, updates []*api.ContainerUpdate, err error) {
	err = forward(w, "CreateContainer", pod, ctr, func(h stub.CreateContainerInterface) (err error) {
		adjust, updates, err = h.CreateContainer(ctx, pod, ctr)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return adjust, updates, nil
}

func (w *wrapper) PostCreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return forward(w, "PostCreateContainer", pod, ctr, func(h stub.PostCreateContainerInterface) error {
		return h.PostCreateContainer(ctx, pod, ctr)
	})
}

func (w *wrapper) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return forward(w, "StartContainer", pod, ctr, func(h stub.StartContainerInterface) error {
		return h.StartContainer(ctx, pod, ctr)
	})
}

func (w *wrapper) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return forward(w, "PostStartContainer", pod, ctr, func(h stub.PostStartContainerInterface) error {
		return h.PostStartContainer(ctx, pod, ctr)
	})
}

func (w *wrapper) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) (updates []*api.ContainerUpdate, err error) {
	err = forward(w, "UpdateContainer", pod, ctr, func(h stub.UpdateContainerInterface) (err error) {
		updates, err = h.UpdateContainer(ctx, pod, ctr, res)
		return err
	})
	if err != nil {
		return nil, err
	}
	return updates, nil
}

func (w *wrapper) PostUpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return forward(w, "PostUpdateContainer", pod, ctr, func(h stub.PostUpdateContainerInterface) error {
		return h.PostUpdateContainer(ctx, pod, ctr)
	})
}

func (w *wrapper) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (updates []*api.ContainerUpdate, err error) {
	err = forward(w, "StopContainer", pod, ctr, func(h stub.StopContainerInterface) (err error) {
		updates, err = h.StopContainer(ctx, pod, ctr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return updates, nil
}

func (w *wrapper) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return forward(w, "RemoveContainer", pod, ctr, func(h stub.RemoveContainerInterface) error {
		return h.RemoveContainer(ctx, pod, ctr)
	})
}

func (w *wrapper) ValidateContainerAdjustment(ctx context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	return forward(w, "ValidateContainerAdjustment", req.GetPod(), req.GetContainer(), func(h stub.ValidateContainerAdjustmentInterface) error {
		return h.ValidateContainerAdjustment(ctx, req)
	})
}
