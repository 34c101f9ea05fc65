{{/*
The four controllers, in the order their objects are rendered. Each one is
its own binary (/<controller> in the image), Deployment, ServiceAccount,
ClusterRole and leader-election lease.
*/}}
{{- define "metallb-iad.controllers" -}}
class claim service ipaddress
{{- end }}

{{/* The chart name, or nameOverride. */}}
{{- define "metallb-iad.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name prefix of every object: fullnameOverride, else the release name when
it already contains the chart name, else "<release>-<chart>". Per-controller
objects append "-<controller>", so the prefix leaves room for the longest
suffix ("-ipaddress-leader-election") within 63 characters.
*/}}
{{- define "metallb-iad.fullname" -}}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 37 | trimSuffix "-" }}
{{- else if contains $name .Release.Name }}
{{- .Release.Name | trunc 37 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 37 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "metallb-iad.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of one controller's objects: "<fullname>-<controller>".
Call with (dict "root" $ "c" "<controller>").
*/}}
{{- define "metallb-iad.componentName" -}}
{{- printf "%s-%s" (include "metallb-iad.fullname" .root) .c }}
{{- end }}

{{/*
Labels shared by every object of the release: the chart's own, then the
user's commonLabels. A commonLabels key the chart sets itself (here or as
app.kubernetes.io/component) is dropped: the chart's value stays, and the
selectors built on it with it. Call with the root context.
*/}}
{{- define "metallb-iad.commonLabels" -}}
helm.sh/chart: {{ include "metallb-iad.chart" . }}
app.kubernetes.io/name: {{ include "metallb-iad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with omit (.Values.commonLabels | default dict) "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/component" }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels that select one controller's pods; they never change across
upgrades (a Deployment's selector is immutable).
Call with (dict "root" $ "c" "<controller>").
*/}}
{{- define "metallb-iad.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metallb-iad.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .c }}
{{- end }}

{{/* All labels of one controller's objects. Call with (dict "root" $ "c" "<controller>"). */}}
{{- define "metallb-iad.labels" -}}
{{ include "metallb-iad.commonLabels" .root }}
app.kubernetes.io/component: {{ .c }}
{{- end }}

{{/*
The container image: repository@digest when a digest is set (the tag is then
ignored: a released chart carries its release's digest), else
repository:tag, the tag defaulting to appVersion.
*/}}
{{- define "metallb-iad.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The containers' pull policy: the former top-level imagePullPolicy when set
(older values files keep working), else image.pullPolicy; empty leaves it to
Kubernetes.
*/}}
{{- define "metallb-iad.pullPolicy" -}}
{{- default .Values.image.pullPolicy .Values.imagePullPolicy }}
{{- end }}

{{/*
The settings of one controller that have a shared default: each field of
.Values.defaults, unless the controller's own value is non-empty. Maps and
lists are taken whole from one side, never merged; leaderElection's three
durations are taken one by one, and serviceAccount.annotations as a whole.
Rendered as JSON, read back with fromJson.
Call with (dict "root" $ "c" "<controller>").
*/}}
{{- define "metallb-iad.settings" -}}
{{- $d := .root.Values.defaults | default dict }}
{{- $v := index .root.Values.controllers .c | default dict }}
{{- $out := dict }}
{{- range $k := list "resources" "nodeSelector" "tolerations" "affinity" "topologySpreadConstraints" "podLabels" "podAnnotations" "priorityClassName" "securityContext" "containerSecurityContext" "logLevel" "logFormat" }}
{{- $_ := set $out $k (default (index $d $k) (index $v $k)) }}
{{- end }}
{{- $dle := $d.leaderElection | default dict }}
{{- $vle := $v.leaderElection | default dict }}
{{- $le := dict }}
{{- range $k := list "leaseDuration" "renewDeadline" "retryPeriod" }}
{{- $_ := set $le $k (default (index $dle $k) (index $vle $k)) }}
{{- end }}
{{- $_ := set $out "leaderElection" $le }}
{{- $dsa := $d.serviceAccount | default dict }}
{{- $vsa := $v.serviceAccount | default dict }}
{{- $_ = set $out "serviceAccount" (dict "annotations" (default $dsa.annotations $vsa.annotations | default dict)) }}
{{- toJson $out }}
{{- end }}

{{/* The namespace of the placeholder Services: placeholderNamespace, else the release namespace. */}}
{{- define "metallb-iad.placeholderNamespace" -}}
{{- default .Release.Namespace .Values.placeholderNamespace }}
{{- end }}

{{/*
The TCP port of a metrics bind address (":8080" -> 8080, "[::]:9090" ->
9090), or nothing when the address is "0" (metrics disabled).
*/}}
{{- define "metallb-iad.metricsPort" -}}
{{- if ne . "0" }}
{{- regexReplaceAll "^.*:" . "" }}
{{- end }}
{{- end }}

{{/*
Non-empty when at least one controller serves metrics (a metricsBindAddress
other than "0"). Call with the root context.
*/}}
{{- define "metallb-iad.metricsServed" -}}
{{- range $c := include "metallb-iad.controllers" $ | splitList " " }}
{{- if include "metallb-iad.metricsPort" (index $.Values.controllers $c).metricsBindAddress }}true{{ end }}
{{- end }}
{{- end }}

{{/*
The name of the chart's own metrics scraper: its ServiceAccount and
ClusterRoleBinding, and (with "-token") its token Secret.
*/}}
{{- define "metallb-iad.metricsScraperName" -}}
{{- printf "%s-metrics-scraper" (include "metallb-iad.fullname" .) }}
{{- end }}

{{/*
Non-empty when the chart renders its metrics scraper (metrics-rbac.yaml):
metrics are secure, a ServiceMonitor or PodMonitor is on, and a controller
serves metrics for it to scrape.
*/}}
{{- define "metallb-iad.metricsScraper" -}}
{{- $m := .Values.metrics }}
{{- if and $m.secure (or $m.serviceMonitor.enabled $m.podMonitor.enabled) (include "metallb-iad.metricsServed" .) }}true{{ end }}
{{- end }}

{{/*
How a ServiceMonitor endpoint or a PodMonitor podMetricsEndpoint reaches
/metrics, as YAML fields for the caller to indent. Secure: HTTPS with the
scraper's token (authorization) and metrics.tlsConfig, by default no
certificate check, since each controller serves a self-signed certificate
it makes at start. Otherwise plain HTTP without a token.
*/}}
{{- define "metallb-iad.metricsScrape" -}}
{{- if .Values.metrics.secure -}}
scheme: https
tlsConfig:
  {{- toYaml (.Values.metrics.tlsConfig | default (dict "insecureSkipVerify" true)) | nindent 2 }}
authorization:
  type: Bearer
  credentials:
    name: {{ include "metallb-iad.metricsScraperName" . }}-token
    key: token
{{- else -}}
scheme: http
{{- end }}
{{- end }}

{{/*
The ServiceAccount usernames of the controllers that write the reserved
Service fields (service pins workloads; claim and ipaddress pin
placeholders), as a list: system:serviceaccount:<namespace>:<fullname>-<c>.
Rendered as JSON, read back with fromJsonArray.
*/}}
{{- define "metallb-iad.writerServiceAccounts" -}}
{{- $out := list }}
{{- range $c := list "service" "claim" "ipaddress" }}
{{- $out = append $out (printf "system:serviceaccount:%s:%s" $.Release.Namespace (include "metallb-iad.componentName" (dict "root" $ "c" $c))) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
The PromQL label matchers that select one controller's pods, by the
namespace and pod labels Prometheus Operator's ServiceMonitor and PodMonitor
attach (a Deployment's pods are <deployment>-<hash>-<suffix>).
Call with (dict "root" $ "c" "<controller>").
*/}}
{{- define "metallb-iad.podMatchers" -}}
{{- printf "namespace=%q,pod=~%q" .root.Release.Namespace (printf "%s-[a-z0-9]+-[a-z0-9]+" (include "metallb-iad.componentName" .)) }}
{{- end }}

{{/*
The Secret the claim, service and ipaddress controllers derive MetalLB
sharing keys from: sharingKey.existingSecret, or <fullname>-sharing-key,
which the first of them to start creates.
*/}}
{{- define "metallb-iad.sharingKeySecret" -}}
{{- .Values.sharingKey.existingSecret | default (printf "%s-sharing-key" (include "metallb-iad.fullname" .)) -}}
{{- end }}

{{/*
The namespace and the name of the sharing-key Secret: existingSecret may be
NAME (in the release namespace) or NAMESPACE/NAME.
*/}}
{{- define "metallb-iad.sharingKeyNamespace" -}}
{{- $ref := include "metallb-iad.sharingKeySecret" . -}}
{{- if contains "/" $ref -}}{{ first (splitList "/" $ref) }}{{- else -}}{{ .Release.Namespace }}{{- end -}}
{{- end }}

{{- define "metallb-iad.sharingKeyName" -}}
{{- last (splitList "/" (include "metallb-iad.sharingKeySecret" .)) -}}
{{- end }}
