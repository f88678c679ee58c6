// Package incluster is what a plugin does through the Kubernetes API server
// when it runs in a cluster, as the chart runs it (a DaemonSet pod with a
// service account): tell an uninstall from a restart, so that the plugin
// removes its node state only when the suite leaves the node, and delete
// the suite's DaemonSets so that each plugin sees that while its
// credentials still work (the chart's pre-delete hook).
//
// A plugin outside a cluster (pre-registered, or started by hand) never
// uses it: nothing here runs unless a flag or a subcommand asks for it.
package incluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client is a client of the API server with the pod's service account.
func Client() (kubernetes.Interface, error) {
	config, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server with the pod's service account: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server with the pod's service account: %w", err)
	}
	return client, nil
}

// DaemonSetRef names a DaemonSet.
type DaemonSetRef struct{ Namespace, Name string }

func (r DaemonSetRef) String() string { return r.Namespace + "/" + r.Name }

// ParseDaemonSetRef parses "namespace/name".
func ParseDaemonSetRef(s string) (DaemonSetRef, error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return DaemonSetRef{}, fmt.Errorf("DaemonSet %q: want namespace/name, a namespace and a DaemonSet name as Kubernetes allows them", s)
	}
	return DaemonSetRef{Namespace: namespace, Name: name}, nil
}

// Leaving reports whether the DaemonSet ref is gone or being deleted: the
// plugin it runs is leaving the node for good (an uninstall, or the plugin
// disabled), not restarting (a rolling update, an eviction, a drain, a
// crash), after which its pod comes back and needs its state. An error
// (the API server away, the credentials refused) tells neither.
func Leaving(ctx context.Context, client kubernetes.Interface, ref DaemonSetRef) (bool, error) {
	ds, err := client.AppsV1().DaemonSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("asking whether DaemonSet %s is being deleted: %w", ref, err)
	}
	return ds.DeletionTimestamp != nil, nil
}

// DeleteDaemonSets deletes the DaemonSets of namespace that selector
// matches, each in the foreground (it stays, being deleted, until its pods
// are gone), and waits until they are gone, polling every interval: then
// every plugin has seen its DaemonSet leaving while its pod, and so its
// service account, still existed. It returns the names it deleted.
func DeleteDaemonSets(ctx context.Context, client kubernetes.Interface, namespace, selector string, interval time.Duration) ([]string, error) {
	daemonSets := client.AppsV1().DaemonSets(namespace)
	list, err := daemonSets.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the DaemonSets of namespace %s that match %q: %w", namespace, selector, err)
	}
	foreground := metav1.DeletePropagationForeground
	var names []string
	for _, ds := range list.Items {
		err := daemonSets.Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: &foreground})
		if err != nil && !apierrors.IsNotFound(err) {
			return names, fmt.Errorf("deleting DaemonSet %s/%s: %w", namespace, ds.Name, err)
		}
		names = append(names, ds.Name)
	}
	for {
		left, err := daemonSets.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return names, fmt.Errorf("waiting for the DaemonSets of namespace %s that match %q to go: %w", namespace, selector, err)
		}
		if len(left.Items) == 0 {
			return names, nil
		}
		select {
		case <-ctx.Done():
			return names, fmt.Errorf("waiting for the DaemonSets of namespace %s that match %q to go: %d left, the first %s: %w",
				namespace, selector, len(left.Items), left.Items[0].Name, ctx.Err())
		case <-time.After(interval):
		}
	}
}
