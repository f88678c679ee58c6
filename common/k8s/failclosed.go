package k8s

import "strings"

// TolerateMissingPluginsAnnotation is the pod annotation that the suite's
// containerd drop-in names as NRI's tolerate_missing_plugins_annotation: a
// pod that sets it to "true" is created while a required plugin (security)
// is absent. NRI looks it up as <key>/container.<name>, then <key>/pod,
// then <key>. The suite's own pods carry it, so that a node can bootstrap;
// the security plugin refuses it elsewhere.
const TolerateMissingPluginsAnnotation = "tolerate-missing-plugins.nri-suite.io"

// ConfigSourceAnnotation is where the kubelet says where a pod came from:
// "api" for the API server's, "file" or "http" for static pods. The
// kubelet writes it on every pod it runs, over whatever the pod set.
const ConfigSourceAnnotation = "kubernetes.io/config.source"

// TolerateMissingPluginsKeys are the annotations of a pod that opt it, or
// one of its containers, out of the required-plugins validator, whatever
// their value.
func TolerateMissingPluginsKeys(podAnnotations map[string]string) []string {
	var keys []string
	for k := range podAnnotations {
		if k == TolerateMissingPluginsAnnotation || strings.HasPrefix(k, TolerateMissingPluginsAnnotation+"/") {
			keys = append(keys, k)
		}
	}
	return keys
}

// StaticPod reports whether the kubelet ran the pod from a file or URL on
// the node rather than from the API server: what only the node's
// administrator can write.
func StaticPod(podAnnotations map[string]string) bool {
	source := podAnnotations[ConfigSourceAnnotation]
	return source == "file" || source == "http"
}
