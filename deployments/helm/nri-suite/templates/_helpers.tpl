{{/* Labels of every object of one plugin. */}}
{{- define "nri-suite.labels" -}}
app.kubernetes.io/name: nri-{{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: nri-suite
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ .root.Chart.Name }}-{{ .root.Chart.Version }}
{{- end -}}

{{- define "nri-suite.selector" -}}
app.kubernetes.io/name: nri-{{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "nri-suite.image" -}}
{{ .root.Values.image.registry }}/nri-{{ .name }}:{{ .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- end -}}

{{/* The object name of one plugin: <release>-<plugin>, at most 63 characters. */}}
{{- define "nri-suite.fullname" -}}
{{ printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Security and user-namespace policy need the host's PID and network namespaces to tell them from containers'. */}}
{{- define "nri-suite.hostNamespaces" -}}
{{- if eq .name "security" }}true{{ end -}}
{{- end -}}

{{/* The node's network namespace: security's, and stats' when asked (hostNetwork). */}}
{{- define "nri-suite.hostNetwork" -}}
{{- if or (include "nri-suite.hostNamespaces" .) (and (eq .name "stats") (index .root.Values.plugins .name).hostNetwork) }}true{{ end -}}
{{- end -}}

{{/* Whether stats reviews its requests with the API server (TokenReview, SubjectAccessReview). */}}
{{- define "nri-suite.reviewsRequests" -}}
{{- if and (eq .name "stats") (eq (index .root.Values.plugins .name).auth "webhook") }}true{{ end -}}
{{- end -}}

{{/* Whether a plugin talks to the API server, and so has a service account
with a token (rbac.yaml), each use with its own least privilege: to see its
DaemonSet deleted at uninstall (uninstall.removeNodeState), or to review the
requests to its endpoints (stats' auth webhook). */}}
{{- define "nri-suite.usesAPI" -}}
{{- if or .root.Values.uninstall.removeNodeState (include "nri-suite.reviewsRequests" .) }}true{{ end -}}
{{- end -}}

{{/* Every container: root (the NRI socket is root's) with no capability,
no privilege escalation and a read-only root filesystem. */}}
{{- define "nri-suite.containerSecurity" -}}
runAsUser: 0
runAsGroup: 0
runAsNonRoot: false
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The annotation that lets a pod's containers be created while security is
not connected: NRI's tolerate_missing_plugins_annotation in the containerd
drop-in. */}}
{{- define "nri-suite.tolerateKey" -}}
tolerate-missing-plugins.nri-suite.io
{{- end -}}

{{/* The annotation domains each plugin acts on (its README's keys): security
refuses a container whose pod carries one while that plugin is not connected,
rather than have it created without what it asks for (rule
annotated-plugins). topology-aware is not here: it places what it missed at
its next Synchronize. */}}
{{- define "nri-suite.annotationDomains" -}}
device-injector: [cdi-devices.nri-suite.io, devices.nri-suite.io, cdi.k8s.io, cdi-devices.noderesource.dev, devices.noderesource.dev, mounts.noderesource.dev, cdi-devices.nri.io, devices.nri.io, mounts.nri.io]
sidecar-order: [sidecar-order.nri-suite.io]
{{- end -}}
