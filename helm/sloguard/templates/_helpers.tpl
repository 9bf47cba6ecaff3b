{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "sloguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release name already contains the chart name. */}}
{{- define "sloguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sloguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sloguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sloguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sloguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sloguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sloguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sloguard.secretName" -}}
{{- default (include "sloguard.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* True when secret files are mounted: an existing Secret or chart-created files. */}}
{{- define "sloguard.hasSecret" -}}
{{- if or .Values.secrets.existingSecret .Values.secrets.files }}true{{ end }}
{{- end }}

{{/* The sloguard.yaml text: values.config with the chart-owned listen address and state dir. */}}
{{- define "sloguard.config" -}}
{{- $owned := dict "listen" (printf ":%d" (int .Values.service.port)) "state_dir" "/var/lib/sloguard" }}
{{- mustMergeOverwrite (deepCopy .Values.config) $owned | toYaml }}
{{- end }}

{{/* Where /var/lib/sloguard lives: hostPath, emptyDir or pvc ("" picks by mode). Fails on combinations that lose or corrupt it. */}}
{{- define "sloguard.stateType" -}}
{{- $type := .Values.state.type | default (ternary "hostPath" "emptyDir" (eq .Values.mode "daemonset")) }}
{{- if and (eq $type "pvc") (eq .Values.mode "daemonset") }}
{{- fail "state.type=pvc needs mode=deployment: DaemonSet pods on different nodes cannot share one ReadWriteOnce claim (use hostPath)" }}
{{- end }}
{{- if and (eq $type "pvc") (gt (int .Values.replicaCount) 1) }}
{{- fail "state.type=pvc needs replicaCount=1: one SQLite store cannot be shared by several pods" }}
{{- end }}
{{- $type }}
{{- end }}

{{- define "sloguard.stateHostPath" -}}
{{- .Values.state.hostPath | default (printf "/var/lib/sloguard/%s-%s" .Release.Namespace (include "sloguard.fullname" .)) }}
{{- end }}

{{- define "sloguard.stateClaimName" -}}
{{- .Values.state.existingClaim | default (printf "%s-state" (include "sloguard.fullname" .)) }}
{{- end }}

{{/* The image: there is no public one, so image.repository must be set (build it from the Dockerfile). */}}
{{- define "sloguard.image" -}}
{{- $repo := required "image.repository is required: no public sloguard image exists. Build it from the repository's Dockerfile (docker build -t REGISTRY/sloguard:TAG .), push it, then set --set image.repository=REGISTRY/sloguard (docs/deploy.md, Helm)" .Values.image.repository -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}
