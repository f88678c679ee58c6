package incluster

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoAPI: neither a kubeconfig nor the pod's service account reaches an
// API server (a pre-registered plugin, or one started by hand).
var ErrNoAPI = errors.New("no API server: no --kubeconfig and not in a pod with a service account")

// requestTimeout bounds every request of a client from Config, so that an
// API server that stopped answering fails the request rather than hangs it.
const requestTimeout = 10 * time.Second

// Config is the client configuration from kubeconfig, or the pod's service
// account when kubeconfig is empty; ErrNoAPI when there is neither.
func Config(kubeconfig string) (*rest.Config, error) {
	var config *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		if config, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
	default:
		config, err = rest.InClusterConfig()
		// Outside a pod, or in one without a service account token.
		if errors.Is(err, rest.ErrNotInCluster) || errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoAPI
		}
		if err != nil {
			return nil, fmt.Errorf("connecting to the API server with the pod's service account (or --kubeconfig): %w", err)
		}
	}
	config.Timeout = requestTimeout
	return config, nil
}

// ClientFor is a client of Config(kubeconfig).
func ClientFor(kubeconfig string) (kubernetes.Interface, error) {
	config, err := Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("client of the API server %s: %w", config.Host, err)
	}
	return client, nil
}
