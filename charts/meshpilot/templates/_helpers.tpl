{{/*
The name of every object: the release's name when it contains "meshpilot"
(helm install meshpilot ... gives deploy/'s names), else
"<release>-meshpilot", so that two releases never share a cluster-wide
name (ClusterRole, binding, admission policy).
*/}}
{{- define "meshpilot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "meshpilot" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-meshpilot" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The Pods' selector: deploy/'s, so that a Deployment applied from deploy/
can be taken over by the chart (a selector cannot change). One release per
namespace: the replicas of a namespace balance among themselves.
*/}}
{{- define "meshpilot.selectorLabels" -}}
app.kubernetes.io/name: meshpilot
{{- end -}}

{{/* Every object's labels: the selector's and Helm's usual ones. */}}
{{- define "meshpilot.labels" -}}
{{ include "meshpilot.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* meshpilot's --system-namespace: the mesh config, remote Secrets, Leases. */}}
{{- define "meshpilot.systemNamespace" -}}
{{- .Values.systemNamespace | default .Release.Namespace -}}
{{- end -}}

{{- define "meshpilot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
