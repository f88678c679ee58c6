package plugin_test

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/plugin"
)

// greeter is a plugin: it implements one of the NRI stub's handler
// interfaces (stub.CreateContainerInterface).
type greeter struct{ log *logrus.Entry }

func (g *greeter) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	g.log.Infof("creating %s/%s", pod.GetName(), ctr.GetName())
	adjust := &api.ContainerAdjustment{}
	adjust.AddEnv("GREETING", "hello from nri-greeter")
	return adjust, nil, nil
}

// A binary's whole main: the plugin's name, a Factory building it from the
// runner's Deps, its NRI index and its HTTP address (metrics, /readyz).
func ExampleMain() {
	plugin.Main("greeter", func(deps plugin.Deps) (any, error) {
		return &greeter{log: deps.Log}, nil
	}, plugin.WithIdx("50"), plugin.WithHTTPAddr("127.0.0.1:9150"))
}
