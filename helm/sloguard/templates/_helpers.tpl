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
{{- $repo := required "image.repository is required: no public sloguard image exists. Build it (scripts/build-image.sh --tag REGISTRY/sloguard:TAG, or docker build -t REGISTRY/sloguard:TAG .), push it, then set --set image.repository=REGISTRY/sloguard (docs/kubernetes.md)" .Values.image.repository -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}

{{/* "true" for a Deployment of more than one replica (HA). */}}
{{- define "sloguard.ha" -}}
{{- if and (eq .Values.mode "deployment") (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/* "true" when sloguard talks to the Kubernetes API (discovery, leader election): only then a token. */}}
{{- define "sloguard.apiAccess" -}}
{{- if or .Values.rbac.discovery.enabled .Values.rbac.leaderElection.enabled }}true{{ else }}false{{ end }}
{{- end }}

{{/* The namespaces discovery reads: rbac.discovery.namespaces, or the release's own. */}}
{{- define "sloguard.discoveryNamespaces" -}}
{{- .Values.rbac.discovery.namespaces | default (list .Release.Namespace) | toJson }}
{{- end }}

{{/* The pod's node, name and namespace (downward API): discovery's `node: ${NODE_NAME}` in DaemonSet mode. */}}
{{- define "sloguard.downwardEnv" -}}
- name: NODE_NAME
  valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- end }}

{{/* Labels of the `sloguard check` pods: not the daemon's selector labels, so no Service, monitor or PodDisruptionBudget selects them. */}}
{{- define "sloguard.checkLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ printf "%s-check" (include "sloguard.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The pod spec of a `sloguard check` run (config-check hook, helm test): dict root, config (ConfigMap name), secrets (mount them), args. */}}
{{- define "sloguard.checkPodSpec" -}}
{{- $v := .root.Values -}}
serviceAccountName: {{ include "sloguard.serviceAccountName" .root }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: check
    image: {{ include "sloguard.image" .root | quote }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    args: {{ toJson .args }}
    securityContext:
      {{- toYaml $v.securityContext | nindent 6 }}
    resources:
      requests: {cpu: 50m, memory: 64Mi}
      limits: {memory: 256Mi}
    volumeMounts:
      - {name: config, mountPath: /etc/sloguard/sloguard.yaml, subPath: sloguard.yaml, readOnly: true}
      # check reports whether state_dir is writable: a scratch one, as the daemon's volume would be.
      - {name: state, mountPath: /var/lib/sloguard}
      - {name: tmp, mountPath: /tmp}
      {{- if and .secrets (include "sloguard.hasSecret" .root) }}
      - {name: secrets, mountPath: /etc/sloguard/secrets, readOnly: true}
      {{- end }}
volumes:
  - name: config
    configMap: {name: {{ .config }}}
  - name: state
    emptyDir: {sizeLimit: 16Mi}
  - name: tmp
    emptyDir: {sizeLimit: 64Mi}
  {{- if and .secrets (include "sloguard.hasSecret" .root) }}
  - name: secrets
    secret:
      secretName: {{ include "sloguard.secretName" .root }}
      defaultMode: 0440
  {{- end }}
{{- end }}
