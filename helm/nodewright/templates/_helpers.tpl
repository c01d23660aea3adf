{{/*
Names, labels and small derived values shared by the templates.
*/}}

{{- define "nodewright.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-based name; "nodewright" for a release called nodewright. */}}
{{- define "nodewright.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "nodewright.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Namespace of every namespaced object. helm uses "default" when -n is not given; the controller
belongs in kube-system on EKS (the IRSA trust names system:serviceaccount:kube-system:<sa>),
so "default" maps to kube-system. namespaceOverride wins over both.
*/}}
{{- define "nodewright.namespace" -}}
{{- if .Values.namespaceOverride -}}
{{- .Values.namespaceOverride -}}
{{- else if eq .Release.Namespace "default" -}}
kube-system
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodewright.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nodewright.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nodewright.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nodewright
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "nodewright.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nodewright.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest pins the image (the tag is then ignored). */}}
{{- define "nodewright.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
FEATURE_GATES in Karpenter's syntax: "Gate=true,Other=false", gates sorted by name.
settings.featureGates is either that string already or a map of camelCase gate -> bool.
*/}}
{{- define "nodewright.featureGates" -}}
{{- $gates := .Values.settings.featureGates -}}
{{- if kindIs "string" $gates -}}
{{- $gates -}}
{{- else -}}
{{- $parts := list -}}
{{- range $key := keys $gates | sortAlpha -}}
{{- $gate := printf "%s%s" (upper (substr 0 1 $key)) (substr 1 -1 $key) -}}
{{- $parts = append $parts (printf "%s=%t" $gate (index $gates $key)) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
{{- end -}}

{{/* Discovery selector term used when a node class lists no selector terms of its own. */}}
{{- define "nodewright.discoveryTerms" -}}
- tags:
    karpenter.sh/discovery: {{ .Values.settings.clusterName | quote }}
{{- end -}}

{{/*
The NodePools and EC2NodeClasses need the cluster (discovery tags, node role), so they render only
once settings.clusterName is set; an unconfigured render still lints and shows the controller.
*/}}
{{- define "nodewright.renderPools" -}}
{{- if .Values.settings.clusterName -}}true{{- end -}}
{{- end -}}

{{/* Node IAM role name: nodeRole, else the stacks' convention "<clusterName>-nodewright-node". */}}
{{- define "nodewright.nodeRole" -}}
{{- default (printf "%s-nodewright-node" .Values.settings.clusterName) .Values.nodeRole -}}
{{- end -}}

{{/* A pool is on unless it says `enabled: false` (a pool added without the key is on). */}}
{{- define "nodewright.poolEnabled" -}}
{{- if or (not (hasKey . "enabled")) .enabled -}}true{{- end -}}
{{- end -}}
