package endpointauth

import (
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The kubelet's mapping of a request to what its SubjectAccessReview asks
// (pkg/kubelet/server/auth.go of Kubernetes 1.37, whose fine-grained
// authorization is GA and always on): the node's name, the verb from the
// HTTP method, and the subresources of nodes from the path. A request is
// allowed when any of its subresources is. It is restated here because
// k8s.io/kubernetes must not enter the plugins' module; the table is the
// whole of it.
var (
	// fineGrained paths ask for their own subresource first, then for
	// the one of the second table.
	fineGrained = []struct{ path, subresource string }{
		{"/allocatedPods", "pods"},
		{"/pods", "pods"},
		{"/healthz", "healthz"},
		{"/configz", "configz"},
		{"/runningpods/", "pods"},
	}
	// subresources by path; any other path is nodes/proxy.
	subresources = []struct{ path, subresource string }{
		{"/stats/", "stats"},
		{"/metrics", "metrics"},
		{"/logs/", "log"},
		{"/checkpoint/", "checkpoint"},
		{"/statusz", "statusz"},
		{"/flagz", "configz"},
	}
	verbs = map[string]string{
		http.MethodPost: "create", http.MethodGet: "get", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete",
	}
)

// isSubpath is the kubelet's: subpath is path, or below it.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// nodeAttributes are the authorization attributes of a request to the
// endpoints of node, one per subresource it may be allowed by.
func nodeAttributes(node string, u user.Info, r *http.Request) []authorizer.Attributes {
	path := r.URL.Path
	var names []string
	for _, p := range fineGrained {
		if isSubpath(path, p.path) {
			names = append(names, p.subresource)
			break
		}
	}
	subresource := "proxy"
	for _, p := range subresources {
		if isSubpath(path, p.path) {
			subresource = p.subresource
			break
		}
	}
	names = append(names, subresource)
	attrs := make([]authorizer.Attributes, len(names))
	for i, name := range names {
		attrs[i] = authorizer.AttributesRecord{
			User: u, Verb: verbs[r.Method], APIVersion: "v1", Resource: "nodes", Subresource: name,
			Name: node, ResourceRequest: true, Path: path,
		}
	}
	return attrs
}
