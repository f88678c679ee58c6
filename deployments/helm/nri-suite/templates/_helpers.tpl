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

{{/* The node's PID namespace: security's, and stats', which reads the network
counters of the node (pid 1) and of the pod sandboxes in /proc/<pid>/net/dev. */}}
{{- define "nri-suite.hostPID" -}}
{{- if or (include "nri-suite.hostNamespaces" .) (eq .name "stats") }}true{{ end -}}
{{- end -}}

{{/* The node's network namespace: security's, and stats' when asked (hostNetwork). */}}
{{- define "nri-suite.hostNetwork" -}}
{{- if or (include "nri-suite.hostNamespaces" .) (and (eq .name "stats") (index .root.Values.plugins .name).hostNetwork) }}true{{ end -}}
{{- end -}}

{{/* Whether stats reviews its requests with the API server (TokenReview, SubjectAccessReview). */}}
{{- define "nri-suite.reviewsRequests" -}}
{{- if and (eq .name "stats") (eq (index .root.Values.plugins .name).auth "webhook") }}true{{ end -}}
{{- end -}}

{{/* Whether topology-aware publishes the node's NodeResourceTopology. */}}
{{- define "nri-suite.publishesNRT" -}}
{{- if and (eq .name "topology-aware") .root.Values.nodeResourceTopology.enabled }}true{{ end -}}
{{- end -}}

{{/* Whether a plugin talks to the API server, and so has a service account
with a token (rbac.yaml), each use with its own least privilege: to see its
DaemonSet deleted at uninstall (uninstall.removeNodeState), to review the
requests to its endpoints (stats' auth webhook), to publish the node's
NodeResourceTopology (topology-aware), or to post Events and
device-injector's node condition (kubeAPI.events, kubeapi-rbac.yaml). */}}
{{- define "nri-suite.usesAPI" -}}
{{- if or .root.Values.uninstall.removeNodeState (include "nri-suite.reviewsRequests" .) (include "nri-suite.publishesNRT" .) .root.Values.kubeAPI.events }}true{{ end -}}
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

{{/* Whether a Prometheus Operator object is rendered: its value (.value)
true or false, or auto: when the cluster serves monitoring.coreos.com/v1
.kind (the operator's CRDs are installed; `helm template` needs
--api-versions monitoring.coreos.com/v1/<kind> for it). */}}
{{- define "nri-suite.monitorEnabled" -}}
{{- $v := toString .value -}}
{{- if or (eq $v "true") (and (eq $v "auto") (.root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind))) }}true{{ end -}}
{{- end -}}

{{/* Whether the chart sets up scraping of the plugins' /metrics (pod
annotations, a ServiceMonitor or a PodMonitor): the plugins on the node's
network then listen on the node's address too. */}}
{{- define "nri-suite.scraped" -}}
{{- $m := .Values.prometheus -}}
{{- if or $m.annotations (include "nri-suite.monitorEnabled" (dict "root" . "kind" "ServiceMonitor" "value" $m.serviceMonitor.enabled)) (include "nri-suite.monitorEnabled" (dict "root" . "kind" "PodMonitor" "value" $m.podMonitor.enabled)) }}true{{ end -}}
{{- end -}}

{{/* The runner's --http-addr: the pod's every address; on the node's
network its loopback (the probes), and when scraped also the node's address
that the kubelet reports as the pod's (and no other of the node's
addresses). */}}
{{- define "nri-suite.httpAddr" -}}
{{- $p := index .root.Values.plugins .name -}}
{{- if include "nri-suite.hostNetwork" . -}}
127.0.0.1:{{ $p.port }}{{ if include "nri-suite.scraped" .root }},[$(POD_IP)]:{{ $p.port }}{{ end }}
{{- else -}}
0.0.0.0:{{ $p.port }}
{{- end -}}
{{- end -}}

{{/* Labels that select every plugin's pods and Services of the release. */}}
{{- define "nri-suite.releaseSelector" -}}
app.kubernetes.io/part-of: nri-suite
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* What a monitor's targets get: the node's name as kubernetes_node (the
dashboard's and alerts' node label; topology-aware's own "node" is a NUMA
node). */}}
{{- define "nri-suite.monitorRelabelings" -}}
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: kubernetes_node
{{- end -}}

{{/* The endpoints of stats' listener for a monitor (.auth: how to
authenticate): every series that names a container, over HTTPS and with a
token, as the kubelet's are scraped. honorLabels keeps the containers'
namespace, pod and container labels rather than the plugin pod's; of its
/metrics only the series that name a container, the others are the
runner's /metrics' too. */}}
{{- define "nri-suite.statsEndpoints" -}}
{{- $stats := .root.Values.plugins.stats -}}
{{- $tls := .root.Values.prometheus.stats.tlsConfig | default (dict "insecureSkipVerify" true) -}}
{{- range $path := ternary (list "/metrics" "/metrics/cadvisor") (list "/metrics") (eq (toString $stats.cadvisor) "true") }}
- port: stats
  path: {{ $path }}
  scheme: https
  honorLabels: true
  {{- if $.interval }}
  interval: {{ $.interval }}
  {{- end }}
  tlsConfig:
    {{- toYaml $tls | nindent 4 }}
  {{- $.auth | nindent 2 }}
  relabelings:
    {{- include "nri-suite.monitorRelabelings" $ | nindent 4 }}
  {{- if eq $path "/metrics" }}
  # The rest of this /metrics is the runner's too, scraped there.
  metricRelabelings:
    - sourceLabels: [__name__]
      regex: nri_suite_stats_container_.*
      action: keep
  {{- end }}
{{- end }}
{{- end -}}

{{/* A plugin's pod settings (values.yaml says the precedence): its own
nodeSelector, tolerations, affinity and priorityClassName where set (even
empty), else the global ones; podAnnotations, podLabels and resources its
own merged over the global ones; extraArgs and extraEnv the global ones,
then its own. */}}
{{- define "nri-suite.podSettings" -}}
{{- $v := .root.Values -}}
{{- $p := index $v.plugins .name -}}
{{- $s := dict -}}
{{- range $key := list "nodeSelector" "tolerations" "affinity" "priorityClassName" }}
{{- $_ := set $s $key (ternary (index $p $key) (index $v $key) (hasKey $p $key)) }}
{{- end }}
{{- range $key := list "podAnnotations" "podLabels" "resources" }}
{{- $_ := set $s $key (merge (dict) (deepCopy (index $p $key | default dict)) (deepCopy (index $v $key | default dict))) }}
{{- end }}
{{- range $key := list "extraArgs" "extraEnv" }}
{{- $_ := set $s $key (concat (index $v $key | default list) (index $p $key | default list)) }}
{{- end }}
{{- toYaml $s }}
{{- end -}}

{{/* The podLabels or podAnnotations (.key) of a plugin's pods from the
values (.values: its podSettings), after the chart's own (.chart: a dict):
a key the chart sets fails, naming the value it came from, as a label
would unselect the pods from their DaemonSet, Services and uninstall hook,
and an annotation would undo the chart's. */}}
{{- define "nri-suite.podMeta" -}}
{{- $own := index .root.Values.plugins .name -}}
{{- range $key := keys (index .values .key) | sortAlpha }}
{{- if hasKey $.chart $key }}
{{- $from := ternary (printf "plugins.%s.%s" $.name $.key) $.key (hasKey (index $own $.key | default dict) $key) }}
{{- fail (printf "%s: %q is %s: expected another key" $from $key (ternary "a label the chart sets (its DaemonSets, Services and uninstall hook select the pods by them)" "an annotation the chart sets" (eq $.key "podLabels"))) }}
{{- end }}
{{- end }}
{{- with index .values .key }}
{{- toYaml . }}
{{- end }}
{{- end -}}
