package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// statsGet GETs path from the stats listener of pod (its container port
// port) through a port-forward of the API server, with the kubeconfig's
// credentials: the chart's listener authenticates and authorizes them as
// the kubelet's port does (an admin's client certificate of the cluster's
// CA passes), and the API server's proxy cannot carry them (it drops the
// credentials it authenticated). The listener's certificate is not
// verified: it may be self-signed, and the port-forward already names the
// pod.
func (r *reporter) statsGet(ctx context.Context, pod *corev1.Pod, port, path string) ([]byte, error) {
	local, stop, err := r.forward(pod, port)
	if err != nil {
		return nil, err
	}
	defer stop()
	tlsConfig, err := rest.TLSConfigFor(r.config)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig's credentials: %w", err)
	}
	scheme := "http"
	if slices.Contains(pod.Spec.Containers[0].Args, "--stats-auth=webhook") {
		scheme = "https"
		tlsConfig = tlsConfig.Clone()
		tlsConfig.RootCAs, tlsConfig.InsecureSkipVerify = nil, true //nolint:gosec // see above
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, local, path), nil)
	if err != nil {
		return nil, err
	}
	if r.config.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+r.config.BearerToken)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// forward forwards a loopback port of this host to port of pod (as
// `kubectl port-forward`) and returns it and how to stop.
func (r *reporter) forward(pod *corev1.Pod, port string) (uint16, func(), error) {
	transport, upgrader, err := spdy.RoundTripperFor(r.config)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to pod %s: %w", pod.Name, err)
	}
	url := r.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + port}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to pod %s: %w", pod.Name, err)
	}
	failed := make(chan error, 1)
	go func() { failed <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		if err == nil {
			err = errors.New("stopped before it was ready")
		}
		return 0, nil, fmt.Errorf("port-forward to pod %s port %s: %w", pod.Name, port, err)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		close(stop)
		return 0, nil, fmt.Errorf("port-forward to pod %s port %s: no local port (%v)", pod.Name, port, err)
	}
	return ports[0].Local, func() { close(stop); <-failed }, nil
}
